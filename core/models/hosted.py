"""Hosted mode (``ENCODERLAB_HOSTED=1``): what a visitor may name as a checkpoint, and messages without server paths.

On the hosted demo the sidebar's custom box takes Hugging Face ids only: the operator's allowlist
(``ENCODERLAB_HUB_ALLOWLIST``, comma-separated; by default the official checkpoints EncoderLab knows) or, when
downloads are allowed (``ENCODERLAB_ALLOW_DOWNLOAD=1``), any well-formed id. A path typed there (``/etc``,
``../x``, ``~/x``, ``C:\\x``, a folder that happens to exist) is refused with a message that repeats no path.
Folders the server itself made or ships (bundled models, this session's runs, the HF cache) still load: the
picker names them, never the visitor.
"""

from __future__ import annotations

import re
from pathlib import Path

from core.base import settings
from core.base.messages import msg
from core.base.paths import server_folders
from core.models.downloads import allow_download
from core.registry import ModelLoadError, official_checkpoints

# A Hub id: "name" or "owner/name", letters, digits, '-', '_', '.'; no "..", no leading '.' or '-'.
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})?$")


class HostedRefusal(ModelLoadError):
    """The hosted server will not load what was named; the message says what it accepts."""


def enabled() -> bool:
    return settings.hosted()


def allowlist() -> tuple[str, ...]:
    """Hub ids the custom box accepts in hosted mode (without downloads): the operator's list, or the official
    checkpoints EncoderLab knows."""
    listed = settings.current().hub_allowlist
    if listed:
        return listed
    return tuple(c.id for c in official_checkpoints())


def looks_like_path(text: str) -> bool:
    t = text.strip()
    return (
        t.startswith(("/", ".", "~", "\\"))
        or "\\" in t
        or ".." in t
        or t.count("/") > 1
        or re.match(r"^[A-Za-z]:", t) is not None
        or t in (".", "..")
    )


def check_custom_checkpoint(text: str) -> None:
    """In hosted mode, raise HostedRefusal unless ``text`` is a Hub id this server accepts (or a bundled
    ``encoderlab/NAME`` id). Does nothing outside hosted mode."""
    if not enabled():
        return
    t = (text or "").strip()
    if not t:
        return  # ModelSpec says the box is empty
    if looks_like_path(t) or not _HUB_ID.match(t) or (Path(t).exists() and not t.startswith("encoderlab/")):
        raise HostedRefusal(msg("hosted.no_server_paths"))
    if t.startswith("encoderlab/"):
        return
    if allow_download():
        return
    if t not in allowlist():
        raise HostedRefusal(msg("hosted.not_among_models_hosted", checkpoint=t))


def check_folder(folder: str | Path) -> None:
    """In hosted mode, raise HostedRefusal for a folder outside ``server_folders()`` (defence in depth: the custom
    box already refuses paths). Does nothing outside hosted mode."""
    if not enabled():
        return
    p = Path(folder).expanduser().resolve()
    if not any(p == root or root in p.parents for root in server_folders()):
        raise HostedRefusal(msg("hosted.own_folders_only"))

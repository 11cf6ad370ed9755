"""Where things are: the checkout, its assets, the bundled models, the folders the server itself writes; and the
one function that takes those paths out of a message shown in hosted mode (``scrub``).

Lives at the bottom of core (base) because an error's text is scrubbed wherever it is raised, the registry's
``ModelLoadError`` included.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from core.base import settings

REPO_ROOT = Path(__file__).resolve().parents[2]
ASSETS = REPO_ROOT / "assets"
SERVER_PATH = "<server folder>"
# An absolute POSIX path or a Windows drive path, not part of a URL (no ':' or '/' or a word character before it).
_ABS_PATH = re.compile(r"(?<![\w:/.])(?:/(?:[\w.@+-]+/?)+|[A-Za-z]:\\[^\s'\"]*)")


def zoo_dir() -> Path:
    """Folder of the bundled offline models (ENCODERLAB_ZOO, default assets/models)."""
    return Path(os.environ.get("ENCODERLAB_ZOO", ASSETS / "models"))


def hf_home() -> Path:
    """The Hugging Face cache's root (HF_HOME, default ~/.cache/huggingface)."""
    return Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))


def server_folders() -> tuple[Path, ...]:
    """The folders the server itself may load models from in hosted mode: the zoo, the runs, the HF cache."""
    return tuple(p.resolve() for p in (zoo_dir(), settings.runs_base(), hf_home()))


def scrub(message: str) -> str:
    """In hosted mode, ``message`` with server paths replaced by a placeholder; unchanged otherwise."""
    if not settings.hosted() or not message:
        return message
    out = message
    roots = [str(p) for p in _known_roots() if str(p) not in ("/", "")]
    for root in sorted(roots, key=len, reverse=True):  # the longest first, so a nested root wins
        out = re.sub(re.escape(root) + r"[^\s'\"),;]*", SERVER_PATH, out)
    return _ABS_PATH.sub(SERVER_PATH, out)


def _known_roots() -> list[Path]:
    roots = [REPO_ROOT, Path(tempfile.gettempdir()), Path.home()]
    try:
        roots += list(server_folders())
    except Exception:  # a half-configured environment: the generic pattern in scrub still applies
        pass
    return roots

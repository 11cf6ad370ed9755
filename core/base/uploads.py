"""Uploaded files: the one decoder every upload goes through, so the pages refuse the same files with the same words.

``read_upload`` refuses, each with its own ``reason`` (a key of assets/i18n/uploads.toml's ``[rejected]`` table,
where both languages of the message live): a file whose extension the box does not take (``wrong_type``), one over
the upload limit (``too_big``: ENCODERLAB_MAX_UPLOAD_MB; `server.maxUploadSize` is Streamlit's own, larger or
equal), a binary file (``binary``: a NUL byte, which never occurs in text but does in spreadsheets, archives and
images, git's and grep's test; or many control bytes), text that is not UTF-8 (``not_utf8``, naming the line: a
Latin-1 or GBK file is not guessed at, the message says to save it as UTF-8), and a file with no text (``empty``).
UTF-16 with its byte-order mark (Windows Notepad's "Unicode") is decoded. ``lenient`` decodes bad bytes as U+FFFD
instead of refusing (pretraining text: a few odd bytes do not spoil a run; the app says how many).

``upload_text`` is the same check for core's readers (datasets, token data, corpora, probes): it raises the
reader's own error class with the English text. The app (app/kit/uploads.py) shows the message in the session's
language from ``UploadError.reason`` and ``params``.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.base import settings
from core.base.caches import register as register_cache
from core.base.messages import read_catalogue
from core.base.paths import ASSETS

MESSAGES_FILE = ASSETS / "i18n" / "uploads.toml"
REASONS = ("wrong_type", "too_big", "binary", "not_utf8", "empty")
SNIFF = 65536  # bytes looked at for binary data
_CONTROL = frozenset([*range(0, 8), *range(14, 27), *range(28, 32)])  # not \t \n \v \f \r or ESC


@lru_cache(maxsize=1)
def _english() -> dict[str, str]:
    entries = read_catalogue(MESSAGES_FILE)
    return {key.removeprefix("rejected."): entry["en"] for key, entry in entries.items() if key.startswith("rejected.")}


register_cache(__name__, _english.cache_clear)


class UploadError(ValueError):
    """An upload refused before it is read: ``reason`` (one of REASONS) and the ``params`` of its message. As a str
    it is the English text."""

    def __init__(self, reason: str, **params: Any):
        self.reason, self.params = reason, params
        super().__init__(_english()[reason].format(**params))


def extension(name: str) -> str:
    """``name``'s extension without the dot, lower case ("" when it has none)."""
    return Path(name).suffix.lower().lstrip(".")


def looks_binary(data: bytes) -> bool:
    """A NUL byte in the first 64 KiB, or more than 1 % control bytes there (text has neither)."""
    head = data[:SNIFF]
    if b"\x00" in head:
        return True
    return bool(head) and sum(b in _CONTROL for b in head) > len(head) / 100


def read_upload(
    data: bytes,
    name: str,
    *,
    kinds: Sequence[str] | None = None,
    limit_mb: float | None = None,
    expect: str = "a UTF-8 text file",
    lenient: bool = False,
) -> str:
    """``data`` as text (UTF-8, a BOM dropped; UTF-16 with a BOM). Raises UploadError saying what is wrong and
    what to upload instead (``expect``); ``kinds``: the extensions taken (None: any)."""
    ext = extension(name)
    if kinds is not None and ext not in {k.lower().lstrip(".") for k in kinds}:
        raise UploadError(
            "wrong_type",
            name=name,
            ext=f".{ext}" if ext else "?",
            kinds=", ".join(f".{k.lstrip('.')}" for k in kinds),
            expect=expect,
        )
    limit = settings.current().max_upload_mb if limit_mb is None else limit_mb
    mb = len(data) / 2**20
    if mb > limit:
        raise UploadError("too_big", name=name, mb=f"{mb:.1f}" if mb >= 1 else f"{mb:.2g}", limit=f"{limit:g}")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            raise UploadError("binary", name=name, expect=expect) from None
    else:
        if looks_binary(data):
            raise UploadError("binary", name=name, expect=expect)
        try:
            text = data.decode("utf-8-sig", errors="replace" if lenient else "strict")
        except UnicodeDecodeError as e:
            line = data[: e.start].count(b"\n") + 1
            raise UploadError("not_utf8", name=name, line=line, byte=f"{e.start:,}", ext=f".{ext or 'txt'}") from None
    if not text.strip():
        raise UploadError("empty", name=name, expect=expect)
    return text


def upload_text(
    data: bytes,
    name: str,
    *,
    error: type[ValueError] = ValueError,
    expect: str = "a UTF-8 text file",
    limit_mb: float | None = None,
) -> str:
    """``read_upload`` for core's readers: raises ``error`` (a ValueError subclass) with the English message."""
    try:
        return read_upload(data, name, limit_mb=limit_mb, expect=expect)
    except UploadError as e:
        raise error(str(e)) from None

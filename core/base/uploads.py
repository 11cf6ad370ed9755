"""Uploaded text files: one check for every page that takes one, so the messages agree and say the same fixes.

``upload_text`` refuses, each with its own message: a file over the server's upload limit (ENCODERLAB_MAX_UPLOAD_MB,
as `server.maxUploadSize`), a binary file (a NUL byte, which never occurs in text but does in spreadsheets,
archives and images: git's and grep's test), text that is not UTF-8 (naming the line), and an empty file. The
pretraining corpus reader (core/data/corpus.decode_upload) stays lenient on purpose: it decodes with
replacement characters, since a few odd bytes do not spoil a pretraining run.
"""
from __future__ import annotations

from pathlib import Path

from core.base import settings


def upload_text(data: bytes, name: str, *, error: type[ValueError] = ValueError,
                expect: str = "a UTF-8 text file", limit_mb: float | None = None) -> str:
    """``data`` decoded as UTF-8 (a BOM dropped). Raises ``error`` (a ValueError subclass) with what is wrong and
    what to do; ``expect`` says what to upload instead (e.g. "CoNLL text (one word and its tag per line)")."""

    limit = settings.current().max_upload_mb if limit_mb is None else limit_mb
    mb = len(data) / 2**20
    if mb > limit:
        raise error(f"{name} is {mb:.1f} MB; EncoderLab takes uploads up to {limit:g} MB. Upload a sample of it, "
                    "or, on your own server, raise ENCODERLAB_MAX_UPLOAD_MB and `server.maxUploadSize` in "
                    ".streamlit/config.toml.")
    if b"\x00" in data[:65536]:
        raise error(f"{name} is not a text file (it holds binary data, e.g. a spreadsheet or an archive). "
                    f"Upload {expect}.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        ext = Path(name).suffix or ".txt"
        raise error(f"{name} is not UTF-8 text (line {line}, byte {e.start:,} cannot be decoded). Save it as UTF-8 "
                    f"(e.g. `iconv -f latin1 -t utf-8 in{ext} > out{ext}`) and upload it again.") from None
    if not text.strip():
        raise error(f"{name} is empty. Upload {expect}.")
    return text

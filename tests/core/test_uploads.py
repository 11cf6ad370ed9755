"""One upload decoder (core.base.uploads.read_upload) refuses a binary, a non-UTF-8 and an empty
file, a wrong type and a file over the limit, each with its own reason and a message that quotes no raw bytes."""

from __future__ import annotations

import codecs

import pytest

from core.base import uploads as U
from core.base.messages import read_catalogue

GZIP = b"\x1f\x8b\x08\x00\xa3\xc1j\x00\x00\x03binary\xff\xfe"  # the walk's file began like this
CONTROL = bytes([0x89, 0x08, 0x9C, 0xE1, 0x6A, 0x01, 0x02, 0x03, 0x04, 0x05]) * 20  # binary, no NUL
LATIN1 = "a,b,label\nun café,le thé,1\n".encode("latin-1")


def _reason(data: bytes, name: str = "x.csv", **kw) -> U.UploadError:
    with pytest.raises(U.UploadError) as e:
        U.read_upload(data, name, **kw)
    text = str(e.value)
    assert "\ufffd" not in text and "\\x" not in text and not any(ord(c) < 32 for c in text), text
    return e.value


@pytest.mark.parametrize(
    "data, reason",
    [
        (GZIP, "binary"),
        (CONTROL, "binary"),
        (b"\x89PNG\r\n\x1a\n\x00", "binary"),
        (LATIN1, "not_utf8"),
        (b"", "empty"),
        (b" \n\t\n", "empty"),
    ],
)
def test_each_bad_file_has_its_own_reason(data, reason):
    e = _reason(data, expect="a CSV")
    assert e.reason == reason and e.params["name"] == "x.csv"


def test_latin1_names_the_line_and_says_to_save_as_utf8():
    e = _reason(LATIN1, "pairs.csv")
    assert e.params["line"] == 2 and "save the file as UTF-8" in str(e) and "iconv -f latin1" in str(e)


def test_wrong_type_and_over_the_limit():
    e = _reason(b"a,b\n", "book.xlsx", kinds=["csv", "tsv"], expect="a CSV")
    assert e.reason == "wrong_type" and "book.xlsx is a .xlsx file; this box takes .csv, .tsv" in str(e)
    e = _reason(b"x" * 3000, "big.txt", limit_mb=0.001)
    assert e.reason == "too_big" and "big.txt is 0.0029 MB; EncoderLab takes uploads up to 0.001 MB" in str(e)


def test_the_hosted_limit_applies_when_no_limit_is_given(monkeypatch):
    monkeypatch.setenv("ENCODERLAB_MAX_UPLOAD_MB", "0.01")
    assert _reason(b"word " * 4000, "c.txt").reason == "too_big"
    monkeypatch.delenv("ENCODERLAB_MAX_UPLOAD_MB")
    monkeypatch.setenv("ENCODERLAB_HOSTED", "1")  # 5 MB on the hosted demo
    assert _reason(b"word\n" * (6 * 2**20 // 5), "c.txt").params["limit"] == "5"


def test_good_text_utf16_and_lenient_decoding():
    assert U.read_upload("a,b\ncafé,1\n".encode("utf-8-sig"), "x.csv", kinds=["csv"]) == "a,b\ncafé,1\n"
    assert U.read_upload(codecs.BOM_UTF16_LE + "thé\n".encode("utf-16-le"), "x.txt") == "thé\n"
    assert U.read_upload(LATIN1, "x.txt", lenient=True).count("\ufffd") == 2


def test_core_readers_get_their_own_error_class():
    class DataError(ValueError):
        pass

    with pytest.raises(DataError, match="not a text file"):
        U.upload_text(GZIP, "x.csv", error=DataError)


def test_every_reason_has_its_message():
    """Each reason has an entry of uploads.toml's [rejected] table, no more and no fewer (that every entry has both
    languages with the same placeholders is tests/app/test_i18n.py's check of every catalogue)."""
    rejected = {k.removeprefix("rejected.") for k in read_catalogue(U.MESSAGES_FILE) if k.startswith("rejected.")}
    assert rejected == set(U.REASONS)

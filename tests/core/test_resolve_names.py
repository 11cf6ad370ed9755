"""Whatever a person types as a checkpoint, ``resolve`` and ``load`` answer with a message, never an OSError.

The third browser walk (#46) typed a custom checkpoint of about 300 characters into the sidebar: every page became
``OSError: [Errno 36] File name too long`` with a traceback naming server paths (``p.is_dir()`` in resolve). Here a
seeded fuzz of long, odd and non-UTF-8 names goes through both, and every place tried is a message of the catalogue
(so the page writes it in its language) that quotes the name as a short excerpt at most.
"""

from __future__ import annotations

import os
import random

import pytest

from core.base.messages import QUOTE_MAX, Message, templates
from core.models.downloads import Source
from core.models.loading import ModelLoadError, ModelSpec, load, resolve

ODD = ["\x00", "\n", "\t", "\u202e", "\u200b", "😀", "中", "\\", "/", "..", "~", "%00", "?", "*", "'", '"', " ", "\x7f"]


def names() -> list[str]:
    rng = random.Random(46)
    out = [
        "x" * 300,  # the walk's case: one component longer than the file system's 255 bytes
        "中" * 100,  # 300 bytes of UTF-8 in 100 characters
        "a/" + "b" * 5000,
        "/" + "c" * 300 + "/model",
        "~nosuchuser-encoderlab/model",
        "bad\x00name",
        os.fsdecode(b"caf\xe9-\xff\xfe"),  # non-UTF-8 bytes, as Python decodes a file name it cannot read
        "..\\..\\windows",
        " ",
    ]
    for _ in range(40):
        n = rng.choice([1, 3, 20, 80, 256, 1000])
        out.append("".join(rng.choice(ODD + list("abcXYZ-_.")) for _ in range(n)))
    return out


@pytest.mark.parametrize("name", names(), ids=lambda s: f"{len(s)}-{s[:12].encode('unicode_escape').decode()}")
def test_any_typed_name_resolves_to_a_source_with_messages(name):
    res = resolve(name)
    assert isinstance(res.source, Source)
    assert res.tried, "every answer says what was tried"
    for m in res.tried:
        assert isinstance(m, Message) and m.kind in templates(), m
        assert len(m) <= 2 * QUOTE_MAX + 400, "a message quotes the name as an excerpt"
        m.encode("utf-8")  # a page can send it (no lone surrogates from a non-UTF-8 name)
    if res.source == Source.UNAVAILABLE:
        with pytest.raises(ModelLoadError) as e:
            load(ModelSpec("bert", name) if name.strip() else ModelSpec("bert", "x"), "mlm")
        assert len(str(e.value)) < 6 * QUOTE_MAX + 600


def test_a_name_too_long_for_the_file_system_says_so():
    res = resolve("x" * 300)
    assert res.source == Source.UNAVAILABLE
    assert [m.kind for m in res.tried] == ["load.tried.name_too_long"]
    assert res.tried[0].params == {"n": 300}


def test_an_unreadable_path_says_so():
    assert [m.kind for m in resolve("~nosuchuser-encoderlab/m").tried] == ["load.tried.bad_name"]


def test_a_missing_id_lists_each_place_asked_as_a_message(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    res = resolve("nobody/no-such-model-encoderlab")
    assert res.source == Source.UNAVAILABLE
    assert [m.kind for m in res.tried] == [
        "load.tried.local_missing",
        "load.tried.not_cached",
        "load.tried.downloads_off",
    ]
    assert res.tried[-1].params["reason"].kind == "download.policy.offline_set"

"""Every upload box in app/ and pages/ (AppTest) refuses a binary, a Latin-1, an empty or a wrong-type file with
its own message right under the box (never the file's raw bytes), drops the message when a good file replaces the
bad one, and says and applies the hosted size limit."""

from __future__ import annotations

import pytest

from tests.app.conftest import page_for

pytestmark = pytest.mark.timeout(600)

BINARY = b"\x1f\x8b\x08\x00\xa3\xc1j\x00\x00\x03binary\xff\xfe"  # the walk's file began like this
LATIN1 = "a,b,label\nun café,le thé,1\n".encode("latin-1")


def _radio(key, value):
    return lambda at: at.radio(key=key).set_value(value).run()


# page, how to reach its box, the box's key, its form (a form sends the file on submit), a good file's name and
# text (one that fails later, in the page's own checks, or where a job would start: no job runs in these tests)
BOXES = {
    "finetune": (
        "finetune",
        _radio("finetune.source", "upload"),
        "finetune.upload",
        None,
        "d.csv",
        "text,label\n" + "".join(f"text {i},{i % 2}\n" for i in range(20)),
    ),
    "finetune_tokens": (
        "finetune",
        lambda at: _radio("finetune.tok_source", "upload")(_radio("finetune.task", "token")(at)),
        "finetune.tok_upload",
        None,
        "d.conll",
        "Ada B-PER\nLovelace I-PER\n",
    ),
    "sentence_pair": (
        "sentence_pair",
        None,
        "sentence_pair.upload",
        "sentence_pair.batch_form",
        "p.csv",
        "a,b,label\nOne.,Two.,7\n",
    ),
    "attribution": (
        "attribution",
        None,
        "attribution.batch.file",
        "attribution.batch.form",
        "a.csv",
        "text,class\nA fine day.,x\n",
    ),
    "projector": ("projector", None, "projector.upload", "projector.form", "s.txt", "The cat sat.\n"),
    "probes": ("probes", None, "probes.upload", None, "s.txt", "The cat sat.\n"),
    "corpus_search": (
        "corpus_search",
        _radio("corpus_search.source", "upload"),
        "corpus_search.upload",
        "corpus_search.form",
        "s.txt",
        "The cat sat.\n",
    ),
    "pretrain": (
        "pretrain",
        _radio("pretrain.corpus", "upload"),
        "pretrain.upload",
        "pretrain.form",
        "c.txt",
        "Some words here.\n",
    ),
}


@pytest.fixture()
def env(use_tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("ENCODERLAB_PROBES_DIR", str(tmp_path / "probes"))
    monkeypatch.setattr("app.views.train.finetune_data.hub_reachable", lambda *a, **k: False)

    def no_job(*a, **k):
        raise ValueError("no job in this test")

    monkeypatch.setattr("app.kit.jobs_panel.submit_job", no_job)


def _open(which: str):
    page, reach, key, form, good_name, good = BOXES[which]
    at = page_for(page)
    if reach is not None:
        at = reach(at)
    assert not at.exception, at.exception
    return at, key, form, good_name, good


def _upload(at, key, form, name, data):
    at.file_uploader(key=key).set_value((name, data, "application/octet-stream"))
    if form is None:
        at.run()
    else:
        next(b for b in at.button if b.form_id == form).click().run()
    assert not at.exception, at.exception
    return at


def _shown(at) -> list[str]:  # Markdown escapes (walk\\.txt) dropped
    return [e.value.replace("\\", "") for e in [*at.error, *at.warning, *at.info, *at.caption]]


def _errors(at) -> list[str]:
    return [e.value.replace("\\", "") for e in at.error]


def _clean(texts: list[str]) -> None:
    """No raw bytes of the file: no replacement characters, no control characters, no \\x escapes."""
    for s in texts:
        assert "\ufffd" not in s and "\\x" not in s and not any(ord(c) < 32 and c not in "\n\t" for c in s), s


@pytest.mark.parametrize("which", sorted(BOXES))
def test_every_box_refuses_binary_latin1_and_empty_files_with_its_own_message(env, which):
    at, key, form, good_name, good = _open(which)
    ext = good_name.rsplit(".", 1)[1]
    assert at.file_uploader(key=key).allowed_type == []  # any file reaches the code, which says why it is refused
    _upload(at, key, form, f"walk.{ext}", BINARY)
    assert any(f"walk.{ext} is not a text file" in e for e in _errors(at)), _errors(at)
    _clean(_shown(at))
    _upload(at, key, form, f"latin.{ext}", LATIN1)
    # every box, the Pretraining lab's too (#46: it said "read as �" and then "binary"): one message, line and byte
    assert any(f"latin.{ext} is not UTF-8 text (line 2" in e and "save the file as UTF-8" in e for e in _errors(at)), (
        _errors(at)
    )
    assert not any("not a text file" in e or "binary" in e for e in _errors(at))  # the earlier file's message is gone
    _upload(at, key, form, f"none.{ext}", b"")
    assert any(f"none.{ext} is empty" in e for e in _errors(at)), _errors(at)
    _upload(at, key, form, "book.xlsx", b"PK\x03\x04")
    if which != "pretrain":  # pretraining takes a text file of any name
        assert any("book.xlsx is a .xlsx file; this box takes" in e for e in _errors(at)), _errors(at)
    _clean(_shown(at))
    _upload(at, key, form, good_name, good.encode())  # a good file: no upload message left
    assert not any(w in e for e in _errors(at) for w in ("is empty", "not a text", "not UTF-8", "this box takes"))


def test_the_hosted_limit_is_said_under_the_box(env, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_MAX_UPLOAD_MB", "0.01")
    at, key, form, _, _ = _open("probes")
    assert any("up to 0.01 MB" in c.value for c in at.caption), [c.value for c in at.caption]
    _upload(at, key, form, "big.txt", b"word " * 4000)
    assert any("big.txt is 0.019 MB; EncoderLab takes uploads up to 0.01 MB" in e for e in _errors(at)), _errors(at)
    at.file_uploader(key=key).set_value(None).run()  # removed: its message goes with it
    assert not any("big.txt" in e for e in _errors(at))

"""Sessions kept apart on the hosted demo (#34 §4), in core: what one session builds from its own text is not
another's to load."""

from __future__ import annotations

import pytest

from core.base.caches import reset_caches
from core.models.loading import ModelSpec, load
from core.represent.corpus_index import IndexConfig, build_index, index_key, load_index, save_index

TEXT = ("Alice's private note about the river bank.", "A second line only Alice wrote.")


@pytest.fixture()
def lm(tiny_models, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_CORPUS_INDEX_DIR", str(tmp_path / "indexes"))
    reset_caches()  # no index another test left in the process's LRU
    yield load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), "base")
    reset_caches()


def test_hosted_an_index_of_uploaded_text_is_its_sessions_alone(lm, monkeypatch):
    """Session A indexes its own text; session B naming the very same text (and model and depth) finds no index
    to load, so B neither searches A's index nor learns from a fast load that A indexed that text."""
    monkeypatch.setenv("ENCODERLAB_HOSTED", "1")
    mine = IndexConfig("text", TEXT, depth=1, owner="session-a")
    save_index(build_index(lm, mine))
    assert load_index(lm, mine) is not None, "A's own index loads for A"
    theirs = IndexConfig("text", TEXT, depth=1, owner="session-b")
    assert index_key(lm, theirs) != index_key(lm, mine)
    assert load_index(lm, theirs) is None, "B loaded the index A built from A's uploaded text"


def test_the_bundled_corpus_index_is_shared_and_a_local_install_shares_text_indexes(lm, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_HOSTED", "1")
    bundled = [IndexConfig("bundled", depth=1, max_sentences=50, owner=who) for who in ("session-a", "session-b")]
    assert index_key(lm, bundled[0]) == index_key(lm, bundled[1]), "the bundled corpus's index is everyone's"
    monkeypatch.delenv("ENCODERLAB_HOSTED")
    text = [IndexConfig("text", TEXT, depth=1, owner=who) for who in ("session-a", "session-b", None)]
    assert len({index_key(lm, c) for c in text}) == 1, "off the hosted demo a text's saved index is reused"


def test_hosted_a_probe_result_of_a_custom_corpus_is_its_sessions_alone(monkeypatch):
    """The same for the Layer probes page's saved results (core.represent.probes.saved_result looks them up by
    ProbeConfig.key): B pasting A's text gets a key of its own on the hosted demo; the bundled corpus's result and
    every result off the hosted demo keep the key they had before sessions were part of it."""
    from core.represent.probes import ProbeConfig

    corpus = TEXT * 10

    def keys(**kw) -> set[str]:
        return {ProbeConfig(tasks=("length",), owner=who, **kw).key() for who in ("session-a", "session-b", None)}

    monkeypatch.setenv("ENCODERLAB_HOSTED", "1")
    assert len(keys(corpus=corpus)) == 3, "B would load the probe result A ran on A's own text"
    assert len(keys()) == 1, "the bundled corpus's result is everyone's"
    monkeypatch.delenv("ENCODERLAB_HOSTED")
    assert keys(corpus=corpus) == {ProbeConfig(tasks=("length",), corpus=corpus).key()}

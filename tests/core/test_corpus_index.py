"""core/represent/corpus_index: a corpus token's nearest neighbour is itself, IVF above the threshold agrees with exact
search, indexes survive a save/load round trip, and bad input says what to do."""

from __future__ import annotations

import numpy as np
import pytest

from core.base.caches import reset_caches
from core.models.loading import ModelSpec, load
from core.represent import corpus_index as cx
from core.represent.corpus_index import (
    CorpusIndexError,
    IndexConfig,
    build_index,
    load_index,
    save_index,
    search,
    sentences_from_text,
    sentences_from_upload,
)
from core.represent.token_vectors import MAX_SENTENCES

SENTENCES = (
    "The bank of the river was muddy.",
    "I put money in the bank, unbelievably!",
    "A cat sat on the mat near the river.",
    "Dogs bark at night.",
    "她在银行工作。",
)


@pytest.fixture(scope="module")
def models(tiny_models):
    return {f: load(ModelSpec(f, str(p), "cpu"), "base") for f, p in tiny_models.items()}


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    """Indexes under this test's own folder, and no index another test left in the process's LRU (nor one of this
    test's left for the next)."""
    monkeypatch.setenv("ENCODERLAB_CORPUS_INDEX_DIR", str(tmp_path / "index"))
    reset_caches()
    yield
    reset_caches()


def test_a_corpus_token_finds_itself(models, family):
    lm = models[family]
    ci = build_index(lm, IndexConfig("text", SENTENCES, depth=1))
    assert ci.kind == "exact" and len(ci) == ci.index.ntotal and ci.depth == 1
    for sent, word in ((0, "river"), (1, "money"), (2, "river"), (3, "night")):
        r = search(lm, ci, SENTENCES[sent], word, k=5)
        top = r.neighbours[0]
        assert top.is_query and top.sentence_id == sent and top.word == word, (family, word, top)
        assert top.similarity == pytest.approx(1.0, abs=1e-4)
        assert [n.similarity for n in r.neighbours] == sorted((n.similarity for n in r.neighbours), reverse=True)
        assert sum(c for _, c in r.histogram) == len(r.neighbours) == 5
    # a word by its number among the query's words, a piece by its position: the same token
    by_number = search(lm, ci, SENTENCES[0], 4, k=3)
    assert by_number.word == "river" and by_number.neighbours[0].is_query
    pos = int(ci.positions[by_number.neighbours[0].row])
    assert search(lm, ci, SENTENCES[0], position=pos, k=3).neighbours[0].row == by_number.neighbours[0].row


def test_ivf_above_the_threshold_agrees_with_exact(models):
    lm = models["bert"]
    cfg = IndexConfig("bundled", depth=2, max_sentences=100)
    exact = build_index(lm, cfg)
    ivf = build_index(lm, cfg, flat_max=len(exact) - 1)
    assert exact.kind == "exact" and ivf.kind == "ivf" and ivf.nlist == cx.ivf_lists(len(exact)) > 1
    assert ivf.nprobe == min(cx.NPROBE, ivf.nlist) and ivf.key != exact.key
    overlap = []
    for i in range(0, 100, 20):
        a = search(lm, exact, exact.sentences[i], 0, k=10)
        b = search(lm, ivf, ivf.sentences[i], 0, k=10)
        assert b.neighbours[0].is_query and b.kind == "ivf"
        overlap.append(len({n.row for n in a.neighbours} & {n.row for n in b.neighbours}) / 10)
    assert np.mean(overlap) >= 0.7, overlap


def test_saved_index_loads_back(models):
    lm = models["roberta"]
    cfg = IndexConfig("text", SENTENCES, depth=2)
    assert load_index(lm, cfg) is None
    ci = build_index(lm, cfg)
    folder = save_index(ci)
    assert folder.name == f"roberta-{ci.key}" and (folder / cx.INDEX_FILE).is_file()
    reset_caches()  # from disk, not the process's LRU
    back = load_index(lm, cfg)
    assert back is not None and back.key == ci.key and back.kind == "exact" and back.sentences == SENTENCES
    for name in ("sentence_ids", "positions", "word_index", "starts", "ends"):
        assert np.array_equal(getattr(back, name), getattr(ci, name))
    assert back.pieces == ci.pieces
    a, b = search(lm, ci, SENTENCES[2], "cat"), search(lm, back, SENTENCES[2], "cat")
    assert [n.row for n in a.neighbours] == [n.row for n in b.neighbours]
    assert load_index(lm, IndexConfig("text", SENTENCES, depth=1)) is None  # another depth
    assert load_index(lm, IndexConfig("text", SENTENCES[:-1], depth=2)) is None  # another corpus
    assert load_index(models["bert"], cfg) is None  # another model


def test_bad_input_says_what_to_do(models, monkeypatch):
    lm = models["bert"]
    with pytest.raises(CorpusIndexError, match="corpus is empty"):
        IndexConfig("text", sentences_from_text(" \n\n  "))
    with pytest.raises(CorpusIndexError, match="not UTF-8 text"):
        sentences_from_upload("Un café au lait.\n".encode("latin-1"), "latin.txt")
    with pytest.raises(CorpusIndexError, match="not a text file"):
        sentences_from_upload(b"PK\x03\x04\x00\x00binary", "corpus.zip")
    monkeypatch.delenv("ENCODERLAB_MAX_UPLOAD_MB", raising=False)
    with pytest.raises(CorpusIndexError, match=r"big\.txt is 50\.0 MB; EncoderLab takes uploads up to 20 MB"):
        sentences_from_upload(b"a\n" * (25 * 2**20), "big.txt")
    with pytest.raises(CorpusIndexError, match="is empty"):
        sentences_from_upload(b"\n \n", "blank.txt")
    assert sentences_from_upload("\ufeffOne.\n\nTwo.\nOne.\n".encode("utf-8")) == ("One.", "Two.")
    with pytest.raises(CorpusIndexError, match=f"at most {MAX_SENTENCES:,}"):
        IndexConfig("text", tuple(f"sentence {i}" for i in range(MAX_SENTENCES + 1)), max_sentences=MAX_SENTENCES)
    with pytest.raises(CorpusIndexError, match="Sentences to index must be from 1"):
        IndexConfig("bundled", max_sentences=MAX_SENTENCES + 1)
    with pytest.raises(CorpusIndexError, match="Unknown corpus source"):
        IndexConfig("web")
    with pytest.raises(CorpusIndexError, match="Depth 9 is beyond this model"):
        build_index(lm, IndexConfig("text", SENTENCES, depth=9))
    ci = build_index(lm, IndexConfig("text", SENTENCES, depth=1))
    with pytest.raises(CorpusIndexError, match="'zebra' does not occur in the indexed corpus"):
        ci.sentences_with("zebra")
    assert ci.sentences_with("Bank") == (0, 1)
    with pytest.raises(CorpusIndexError, match="'zebra' is not a word of the query sentence"):
        search(lm, ci, SENTENCES[0], "zebra")
    with pytest.raises(CorpusIndexError, match="query sentence is empty"):
        search(lm, ci, "  ", 0)
    with pytest.raises(CorpusIndexError, match="Neighbours must be from 1"):
        search(lm, ci, SENTENCES[0], 0, k=0)
    with pytest.raises(CorpusIndexError, match="built with another model"):
        search(models["distilbert"], ci, SENTENCES[0], 0)


def test_the_job_saves_once_and_a_cancel_saves_nothing(tiny_models):
    from core.runtime.job_outcome import JobCancelled

    class Ctx:
        def __init__(self, stop_at=None):
            self.calls, self.stop_at = 0, stop_at

        def progress(self, fraction, message="", **metrics):
            self.calls += 1
            if self.stop_at is not None and self.calls >= self.stop_at:
                raise JobCancelled()

    spec = ModelSpec("albert", str(tiny_models["albert"]), "cpu")
    cfg = IndexConfig("text", SENTENCES, depth=2)
    job = cx.index_job(spec, cfg)
    with pytest.raises(JobCancelled):
        job(Ctx(stop_at=2))  # Cancel while the corpus is read
    assert not cx.index_root().exists() or not any(cx.index_root().iterdir())
    first = job(Ctx())
    assert not first.loaded and first.sentences == len(SENTENCES) and first.depth == 2
    reset_caches()
    again = job(Ctx())  # saved: the second run only loads it
    assert again.loaded and again.key == first.key


# ---------------------------------------------------------------------------------------------- #46 §5, 11
def test_the_words_offered_are_the_words_search_accepts(models, family):
    """The page offers searchable_words; search refuses exactly the others ("has no token of its own"): here the
    words past the cut at max_length (and, for a tokenizer that merges across words, those inside a merged piece)."""
    lm = models[family]
    ci = build_index(lm, IndexConfig("text", SENTENCES, depth=1, max_length=8))
    query = "The bank of the river was muddy after the rain, 她在银行工作。"
    words = cx.query_words(query)
    offered = cx.searchable_words(lm, ci, query)
    assert 0 < len(offered) < len(words), (family, offered)
    for i in range(len(words)):
        if i in offered:
            assert search(lm, ci, query, i, k=2).word_number == i
        else:
            with pytest.raises(CorpusIndexError, match="has no token of its own"):
                search(lm, ci, query, i, k=2)


def test_chinese_words_merged_into_the_piece_before_are_not_offered():
    """The bundled XLM-R's SentencePiece reads 我们的项目 … 更多的人 as ▁我们 | 的项目 | … | 更多的 | 人: 项目 starts
    inside the piece of 的, so it has no vector of its own (the walk's 项目, 人)."""
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from core.models.loading import resolve
    from core.registry import chinese_bundled

    _, cid = chinese_bundled()[0]
    lm = SimpleNamespace(tokenizer=AutoTokenizer.from_pretrained(resolve(cid).path), max_tokens=512)
    query = "我们的项目需要更多的人。"
    words = [w for _, _, w in cx.query_words(query)]
    offered = [words[i] for i in cx.searchable_words(lm, SimpleNamespace(max_length=128), query)]
    assert "项目" in words and "项目" not in offered and "我们" in offered and "需要" in offered

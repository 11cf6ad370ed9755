"""The everyday-English probe: well formed, never in the training corpus, scored as Fill-mask scores."""
from __future__ import annotations

import re

import pytest

from core.everyday_probe import load_probe, score
from core.fill_mask import FillMaskConfig, fill_mask
from core.models import ASSETS, ModelSpec, bundled_id, load


def _norm(s: str) -> str:
    return re.sub(r"[^a-z ]", "", s.lower()).strip()


def test_the_probe_has_150_sentences_with_one_mask_and_answers():
    items = load_probe()
    assert len(items) >= 150
    assert all(it.sentence.count("[MASK]") == 1 and it.answers for it in items)
    assert len({it.sentence for it in items}) == len(items)  # no duplicates
    assert len({it.topic for it in items}) >= 8


def test_the_corpus_does_not_contain_the_probe():
    corpus = "\n".join(_norm(line) for name in ("train.txt", "heldout.txt")
                       for line in (ASSETS / "corpus" / name).read_text(encoding="utf-8").splitlines())
    hits = []
    for it in load_probe():
        left, right = (_norm(x) for x in it.sentence.split("[MASK]"))
        for answer in it.answers:  # the sentence with any acceptable answer filled in
            filled = " ".join(x for x in (left, answer, right) if x)
            if len(filled) > 15 and filled in corpus:
                hits.append(filled)
    assert not hits, hits[:5]


def test_bad_rows_name_their_line(tmp_path):
    p = tmp_path / "p.tsv"
    p.write_text("# header\nno mask here\tx\tdaily\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        load_probe(p)


def test_score_counts_what_fill_mask_predicts():
    lm = load(ModelSpec("bert", bundled_id("bert"), "cpu"), "mlm")
    items = load_probe()[:12]
    s = score(lm, items, batch=5)
    own = [tuple(c.text.strip().lower() for c in fill_mask(lm, FillMaskConfig(it.sentence)).masks[0].candidates)
           for it in items]
    assert s.predictions == tuple(own)
    assert s.top1 == sum(p[0] in it.answers for it, p in zip(items, own)) / len(items)
    assert s.topk == sum(any(x in it.answers for x in p) for it, p in zip(items, own)) / len(items)
    assert 0 <= s.top1 <= s.topk <= 1 and sum(n for n, _, _ in s.per_topic.values()) == len(items)

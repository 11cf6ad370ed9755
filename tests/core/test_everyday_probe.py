"""The everyday-English probe: well formed, never in the training corpus, scored as Fill-mask scores."""

from __future__ import annotations

import pytest

from core.base.paths import ASSETS
from core.data.probe_items import filled_sentences, load_probe, normalize
from core.models.loading import ModelSpec, load
from core.predict.everyday_probe import score
from core.predict.fill_mask import FillMaskConfig, fill_mask
from core.registry import bundled_id


def test_the_corpus_does_not_contain_the_probe():
    """No sentence of the probe, with any acceptable answer filled in, is anywhere in the corpus (train or either
    held-out file): the builder drops such sentences (corpus._probe_hits), this checks the committed files."""
    files = sorted((ASSETS / "corpus").glob("*.txt"))
    assert {f.name for f in files} >= {"train.txt", "heldout.txt", "train_everyday.txt", "heldout_everyday.txt"}
    corpus = "\n".join(normalize(line) for f in files for line in f.read_text(encoding="utf-8").splitlines())
    hits = [f for f in filled_sentences() if f in corpus]
    assert not hits, hits[:5]


def test_the_overlap_check_can_fail():
    items = load_probe()[:3]
    filled = filled_sentences(items)
    assert "the capital of france is paris" in filled
    text = normalize("They say: The capital of France is Paris!")
    assert any(f in text for f in filled)


def test_bad_rows_name_their_line(tmp_path):
    p = tmp_path / "p.tsv"
    p.write_text("# header\nno mask here\tx\tdaily\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        load_probe(p)


def test_score_counts_what_fill_mask_predicts():
    lm = load(ModelSpec("bert", bundled_id("bert"), "cpu"), "mlm")
    items = load_probe()[:12]
    s = score(lm, items, batch=5)
    own = [
        tuple(c.text.strip().lower() for c in fill_mask(lm, FillMaskConfig(it.sentence)).masks[0].candidates)
        for it in items
    ]
    assert s.predictions == tuple(own)
    assert s.top1 == sum(p[0] in it.answers for it, p in zip(items, own)) / len(items)
    assert s.topk == sum(any(x in it.answers for x in p) for it, p in zip(items, own)) / len(items)
    assert 0 <= s.top1 <= s.topk <= 1 and sum(n for n, _, _ in s.per_topic.values()) == len(items)


def test_the_probe_during_training_reads_the_weights_of_the_moment():
    """A fused optimizer updates the weights in place without bumping their version counter (packed_linear's
    staleness check): the probe hook must not serve the packs made at its first call."""
    import copy

    import torch

    from core.predict.everyday_probe import during_training

    lm = load(ModelSpec("bert", bundled_id("bert"), "cpu"), "mlm")
    model = copy.deepcopy(lm.model).eval()
    items = load_probe()[:20]
    hook = during_training("bert", items)
    first = hook(model, lm.tokenizer)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-2, fused=True)
    version = model.bert.encoder.layer[0].attention.self.query.weight._version
    model.train()
    ids = lm.tokenizer(["the cat sat on the mat"] * 2, return_tensors="pt")
    model(**ids, labels=ids["input_ids"]).loss.backward()
    opt.step()
    model.eval()
    assert model.bert.encoder.layer[0].attention.self.query.weight._version == version  # why off() is needed
    after = hook(model, lm.tokenizer)
    fresh = score(type(lm)(model, lm.tokenizer, lm.spec, "mlm", "test", "", "cpu"), items)
    assert after == {"probe_top1": round(fresh.top1, 4), "probe_top5": round(fresh.topk, 4)}
    assert after != first  # a step at this rate changes the guesses

"""Batched inference: concurrent calls on one model coalesce, and each caller gets what it would have got alone."""
from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest

from core.predict.fill_mask import FillMaskConfig, FillMaskError, fill_mask
from core.predict.classify import FinetunedModel, classify
from core.models.loading import ModelSpec, load
from core.predict.sentence_pair import PairError, score_pairs
from core.runtime.serving import Batcher, stats

TEXTS = ["The capital of France is [MASK].", "She [MASK] to the store.", "[MASK] is a big city.",
         "He played the [MASK] at the concert last night with his friends.", "A [MASK] of tea, please.",
         "The [MASK] sat on the [MASK] near the window.", "I [MASK] you.", "Books are [MASK]."]
PAIRS = [("The cat sat down.", "It purred."), ("It rained all day.", "We stayed inside."),
         ("Paris is in France.", "The sun is hot."), ("He opened the door.", "Cold air came in."),
         ("A short one.", "And a much longer second sentence with many more words in it."),
         ("Bread needs flour.", "Dough must rise."), ("Ships sail.", "Seas churn."), ("One.", "Two.")]


@pytest.fixture()
def wide_window(monkeypatch):
    """A window long enough that threads released together surely meet in one batch, even on a busy machine."""
    monkeypatch.setenv("ENCODERLAB_BATCH_WINDOW_MS", "200")
    monkeypatch.setenv("ENCODERLAB_MAX_BATCH", "32")


def _together(fn, items):
    """Call ``fn(item)`` from one thread per item, all released at once; results (or exceptions) in order."""
    out: list = [None] * len(items)
    gate = threading.Barrier(len(items))

    def worker(i, item):
        gate.wait()
        try:
            out[i] = fn(item)
        except Exception as e:  # the test looks at which caller got which error
            out[i] = e

    threads = [threading.Thread(target=worker, args=(i, x)) for i, x in enumerate(items)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def _floats(r) -> list[float]:
    return [c.prob for m in r.masks for c in m.candidates] + [m.entropy for m in r.masks] + list(r.fill_probs)


def _without_floats(r):
    """Everything but the probabilities: tokens, candidate ids and their order, fills, texts, notes."""
    masks = tuple(dataclasses.replace(m, entropy=0.0, candidates=tuple(dataclasses.replace(c, prob=0.0)
                                                                          for c in m.candidates)) for m in r.masks)
    return dataclasses.replace(r, latency_ms=0.0, masks=masks, fill_probs=(), joint_log_prob=0.0)


def assert_same_fill(a, b) -> None:
    """Identical predictions; the probabilities equal up to float rounding (a padded batch sums in another order:
    BERT comes out bit-identical, the others ~1e-7 apart; relative too, since an entropy near 10 nats has been seen
    1.9e-6 apart)."""
    assert _without_floats(b) == _without_floats(a)
    np.testing.assert_allclose(_floats(b), _floats(a), rtol=1e-6, atol=1e-6)


def test_fill_mask_concurrent_equals_one_at_a_time(tiny_models, family, wide_window):
    lm = load(ModelSpec(family, str(tiny_models[family])), "mlm")
    cfgs = [FillMaskConfig(t, top_k=5, strategy="iterative" if i % 3 == 0 else "independent")
            for i, t in enumerate(TEXTS)]
    alone = [fill_mask(lm, c) for c in cfgs]  # sequential calls never overlap: each is a batch of one
    before = stats(lm, "fill_mask")
    together = _together(lambda c: fill_mask(lm, c), cfgs)
    after = stats(lm, "fill_mask")
    assert after.calls - before.calls == len(cfgs)
    assert after.batches - before.batches < len(cfgs), "the concurrent calls were not batched"
    assert after.largest > 1
    for a, b in zip(alone, together):
        assert not isinstance(b, Exception), b
        assert b.batch_size == 1 and b.latency_ms > 0
        assert_same_fill(a, b)


def test_a_bad_input_fails_only_its_own_caller(tiny_models, wide_window):
    lm = load(ModelSpec("bert", str(tiny_models["bert"])), "mlm")
    bad = FillMaskConfig("[CLS] [MASK]")  # valid as typed, but only masks once the special tokens are removed
    cfgs = [FillMaskConfig(TEXTS[0]), bad, FillMaskConfig(TEXTS[1]), FillMaskConfig(TEXTS[2])]
    out = _together(lambda c: fill_mask(lm, c), cfgs)
    assert isinstance(out[1], FillMaskError) and "only masks" in str(out[1])
    for i in (0, 2, 3):
        assert_same_fill(fill_mask(lm, cfgs[i]), out[i])


def test_pair_scoring_concurrent_equals_one_at_a_time(tiny_models, family, wide_window):
    lm = load(ModelSpec(family, str(tiny_models[family])), "pretraining")
    groups = [[p, p[::-1]] for p in PAIRS]  # what predict_pair asks: (A, B) and (B, A)
    from core.registry import FAMILIES

    if FAMILIES[family].pair_head is None:  # no pair head: every caller gets the registry's reason
        out = _together(lambda g: score_pairs(lm, g), groups)
        assert all(isinstance(e, PairError) for e in out)
        return
    alone = [score_pairs(lm, g) for g in groups]
    before = stats(lm, "score_pairs")
    together = _together(lambda g: score_pairs(lm, g), groups)
    after = stats(lm, "score_pairs")
    assert after.calls - before.calls == len(groups) and after.batches - before.batches < len(groups)
    assert after.largest > 1
    for (pa, ta, ca), res in zip(alone, together):
        assert not isinstance(res, Exception), res
        pb, tb, cb = res
        assert tb == ta and cb == ca
        np.testing.assert_allclose(pb, pa, rtol=0, atol=1e-6)


def test_classifier_concurrent_equals_one_at_a_time(tiny_models, family, wide_window):
    lm = load(ModelSpec(family, str(tiny_models[family])), "seqcls")
    fm = FinetunedModel(lm.model, lm.tokenizer, ("neg", "pos"), "cls", 64, lm.device)
    items = [[t.replace("[MASK]", "word")] for t in TEXTS]
    alone = [classify(fm, x) for x in items]
    before = stats(fm, "classify")
    together = _together(lambda x: classify(fm, x), items)
    after = stats(fm, "classify")
    assert after.calls - before.calls == len(items) and after.batches - before.batches < len(items)
    assert after.largest > 1
    for a, b in zip(alone, together):
        assert not isinstance(b, Exception), b
        assert b.shape == a.shape == (1, 2)
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)


def test_batcher_respects_max_batch_and_a_lone_caller_does_not_wait():
    b = Batcher()
    seen: list[int] = []

    def run(items):
        seen.append(len(items))
        time.sleep(0.02)
        return [x * 2 for x in items]

    key = object.__new__(type("Key", (), {}))
    gate = threading.Barrier(10)
    out = [None] * 10

    def worker(i):
        gate.wait()
        out[i] = b.call(key, "double", i, run, window_s=0.2, max_batch=4)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert out == [i * 2 for i in range(10)]
    assert max(seen) <= 4 and sum(seen) == 10 and len(seen) < 10
    time.sleep(0.3)  # past the "recent" horizon: the next caller is alone
    t0 = time.perf_counter()
    assert b.call(key, "double", 7, run, window_s=5.0, max_batch=4) == 14
    assert time.perf_counter() - t0 < 1.0, "a lone caller waited for the window"


def test_a_lone_caller_calling_again_and_again_never_waits():
    """One session predicting in a loop is not "concurrent" with itself: with a 5 s window, five calls in a row
    must not take five windows (before the fix each call after the first waited the whole window)."""
    b = Batcher()
    key = object.__new__(type("Key", (), {}))
    t0 = time.perf_counter()
    for i in range(5):
        assert b.call(key, "double", i, lambda items: [x * 2 for x in items], window_s=5.0, max_batch=8) == i * 2
    assert time.perf_counter() - t0 < 4.0, "a lone caller waited for the window"


def test_a_leader_stops_waiting_once_every_recent_caller_is_in(monkeypatch):
    """Threads that called lately are expected back: when all of them are in the batch the leader runs it at once
    instead of waiting out a long window (a room pressing Predict again together is not held for the window)."""
    import importlib

    # (core.runtime.serving.batcher the attribute is the batcher() function; the module is imported by name)
    monkeypatch.setattr(importlib.import_module("core.runtime.serving.batcher"), "RECENT_S", 30.0)  # every thread's first call stays "recent" on a busy machine
    b = Batcher()
    key = object.__new__(type("Key", (), {}))
    seen: list[int] = []

    def run(items):
        seen.append(len(items))
        return [x * 2 for x in items]

    n = 4
    gate = threading.Barrier(n)
    out: list = [None] * n

    def worker(i):
        first = b.call(key, "double", i, run, window_s=0.05, max_batch=16)  # every thread is now a recent caller
        gate.wait()
        out[i] = (first, b.call(key, "double", 100 + i, run, window_s=30.0, max_batch=16))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert out == [(i * 2, (100 + i) * 2) for i in range(n)]
    # a 30 s window waited out would take 30 s: the second round ran as soon as all four were in, as one batch
    assert time.perf_counter() - t0 < 20.0, "the leader waited out the window with every caller already in"
    assert seen[-1] == n

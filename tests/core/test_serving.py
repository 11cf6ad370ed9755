"""Batched inference: concurrent calls on one model coalesce, and each caller gets what it would have got alone."""

from __future__ import annotations

import dataclasses
import importlib
import threading
import time

import numpy as np
import pytest

from core.models.loading import ModelSpec, load
from core.predict.classify import FinetunedModel, classify
from core.predict.fill_mask import FillMaskConfig, FillMaskError, fill_mask
from core.predict.sentence_pair import PairError, score_pairs
from core.runtime.serving import Batcher, stats

TEXTS = [
    "The capital of France is [MASK].",
    "She [MASK] to the store.",
    "[MASK] is a big city.",
    "He played the [MASK] at the concert last night with his friends.",
    "A [MASK] of tea, please.",
    "The [MASK] sat on the [MASK] near the window.",
    "I [MASK] you.",
    "Books are [MASK].",
]
# the module (core.runtime.serving's attribute ``batcher`` is the batcher() function)
batcher_module = importlib.import_module("core.runtime.serving.batcher")
PAIRS = [
    ("The cat sat down.", "It purred."),
    ("It rained all day.", "We stayed inside."),
    ("Paris is in France.", "The sun is hot."),
    ("He opened the door.", "Cold air came in."),
    ("A short one.", "And a much longer second sentence with many more words in it."),
    ("Bread needs flour.", "Dough must rise."),
    ("Ships sail.", "Seas churn."),
    ("One.", "Two."),
]


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

    threads = [threading.Thread(target=worker, args=(i, x), daemon=True) for i, x in enumerate(items)]
    for t in threads:
        t.start()
    _join(threads, f"{len(items)} concurrent calls")
    return out


def _floats(r) -> list[float]:
    return [c.prob for m in r.masks for c in m.candidates] + [m.entropy for m in r.masks] + list(r.fill_probs)


def _without_floats(r):
    """Everything but the probabilities: tokens, candidate ids and their order, fills, texts, notes."""
    masks = tuple(
        dataclasses.replace(m, entropy=0.0, candidates=tuple(dataclasses.replace(c, prob=0.0) for c in m.candidates))
        for m in r.masks
    )
    return dataclasses.replace(r, latency_ms=0.0, masks=masks, fill_probs=(), joint_log_prob=0.0)


def assert_same_fill(a, b) -> None:
    """Identical predictions; the probabilities equal up to float rounding (a padded batch sums in another order:
    BERT comes out bit-identical, the others ~1e-7 apart; relative too, since an entropy near 10 nats has been seen
    1.9e-6 apart)."""
    assert _without_floats(b) == _without_floats(a)
    np.testing.assert_allclose(_floats(b), _floats(a), rtol=1e-6, atol=1e-6)


def test_fill_mask_concurrent_equals_one_at_a_time(tiny_models, family, wide_window):
    lm = load(ModelSpec(family, str(tiny_models[family])), "mlm")
    cfgs = [
        FillMaskConfig(t, top_k=5, strategy="iterative" if i % 3 == 0 else "independent") for i, t in enumerate(TEXTS)
    ]
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


def _join(threads, what: str, timeout: float = 120) -> None:
    """Join every thread; a thread still running after ``timeout`` is a hang, not a slow machine: fail saying so."""
    for t in threads:
        t.join(timeout)
    stuck = [t.name for t in threads if t.is_alive()]
    assert not stuck, f"{what}: {len(stuck)} thread(s) still waiting after {timeout} s (a hang)"


def _key():
    return object.__new__(type("Key", (), {}))


def test_batcher_respects_max_batch_and_a_lone_caller_does_not_wait():
    b = Batcher()
    key = _key()
    seen: list[int] = []
    n = 10

    def run(items):
        seen.append(len(items))
        if len(seen) == 1:  # hold the first batch until every caller has a request in: the rest must queue
            for _ in range(1200):  # a hang guard of 60 s, not a speed bound
                if b.stats(key, "double").calls == n:
                    break
                time.sleep(0.05)
            else:
                raise AssertionError(f"only {b.stats(key, 'double').calls} of {n} callers arrived in 60 s (a hang)")
        return [x * 2 for x in items]

    gate = threading.Barrier(n)
    out = [None] * n

    def worker(i):
        gate.wait()
        out[i] = b.call(key, "double", i, run, window_s=0.2, max_batch=4)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    _join(threads, "ten concurrent callers")
    assert out == [i * 2 for i in range(n)]
    # the first batch ran while nine more waited: those nine ran in batches of at most four (4 + 4 + 1 or so)
    assert max(seen) <= 4 and sum(seen) == n and len(seen) <= 1 + 3, seen
    before = b.stats(key, "double")
    assert before.calls == n and before.batches == len(seen) and before.largest == max(seen)
    # past the "recent" horizon (a sleep only makes sure the horizon has passed): the next caller is alone and runs
    # at once, with a 5 s window it never waits in
    time.sleep(batcher_module.RECENT_S + 0.05)
    assert b.call(key, "double", 7, run, window_s=5.0, max_batch=4) == 14
    after = b.stats(key, "double")
    assert (after.calls, after.batches) == (before.calls + 1, before.batches + 1) and seen[-1] == 1
    assert after.waits == before.waits, "a lone caller waited for the window"


def test_a_lone_caller_calling_again_and_again_never_waits():
    """One session predicting in a loop is not "concurrent" with itself: with a 5 s window, none of five calls in a
    row waits for companions (before the fix each call after the first waited the whole window)."""
    b = Batcher()
    key = _key()
    for i in range(5):
        assert b.call(key, "double", i, lambda items: [x * 2 for x in items], window_s=5.0, max_batch=8) == i * 2
    st = b.stats(key, "double")
    assert (st.calls, st.batches, st.largest) == (5, 5, 1)
    assert st.waits == 0 and st.timeouts == 0, f"a lone caller waited for the window: {st}"


def test_a_leader_stops_waiting_once_every_recent_caller_is_in(monkeypatch):
    """Threads that called lately are expected back: when all of them are in the batch the leader runs it at once
    instead of waiting out a long window (a room pressing Predict again together is not held for the window)."""
    # every thread's first call stays "recent" on a busy machine
    monkeypatch.setattr(batcher_module, "RECENT_S", 3600.0)
    b = Batcher()
    key = _key()
    seen: list[int] = []

    def run(items):
        seen.append(len(items))
        return [x * 2 for x in items]

    n = 4
    first_round: list = []  # the stats once every first call is back (the barrier's action runs once, in one thread)
    gate = threading.Barrier(n, action=lambda: first_round.append((b.stats(key, "double"), len(seen))))
    out: list = [None] * n

    def worker(i):
        first = b.call(key, "double", i, run, window_s=0.05, max_batch=16)  # every thread is now a recent caller
        gate.wait()
        out[i] = (first, b.call(key, "double", 100 + i, run, window_s=600.0, max_batch=16))

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    _join(threads, "the second round (a leader waiting out its 600 s window)", timeout=60)
    assert out == [(i * 2, (100 + i) * 2) for i in range(n)]
    (before, first_batches), after = first_round[0], b.stats(key, "double")
    # the second round: one batch of all four, run as soon as the four were in (not when the window ran out)
    assert after.batches - before.batches == 1 and seen[first_batches:] == [n], seen
    assert after.timeouts == before.timeouts, "the leader waited out the window with every caller already in"


def test_cpu_batches_run_on_one_compute_thread_in_the_leaders_context(tiny_models, wide_window):
    """Every batch of a model on the CPU runs on the process's one compute thread, whoever leads it (torch's OpenMP
    keeps a thread team per calling thread: teams of earlier leaders spin-waited on the cores the next forward needed),
    and in the leader's context (a ContextVar it set is seen by the batch); a model elsewhere runs on the leader."""
    import contextvars

    from core.runtime.serving import coalesce

    lang = contextvars.ContextVar("lang", default="none")
    ran: list[tuple[int, str, int]] = []

    def run(items):
        ran.append((threading.get_ident(), lang.get(), len(items)))
        return [x * 2 for x in items]

    class OnCpu:
        device = "cpu"

    class OnGpu:
        device = "cuda:0"

    callers: list[int] = []

    def call(obj, i):
        lang.set(f"caller {i}")
        callers.append(threading.get_ident())
        return coalesce(obj, "double", i, run)

    cpu = OnCpu()
    assert _together(lambda i: call(cpu, i), list(range(6))) == [i * 2 for i in range(6)]
    assert call(cpu, 9) == 18  # a lone caller's batch too
    threads = {t for t, _, _ in ran}
    assert len(threads) == 1 and not threads & set(callers), (threads, callers)
    assert all(ctx.startswith("caller ") for _, ctx, _ in ran), ran  # a leader's context, never the thread's own
    assert sum(n for _, _, n in ran) == 7
    ran.clear()
    callers.clear()
    gpu = OnGpu()
    assert _together(lambda i: call(gpu, i), list(range(3))) == [0, 2, 4]
    assert {t for t, _, _ in ran} <= set(callers)  # run by a leader itself


def test_the_compute_thread_runs_a_nested_call_inline():
    """A batch function that calls another batched op would wait on itself on a one-thread executor: run inline."""
    from core.runtime.serving.batcher import compute_thread

    outer = compute_thread(lambda: (threading.get_ident(), compute_thread(threading.get_ident)))
    assert outer[0] == outer[1] != threading.get_ident()


def test_packing_switched_off_by_the_caller_holds_on_the_compute_thread(tiny_models):
    """packed_linear.off() is a context variable: the batch, run on the compute thread in the caller's context, uses
    the plain modules too (bench/fill_mask.py's "default linears" baseline relies on it)."""
    from core.models import packed_linear

    if not packed_linear.available():
        pytest.skip("this torch build cannot pack linears")
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="mlm")
    packed_linear._PACKS.clear()
    with packed_linear.off():
        fill_mask(lm, FillMaskConfig(TEXTS[0]))
    assert packed_linear.packed_modules(lm.model) == 0
    fill_mask(lm, FillMaskConfig(TEXTS[0]))
    assert packed_linear.packed_modules(lm.model) > 0


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this platform")
def test_a_forked_child_gets_its_own_compute_thread():
    """Only the forking thread survives a fork: the child must not hand work to the parent's executor (it would wait
    forever), but make its own."""
    import os

    from core.runtime.serving.batcher import compute_thread

    assert compute_thread(lambda: 1) == 1  # the parent's compute thread exists
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer within the parent's wait, or not at all
        try:
            os.write(write, str(compute_thread(lambda: 41 + 1)).encode())
        finally:
            os._exit(0)
    os.close(write)
    import select

    ready, _, _ = select.select([read], [], [], 60)
    got = os.read(read, 16).decode() if ready else ""
    os.waitpid(pid, 0)
    assert got == "42", "the child's call on the compute thread did not return (a hang)"

"""The same inputs through the in-process and the Ray backend give the same results: fill-mask, sentence pairs,
attention and attributions (and the layer lens, head ablation, value zeroing, activation patching and the embedding
parts), for every bundled family on tiny models; errors cross as themselves."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
import torch

import core.runtime.backend as backend
from core.inspect.ablation import AblationConfig
from core.inspect.ablation_predict import ablate_fill_mask
from core.inspect.attention import AttentionConfig, compute_attention
from core.inspect.attribution import attribute
from core.inspect.attribution_inputs import AttributionConfig
from core.inspect.lens import LensConfig, lens
from core.inspect.patching import PatchConfig, patch
from core.inspect.value_zeroing import value_zeroing
from core.models.loading import ModelSpec, load
from core.predict.fill_mask import FillMaskConfig, FillMaskError, fill_mask
from core.predict.sentence_pair import PairError, score_pairs
from core.walkthrough.embeddings import embedding_parts
from tests.conftest import BUNDLED_NAMES
from tests.ray_backend.conftest import RAY_TESTS

pytestmark = RAY_TESTS
TIMING = (
    "latency_ms",
    "seconds",
    "exact_seconds",
    "attribution_seconds",
    "batch_size",
)  # wall times differ run to run; batch_size: how it was batched


def same(a, b, path="result"):
    """Assert ``a`` equals ``b`` field by field, arrays exactly, skipping wall-time fields."""
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), path
        for f in dataclasses.fields(a):
            if f.name not in TIMING:
                same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.shape == b.shape and a.dtype == b.dtype, path
        assert np.array_equal(a, b, equal_nan=True), f"{path} differs by {np.abs(a - b).max()}"
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            same(a[k], b[k], f"{path}[{k!r}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


@pytest.fixture()
def one_thread():
    """Replicas run one torch thread: so does this process while it computes the in-process side."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def both(fn, *args):
    """(in-process result or exception, Ray result or exception) of ``fn(*args)``."""
    out = []
    for b in (backend.InProcessBackend(), backend.current()):
        prev = backend.use(b)
        try:
            out.append(fn(*args))
        except Exception as e:  # noqa: BLE001 - compared below
            out.append(e)
        finally:
            backend.use(prev)
    return out


@pytest.mark.timeout(600)
@pytest.mark.parametrize("fam", sorted(BUNDLED_NAMES))
def test_both_backends_give_identical_results(fam, tiny_models, ray_backend, one_thread):
    # one model per family: pretraining heads (MLM and NSP/SOP where the family has one) with eager attention
    lm = load(ModelSpec(fam, str(tiny_models[fam]), "cpu"), task="pretraining", attentions=True)
    mask = lm.tokenizer.mask_token
    cases = {
        "fill-mask": (fill_mask, lm, FillMaskConfig(f"the cat sat on the {mask} today .", top_k=5)),
        "pairs": (score_pairs, lm, [("the cat sat .", "it was happy ."), ("dogs bark .", "birds sing .")]),
        "attention": (compute_attention, lm, AttentionConfig("the cat sat on the mat .")),
        "attribution": (
            attribute,
            lm,
            AttributionConfig(
                "mask", f"the cat sat on the {mask} .", methods=("lig", "saliency"), n_steps=8, internal_batch_size=8
            ),
        ),
        "lens": (lens, lm, LensConfig(f"the cat sat on the {mask} .", top_k=3)),
        "ablation": (
            ablate_fill_mask,
            lm,
            FillMaskConfig(f"the cat sat on the {mask} ."),
            AblationConfig(((0, 0), (1, 1)), "zero"),
        ),
        "embeddings": (embedding_parts, lm, "the cat sat .", "it was happy ."),
        "value zeroing": (value_zeroing, lm, AttentionConfig("the cat sat on the mat .")),
        "patching": (patch, lm, PatchConfig(f"the cat sat on the {mask} .", f"the mat sat on the {mask} .")),
    }
    for name, (fn, *args) in cases.items():
        here, there = both(fn, *args)
        assert name != "patching" or not isinstance(here, Exception), here  # a result, not the same error twice
        if isinstance(here, Exception):  # e.g. no pair head: the same error, the same message, either way
            assert type(there) is type(here) and str(there) == str(here), (name, here, there)
            continue
        assert not isinstance(there, Exception), (name, there)
        same(here, there, name)
    # the replica really ran elsewhere: another process, one thread
    where = ray_backend.where(lm)
    import os

    assert {w["pid"] for w in where} and os.getpid() not in {w["pid"] for w in where}
    assert {w["threads"] for w in where} == {1}
    if fam in ("roberta", "distilbert"):  # no pair head: PairError from the replica, as in-process
        with pytest.raises(PairError):
            score_pairs(lm, [("a", "b")])


def test_bad_input_fails_only_its_own_caller(tiny_models, ray_backend):
    """Concurrent callers batched on one replica: one text the model cannot read (only masks once the special tokens
    are dropped: it fails inside the batch) gets its own FillMaskError, the others their results."""
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="pretraining", attentions=True)
    mask = lm.tokenizer.mask_token
    texts = [f"word {i} {mask} ." for i in range(7)] + [f"{lm.tokenizer.cls_token} {mask} {lm.tokenizer.sep_token}"]
    out: dict[int, object] = {}

    def call(i: int) -> None:
        try:
            out[i] = fill_mask(lm, FillMaskConfig(texts[i]))
        except Exception as e:  # noqa: BLE001
            out[i] = e

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(texts))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert isinstance(out[7], FillMaskError) and "only masks" in str(out[7]), out[7]
    assert all(not isinstance(out[i], Exception) for i in range(7)), out


def test_progress_streams_and_cancel_stops_the_replica(tiny_models, ray_backend):
    """An attribution with progress: the calls arrive while it runs; raising from one (Cancel) ends the run."""
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="pretraining", attentions=True)
    mask = lm.tokenizer.mask_token
    cfg = AttributionConfig("mask", f"the cat sat on the {mask} .", methods=("lig",), n_steps=64, internal_batch_size=4)
    seen: list[float] = []
    attribute(lm, cfg, progress=lambda frac, msg="": seen.append(frac))
    assert len(seen) >= 3 and seen == sorted(seen)

    class Stop(Exception):
        pass

    calls = []

    def stop_at_second(frac, msg=""):
        calls.append(frac)
        if len(calls) == 2:
            raise Stop()

    with pytest.raises(Stop):
        attribute(lm, cfg, progress=stop_at_second)
    assert len(calls) == 2
    # the replica is free again at once: a fill-mask on the same model answers
    assert fill_mask(lm, FillMaskConfig(f"the {mask} .")).masks

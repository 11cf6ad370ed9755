"""packed_forward: the whole transformers forward of pair scoring and a classifier on packed linears, equal to the plain
forward, in this thread only, never under gradients."""

from __future__ import annotations

import threading

import pytest
import torch

from core.models import packed_linear
from core.models.loading import ModelSpec, load
from core.registry import FAMILIES, pair_head_module

pytestmark = pytest.mark.skipif(not packed_linear.available(), reason="this torch build cannot pack linears")
TEXTS = ["the cat sat on the mat .", "a much longer sentence about the weather and the sea today ."]


def _enc(tok, texts=TEXTS):
    enc = tok(texts, padding=True, return_tensors="pt")
    return {k: v for k, v in enc.items() if k in tok.model_input_names}


def _linear_count(model) -> int:
    return sum(1 for m in model.modules() if isinstance(m, torch.nn.Linear))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_equals_the_plain_forward_for_every_family(tiny_models, family):
    lm = load(ModelSpec(family, str(tiny_models[family]), "cpu"), task="seqcls")
    enc = _enc(lm.tokenizer)
    packed_linear._PACKS.clear()
    with torch.inference_mode():
        want = lm.model(**enc).logits
        assert packed_linear.packed_modules(lm.model) == 0  # the plain forward packs nothing
        with packed_linear.packed_forward(lm.model):
            got = lm.model(**enc).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    # every linear that ran was packed (a family may keep a linear its forward never calls: ELECTRA's unused pooler)
    assert 0 < packed_linear.packed_modules(lm.model) <= _linear_count(lm.model)


def test_pair_scoring_uses_it_and_agrees(tiny_models):
    from core.predict.sentence_pair import score_pairs_now

    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="pretraining")
    pairs = [("the cat sat on the mat .", "it was warm ."), ("stocks fell .", "the river froze early that winter .")]
    packed_linear._PACKS.clear()
    with packed_linear.off():
        want, _, _ = score_pairs_now(lm, pairs)
    assert packed_linear.packed_modules(lm.model) == 0
    got, _, _ = score_pairs_now(lm, pairs)
    assert packed_linear.packed_modules(lm.model) > 0
    assert got == pytest.approx(want, abs=1e-6)
    assert pair_head_module(lm.model) is not None


def test_gradients_and_other_threads_see_the_plain_modules(tiny_models, monkeypatch):
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="seqcls")
    enc = _enc(lm.tokenizer)
    calls: list[int] = []
    real = packed_linear._packed_weight
    monkeypatch.setattr(packed_linear, "_packed_weight", lambda w: calls.append(1) or real(w))

    def other_thread(seen: dict) -> None:
        before = len(calls)
        with torch.inference_mode():
            lm.model(**enc)
        seen["packed"] = len(calls) > before

    seen: dict[str, bool] = {}
    with torch.no_grad(), packed_linear.packed_forward(lm.model):
        with torch.enable_grad():  # gradients on inside the block: the plain F.linear, so a backward pass works
            out = lm.model(**enc).logits
            out.sum().backward()
        assert lm.model.classifier.weight.grad is not None
        assert not calls
        t = threading.Thread(target=other_thread, args=(seen,))
        t.start()
        t.join()
        lm.model(**enc)
    assert seen["packed"] is False  # the mode is this thread's only
    assert calls  # ...and this thread's inference forward did use it

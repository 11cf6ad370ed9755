"""core/inspect/value_zeroing on tiny random models of every family: the map equals an independent computation (a
plain forward hook that zeroes one token's values, transformers' hidden states), a layer whose values are all zero
gives zero there, another thread's forward of the same model is untouched while a zeroing runs, words merge as the
Words view merges attention, the Spearman agreement is a correlation, and the generic family gets the registry's
message."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from core.inspect.attention import AttentionConfig
from core.inspect.attention_views import word_groups
from core.inspect.value_zeroing import GRADIENT_MAX_TOKENS, value_zeroing, word_mixing
from core.models.loading import ModelSpec, load
from core.registry import ModelLoadError, family_of_model, value_projections
from tests.conftest import FAMILIES, GENERIC_KEY

TEXT = "the cat sat on the mat"


def fresh(tiny_models, fam):
    return load(ModelSpec(fam, str(tiny_models[fam]), "cpu"), "base")


def _hidden(lm, hook_on=None, hook=None):
    enc = lm.tokenizer(TEXT, return_tensors="pt")
    enc = {k: v for k, v in enc.items() if k in lm.tokenizer.model_input_names}
    h = hook_on.register_forward_hook(hook) if hook_on is not None else None
    try:
        with torch.no_grad():
            return lm.model(**enc, output_hidden_states=True).hidden_states
    finally:
        if h is not None:
            h.remove()


@pytest.mark.parametrize("fam", FAMILIES)
def test_the_map_equals_a_plain_hooks_zeroing(fam, tiny_models):
    lm = fresh(tiny_models, fam)
    r = value_zeroing(lm, AttentionConfig(TEXT))
    L, n = r.n_layers, len(r.tokens)
    assert r.raw.shape == (L, n, n) and np.all(r.raw >= 0) and r.raw.max() > 0
    np.testing.assert_allclose(r.mixing.sum(-1), 1.0, atol=1e-9)
    assert r.spearman is not None and r.spearman.shape == (L,) and np.isfinite(r.spearman).any()
    assert np.all(np.abs(r.spearman[np.isfinite(r.spearman)]) <= 1 + 1e-9)
    # independently: zero token j's values at the last layer with a plain hook and read transformers' hidden states
    depth, mod = value_projections(lm.model)[L - 1]
    _, part, parts = family_of_model(lm.model).value_proj
    width = mod.out_features // parts
    served = sum(m is mod for _, m in value_projections(lm.model))
    j = n // 2

    def zero(_m, _a, out):
        out = out.clone()
        out[:, j, part * width : (part + 1) * width] = 0
        return out

    plain = _hidden(lm)
    if served == 1:  # a layer shared across depth would zero every depth: the per-layer families only
        zeroed = _hidden(lm, mod, zero)
        want = 1 - torch.nn.functional.cosine_similarity(zeroed[L][0].double(), plain[L][0].double(), dim=-1)
        np.testing.assert_allclose(r.raw[L - 1][:, j], want.clamp_min(0).numpy(), atol=1e-6)
    # the model is as it was: no hook left behind
    np.testing.assert_allclose(_hidden(lm)[L].numpy(), plain[L].numpy(), atol=0)


@pytest.mark.parametrize("fam", FAMILIES)
def test_a_layer_with_zero_values_mixes_nothing(fam, tiny_models):
    lm = fresh(tiny_models, fam)
    _, mod = value_projections(lm.model)[0]
    _, part, parts = family_of_model(lm.model).value_proj
    width = mod.out_features // parts
    with torch.no_grad():
        mod.weight[part * width : (part + 1) * width] = 0
        if mod.bias is not None:
            mod.bias[part * width : (part + 1) * width] = 0
    r = value_zeroing(lm, AttentionConfig(TEXT), gradient=False)
    assert np.abs(r.raw[0]).max() < 1e-7 and r.gradient is None and r.spearman is None
    assert not r.mixing[0].any()  # all-zero rows stay zero, not NaN


def test_another_threads_forward_is_untouched_while_a_zeroing_runs(tiny_models):
    lm = fresh(tiny_models, FAMILIES[0])
    want = _hidden(lm)[-1]
    seen, stop = [], threading.Event()

    def other():
        while not stop.is_set():
            seen.append(float((_hidden(lm)[-1] - want).abs().max()))

    t = threading.Thread(target=other)
    t.start()
    try:
        for _ in range(3):
            value_zeroing(lm, AttentionConfig(TEXT), gradient=False)
    finally:
        stop.set()
        t.join()
    assert seen and max(seen) == 0.0


def test_words_merge_like_the_words_view(tiny_models):
    lm = fresh(tiny_models, FAMILIES[0])
    cfg = AttentionConfig("unbelievably, the tokenizer splits words")
    r = value_zeroing(lm, cfg, gradient=False)
    g = word_groups(lm.tokenizer, cfg)
    w = word_mixing(r.mixing, g)
    assert w.shape == (r.n_layers, g.n_words, g.n_words)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-6)
    k = next(i for i, grp in enumerate(g.groups) if len(grp) > 1)  # a word of several pieces: its column sums them
    rows_of_first = list(g.groups[0])
    want = r.mixing[0][rows_of_first][:, list(g.groups[k])].sum(-1).mean()
    assert w[0][0, k] == pytest.approx(want, rel=1e-6)


def test_long_texts_leave_out_the_gradient_only(tiny_models):
    lm = fresh(tiny_models, FAMILIES[0])
    r = value_zeroing(lm, AttentionConfig(" ".join(["word"] * GRADIENT_MAX_TOKENS)))
    assert r.gradient is None and r.spearman is None and r.raw.shape[-1] > GRADIENT_MAX_TOKENS


def test_the_generic_family_gets_the_registrys_message(tiny_models):
    lm = fresh(tiny_models, GENERIC_KEY)
    with pytest.raises(ModelLoadError, match="value projection"):
        value_zeroing(lm, AttentionConfig(TEXT))


def test_rows_in_chunks_give_the_same_map(tiny_models, monkeypatch):
    """A text longer than one forward's rows (ROWS_PER_FORWARD) is zeroed chunk by chunk, each with its own
    reference row: the map is the one a single forward gives."""
    from core.inspect import value_zeroing as vz

    lm = fresh(tiny_models, FAMILIES[0])
    whole = value_zeroing(lm, AttentionConfig(TEXT), gradient=False)
    monkeypatch.setattr(vz, "ROWS_PER_FORWARD", 3)
    chunked = value_zeroing(lm, AttentionConfig(TEXT), gradient=False)
    assert len(whole.tokens) > 3
    np.testing.assert_allclose(chunked.raw, whole.raw, atol=1e-6)


def test_a_text_over_the_limit_is_told_so(tiny_models, monkeypatch):
    from core.inspect import value_zeroing as vz

    monkeypatch.setattr(vz, "MAX_TOKENS", 5)
    with pytest.raises(vz.ValueZeroingError, match="at most 5"):
        value_zeroing(fresh(tiny_models, FAMILIES[0]), AttentionConfig(TEXT))

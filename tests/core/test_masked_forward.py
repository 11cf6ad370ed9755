"""The last-layer-at-the-masks-only forward equals the full encoder's output there, for every registered family
(and the generic one), with the default linears and with oneDNN-packed ones; families the fast forward does not
claim run the transformers forward; packs follow weight changes."""

from __future__ import annotations

import platform

import pytest
import torch

from core.models import packed_linear
from core.models.loading import ModelSpec, load
from core.models.masked_forward import fast_path, masked_hidden, masked_logits
from core.registry import FAMILIES, GENERIC, mlm_head
from tests.conftest import GENERIC_KEY

PACKED = [
    False,
    pytest.param(
        True, marks=pytest.mark.skipif(not packed_linear.available(), reason="this torch build cannot pack linears")
    ),
]


def _batch(tok, texts):
    enc = [tok(t)["input_ids"] for t in texts]
    t = max(map(len, enc))
    ids = torch.full((len(enc), t), tok.pad_token_id)
    attn = torch.zeros((len(enc), t), dtype=torch.long)
    for i, e in enumerate(enc):
        ids[i, : len(e)] = torch.tensor(e)
        attn[i, : len(e)] = 1
    return ids, attn


@pytest.mark.parametrize("packed", PACKED)
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("family", [*FAMILIES, GENERIC_KEY])
def test_equals_the_full_forward(tiny_models, family, padded, packed):
    lm = load(ModelSpec(family, str(tiny_models[family]), "cpu"), task="mlm")
    texts = ["the cat sat on the mat .", "a much longer sentence about the weather and the sea today ."]
    ids, attn = _batch(lm.tokenizer, texts if padded else texts[:1])
    rows, cols = ([0, 0, 1, 1], [1, 4, 2, 9]) if padded else ([0, 0], [1, 4])
    with torch.inference_mode():
        full = lm.model.base_model(input_ids=ids, attention_mask=attn if padded else None).last_hidden_state
        part = masked_hidden(lm.model, ids, attn if padded else None, rows, cols, packed=packed)
        logits = masked_logits(lm.model, mlm_head(lm.model), ids, attn if padded else None, rows, cols, packed=packed)
        full_logits = lm.model(input_ids=ids, attention_mask=attn if padded else None).logits
    assert part.shape == (len(rows), full.shape[-1])
    torch.testing.assert_close(part, full[rows, cols], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(logits, full_logits[rows, cols], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("family", [*FAMILIES, GENERIC_KEY])
def test_the_fast_path_is_taken_exactly_where_the_registry_claims_it(tiny_models, family):
    """A family with a layer adapter runs the written-out layers (the transformers encoder is never called);
    the others (ModernBERT's rotary pre-LayerNorm layers, the generic family) run the transformers forward."""
    fam = FAMILIES.get(family, GENERIC)
    lm = load(ModelSpec(family, str(tiny_models[family]), "cpu"), task="mlm")
    calls = []
    h = lm.model.base_model.register_forward_hook(lambda m, i, o: calls.append(1))
    try:
        ids, _ = _batch(lm.tokenizer, ["the cat sat on the mat ."])
        with torch.inference_mode():
            masked_hidden(lm.model, ids, None, [0], [2], packed=False)
    finally:
        h.remove()
    assert fast_path(lm.model) == (fam.layer_parts is not None)
    assert calls == ([] if fam.layer_parts is not None else [1])


def test_an_option_the_adapter_does_not_reproduce_falls_back(tiny_models):
    """BERT with relative positions: the adapter declines, the transformers forward runs, results still agree."""
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="mlm")
    lm.model.config.position_embedding_type = "relative_key"
    try:
        assert not fast_path(lm.model)
    finally:
        lm.model.config.position_embedding_type = "absolute"
    assert fast_path(lm.model)


def test_it_really_skips_work(tiny_models):
    """The last layer's feed-forward sees only the asked rows (2), not every token."""
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="mlm")
    seen = []
    h = lm.model.base_model.encoder.layer[-1].intermediate.dense.register_forward_hook(
        lambda m, i, o: seen.append(i[0].shape)
    )
    try:
        ids, _ = _batch(lm.tokenizer, ["the cat sat on the mat ."])
        with torch.inference_mode():
            masked_hidden(lm.model, ids, None, [0, 0], [1, 4], packed=False)
    finally:
        h.remove()
    assert seen == [torch.Size([2, lm.model.config.hidden_size])]


def test_packing_is_available_on_x86_linux():
    """The fast path must not vanish silently where the project runs (a torch upgrade that drops the op fails here)."""
    if platform.machine() != "x86_64":
        pytest.skip("the packed path is only required on x86-64")
    assert packed_linear.available()


@pytest.mark.skipif(not packed_linear.available(), reason="this torch build cannot pack linears")
def test_packed_path_runs_and_follows_weight_changes(tiny_models):
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="mlm")
    model = lm.model
    ids, _ = _batch(lm.tokenizer, ["the cat sat on the mat ."])

    def both():
        with torch.inference_mode():
            got = masked_logits(model, mlm_head(model), ids, None, [0], [3])
            want = model(input_ids=ids).logits[:, 3]
        return got, want

    got, want = both()
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    # 6 linears in each of the 2 layers, the head's transform and its decoder
    assert packed_linear.packed_modules(model) == 6 * model.config.num_hidden_layers + 2
    with torch.no_grad():  # an in-place update, as an optimizer step makes
        model.bert.encoder.layer[0].intermediate.dense.weight.mul_(3.0)
        model.cls.predictions.decoder.weight.add_(0.5)
    got2, want2 = both()
    assert not torch.allclose(want2, want, atol=1e-3)  # the change matters...
    torch.testing.assert_close(got2, want2, atol=1e-4, rtol=1e-4)  # ...and the packs followed it
    layer = model.bert.encoder.layer[1].output.dense  # a new weight tensor altogether
    layer.weight = torch.nn.Parameter(torch.randn_like(layer.weight))
    got3, want3 = both()
    torch.testing.assert_close(got3, want3, atol=1e-4, rtol=1e-4)


def test_packing_is_refused_with_gradients_on(tiny_models):
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="mlm")
    assert packed_linear.linears(lm.model) is not packed_linear._packed_linear  # grad mode: plain modules
    with pytest.raises(RuntimeError, match="no gradients"):
        packed_linear.linears(lm.model, packed=True)

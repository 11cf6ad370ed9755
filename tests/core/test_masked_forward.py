"""The last-layer-at-the-masks-only forward equals the full encoder's output there, for all four families."""
from __future__ import annotations

import pytest
import torch

from core.masked_forward import masked_hidden
from core.models import ModelSpec, load


def _batch(tok, texts):
    enc = [tok(t)["input_ids"] for t in texts]
    t = max(map(len, enc))
    ids = torch.full((len(enc), t), tok.pad_token_id)
    attn = torch.zeros((len(enc), t), dtype=torch.long)
    for i, e in enumerate(enc):
        ids[i, :len(e)] = torch.tensor(e)
        attn[i, :len(e)] = 1
    return ids, attn


@pytest.mark.parametrize("padded", [False, True])
def test_equals_the_full_forward(tiny_models, family, padded):
    lm = load(ModelSpec(family, str(tiny_models[family]), "cpu"), task="mlm")
    texts = ["the cat sat on the mat .", "a much longer sentence about the weather and the sea today ."]
    ids, attn = _batch(lm.tokenizer, texts if padded else texts[:1])
    rows, cols = ([0, 0, 1, 1], [1, 4, 2, 9]) if padded else ([0, 0], [1, 4])
    with torch.inference_mode():
        full = lm.model.base_model(input_ids=ids, attention_mask=attn if padded else None).last_hidden_state
        part = masked_hidden(lm.model, ids, attn if padded else None, rows, cols)
    assert part.shape == (len(rows), full.shape[-1])
    torch.testing.assert_close(part, full[rows, cols], atol=1e-5, rtol=1e-4)


def test_it_really_skips_work(tiny_models):
    """The last layer's feed-forward sees only the asked rows (2), not every token."""
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="mlm")
    seen = []
    h = lm.model.base_model.encoder.layer[-1].intermediate.dense.register_forward_hook(
        lambda m, i, o: seen.append(i[0].shape))
    try:
        ids, _ = _batch(lm.tokenizer, ["the cat sat on the mat ."])
        with torch.inference_mode():
            masked_hidden(lm.model, ids, None, [0, 0], [1, 4])
    finally:
        h.remove()
    assert seen == [torch.Size([2, lm.model.config.hidden_size])]

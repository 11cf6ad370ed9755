"""The encoder's output at a few positions only: every layer runs as usual except the last, which computes its
queries, attention output and feed-forward only for the asked positions (keys and values still come from every
token). Fill-mask needs the last hidden state at the masks alone, so this saves most of one layer's work and,
with the vocabulary projection at the masks only, makes a fill-mask cheaper than a bare encoder forward.

``masked_hidden(model, ids, attn, rows, cols)`` -> (M, H) for the (row, position) pairs; it equals
``model.base_model(...).last_hidden_state[rows, cols]`` (tests/core/test_masked_forward.py checks all four
families). Architectures it does not know fall back to that full forward.
"""
from __future__ import annotations

import math

import torch


def _additive_mask(attn: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """(B, T) 1/0 padding mask -> (B, 1, 1, T) additive mask, or None when nothing is padded."""
    if attn is None:
        return None
    return (1.0 - attn[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, mask_rows: torch.Tensor | None):
    """Attention of M queries over their own rows' keys/values: q (M, H), k/v (M, T, H) -> (M, H)."""
    m, t, h = k.shape
    d = h // heads
    q = q.view(m, heads, 1, d)
    k = k.view(m, t, heads, d).transpose(1, 2)  # (M, heads, T, d)
    v = v.view(m, t, heads, d).transpose(1, 2)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)  # (M, heads, 1, T)
    if mask_rows is not None:
        scores = scores + mask_rows  # (M, 1, 1, T)
    return (scores.softmax(-1) @ v).reshape(m, h)


def _bert_like(base, ids, attn, rows, cols):
    emb = base.embeddings(input_ids=ids)
    mask = _additive_mask(attn, emb.dtype)
    h = emb
    layers = base.encoder.layer
    for layer in layers[:-1]:
        h = layer(h, mask)
    last = layers[-1]
    sa = last.attention.self
    x = h[rows, cols]  # (M, H)
    q, k, v = sa.query(x), sa.key(h)[rows], sa.value(h)[rows]
    ctx = _attend(q, k, v, sa.num_attention_heads, None if mask is None else mask[rows])
    a = last.attention.output.LayerNorm(last.attention.output.dense(ctx) + x)
    f = last.output.dense(last.intermediate.intermediate_act_fn(last.intermediate.dense(a)))
    return last.output.LayerNorm(f + a)


def _albert(base, ids, attn, rows, cols):
    cfg = base.config
    if cfg.inner_group_num != 1:
        return None
    h = base.encoder.embedding_hidden_mapping_in(base.embeddings(input_ids=ids))
    mask = _additive_mask(attn, h.dtype)
    n, groups = cfg.num_hidden_layers, base.encoder.albert_layer_groups
    group_of = [int(i / (n / cfg.num_hidden_groups)) for i in range(n)]
    for i in range(n - 1):
        h = groups[group_of[i]](h, mask)
    last = groups[group_of[-1]].albert_layers[0]
    at = last.attention
    x = h[rows, cols]
    q, k, v = at.query(x), at.key(h)[rows], at.value(h)[rows]
    ctx = _attend(q, k, v, at.num_attention_heads, None if mask is None else mask[rows])
    a = at.LayerNorm(at.dense(ctx) + x)
    f = last.ffn_output(last.activation(last.ffn(a)))
    return last.full_layer_layer_norm(f + a)


def _distilbert(base, ids, attn, rows, cols):
    h = base.embeddings(input_ids=ids)
    mask = _additive_mask(attn, h.dtype)
    layers = base.transformer.layer
    for layer in layers[:-1]:
        h = layer(h, mask)
    last = layers[-1]
    at = last.attention
    x = h[rows, cols]
    q, k, v = at.q_lin(x), at.k_lin(h)[rows], at.v_lin(h)[rows]
    ctx = _attend(q, k, v, at.n_heads, None if mask is None else mask[rows])
    a = last.sa_layer_norm(at.out_lin(ctx) + x)
    f = last.ffn.lin2(last.ffn.activation(last.ffn.lin1(a)))
    return last.output_layer_norm(f + a)


_BY_TYPE = {"bert": _bert_like, "roberta": _bert_like, "albert": _albert, "distilbert": _distilbert}


def masked_hidden(model, ids: torch.Tensor, attn: torch.Tensor | None, rows: torch.Tensor | list[int],
                  cols: torch.Tensor | list[int]) -> torch.Tensor:
    """Last hidden states (M, H) at positions ``(rows[i], cols[i])`` of the padded batch ``ids`` (B, T).

    ``attn`` is the (B, T) padding mask, or None when no row is padded. Call under torch.inference_mode().
    """
    base = model.base_model
    rows_t = torch.as_tensor(rows, dtype=torch.long, device=ids.device)
    cols_t = torch.as_tensor(cols, dtype=torch.long, device=ids.device)
    fn = _BY_TYPE.get(getattr(base.config, "model_type", ""))
    if fn is not None and getattr(base.config, "_attn_implementation", None) in ("sdpa", "eager"):
        out = fn(base, ids, attn, rows_t, cols_t)
        if out is not None:
            return out
    return base(input_ids=ids, attention_mask=attn).last_hidden_state[rows_t, cols_t]

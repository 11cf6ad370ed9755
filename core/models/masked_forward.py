"""The encoder's output at a few positions only, and the MLM logits there: every layer runs as usual except the
last, which computes its queries, attention output and feed-forward only for the asked positions (keys and values
still come from every token). Fill-mask needs the last hidden state at the masks alone, so this saves most of one
layer's work, and with the vocabulary projection at the masks only a fill-mask costs less than a bare encoder forward.

The layers are written out here from the parts each family's registry adapter finds in the model's own modules
(``Family.layer_parts``, ``Family.head_parts`` in core.registry) so that every linear goes through ``core.models.packed_linear``: on CPU its oneDNN-packed weights run the few-row products of one sentence ~1.8x faster
than the default kernel.

``masked_hidden(model, ids, attn, rows, cols)`` -> (M, H) for the (row, position) pairs; it equals
``model.base_model(...).last_hidden_state[rows, cols]``. ``masked_logits`` adds the MLM head: (M, V).
tests/core/test_masked_forward.py checks every family with an adapter, padded or not, packed or not. Families
without one (ModernBERT's rotary pre-LayerNorm layers, the generic family) and options an adapter does not reproduce
(relative positions, ALBERT inner groups) run the transformers forward; a test shows that too.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from core.models.packed_linear import linears
from core.registry import family_of_config

Lin = Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]


def _additive_mask(attn: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """(B, T) 1/0 padding mask -> (B, 1, 1, T) additive mask, or None when nothing is padded."""
    if attn is None:
        return None
    return (1.0 - attn[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def _self_attention(lin: Lin, qm, km, vm, h: torch.Tensor, heads: int, mask: torch.Tensor | None) -> torch.Tensor:
    """Full self-attention of every token: h (B, T, H) -> context (B, T, H)."""
    b, t, hd = h.shape
    q, k, v = (lin(m, h).view(b, t, heads, hd // heads).transpose(1, 2) for m in (qm, km, vm))  # (B, heads, T, d)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(b, t, hd)


def _attend_rows(lin: Lin, qm, km, vm, h: torch.Tensor, rows, cols, heads: int, mask: torch.Tensor | None):
    """Attention of the M asked positions only over their own rows' keys/values -> (M, H), and their inputs."""
    x = h[rows, cols]  # (M, H)
    k, v = lin(km, h)[rows], lin(vm, h)[rows]  # (M, T, H)
    m, t, hd = k.shape
    d = hd // heads
    q = lin(qm, x).view(m, heads, 1, d)
    k = k.view(m, t, heads, d).transpose(1, 2)  # (M, heads, T, d)
    v = v.view(m, t, heads, d).transpose(1, 2)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)  # (M, heads, 1, T)
    if mask is not None:
        scores = scores + mask[rows]  # (M, 1, 1, T)
    return (scores.softmax(-1) @ v).reshape(m, hd), x


def layer_forward(parts: tuple, h, mask, lin: Lin, rows=None, cols=None):
    """One post-LayerNorm encoder layer from its parts; with rows/cols, only at those positions -> (M, H)."""
    q, k, v, heads, out, norm1, ffn_in, act, ffn_out, norm2 = parts
    if rows is None:
        ctx, x = _self_attention(lin, q, k, v, h, heads, mask), h
    else:
        ctx, x = _attend_rows(lin, q, k, v, h, rows, cols, heads, mask)
    a = norm1(lin(out, ctx) + x)
    return norm2(lin(ffn_out, act(lin(ffn_in, a))) + a)


def _stack(parts: list[tuple], h, mask, lin: Lin, rows, cols):
    for p in parts[:-1]:
        h = layer_forward(p, h, mask, lin)
    return layer_forward(parts[-1], h, mask, lin, rows, cols)


def layer_parts(base, lin: Lin):
    """(embed, parts per layer application) from the family's adapter (core.registry, ``Family.layer_parts``), or
    None where this forward does not apply: a family without one, an option it does not reproduce, or an attention
    kernel other than sdpa/eager."""
    if getattr(base.config, "_attn_implementation", None) not in ("sdpa", "eager"):
        return None
    adapter = family_of_config(base.config).layer_parts
    return None if adapter is None else adapter(base, lin)


def masked_hidden(
    model,
    ids: torch.Tensor,
    attn: torch.Tensor | None,
    rows: torch.Tensor | list[int],
    cols: torch.Tensor | list[int],
    packed: bool | None = None,
) -> torch.Tensor:
    """Last hidden states (M, H) at positions ``(rows[i], cols[i])`` of the padded batch ``ids`` (B, T).

    ``attn`` is the (B, T) padding mask, or None when no row is padded. ``packed``: see core.models.packed_linear.linears
    (None = packed weights where they help). Call under torch.inference_mode().
    """
    return _hidden(model, ids, attn, rows, cols, linears(model, packed))


def _hidden(model, ids, attn, rows, cols, lin: Lin) -> torch.Tensor:
    base = model.base_model
    rows_t = torch.as_tensor(rows, dtype=torch.long, device=ids.device)
    cols_t = torch.as_tensor(cols, dtype=torch.long, device=ids.device)
    found = layer_parts(base, lin)
    if found is None:  # the transformers forward, over every position
        return base(input_ids=ids, attention_mask=attn).last_hidden_state[rows_t, cols_t]
    embed, parts = found
    h = embed(ids)  # (B, T, H)
    return _stack(parts, h, _additive_mask(attn, h.dtype), lin, rows_t, cols_t)


def head_parts(model):
    """(dense, activation, layer norm, decoder) of the model's MLM head from the family's adapter, or None."""
    adapter = family_of_config(model.config).head_parts
    return None if adapter is None else adapter(model)


def fast_path(model) -> bool:
    """True when this model's encoder runs the written-out layers here (else the transformers forward)."""
    return layer_parts(model.base_model, linears(model, False)) is not None


def masked_logits(
    model, head: Callable, ids: torch.Tensor, attn: torch.Tensor | None, rows, cols, packed: bool | None = None
) -> torch.Tensor:
    """MLM logits (M, V) at the (row, position) pairs only: masked_hidden, then the head at those rows.
    ``head`` is the model's MLM head (core.registry.mlm_head), used as is for heads this file does not know."""
    lin = linears(model, packed)
    h = _hidden(model, ids, attn, rows, cols, lin)  # (M, H)
    parts = head_parts(model)
    if parts is None:
        return head(h)
    dense, act, norm, decoder = parts
    return lin(decoder, norm(act(lin(dense, h))))  # (M, V)

"""The depth-wise forward and the MLM head that the raw lens (core.inspect.lens) and the tuned lens
(core.inspect.tuned_lens) share: hidden states at chosen positions after every layer, computed with
core.models.masked_forward's layers and packed linears (so the last row is Fill-mask's own), and the head on them."""

from __future__ import annotations

import torch

from core.base.messages import Problem
from core.models import masked_forward as mf
from core.models.packed_linear import linears
from core.predict.fill_mask import mlm_head
from core.registry.shape import shape


class LensError(Problem, ValueError):
    """The lens cannot run on this input or model; the message says why and what to do."""


def n_layers(model) -> int:
    """How many times the encoder applies a layer (ALBERT: its shared layer, once per depth)."""
    return shape(model.config).layers


def layer_states(model, ids, cols, lin=None):
    """Hidden states (L+1, M, H) at positions ``cols`` of the one text ``ids`` (1, T): embeddings, then after every
    layer. Equal to ``torch.stack(base(ids, output_hidden_states=True).hidden_states)[:, 0, cols]`` (a test checks
    it), computed with core.models.masked_forward's layers and packed linears so that the last row is Fill-mask's own
    (its last layer runs at the masks only, as there). Call under torch.inference_mode()."""
    lin = lin or linears(model)
    base = model.base_model
    cols_t = torch.as_tensor(cols, dtype=torch.long, device=ids.device)
    found = mf.layer_parts(base, lin)
    if found is None:
        out = base(input_ids=ids, output_hidden_states=True)
        return torch.stack(out.hidden_states)[:, 0, cols_t]
    embed, parts = found
    h = embed(ids)  # (1, T, H)
    states = [h[0, cols_t]]
    for p in parts[:-1]:
        h = mf.layer_forward(p, h, None, lin)
        states.append(h[0, cols_t])
    rows_t = torch.zeros_like(cols_t)
    states.append(mf.layer_forward(parts[-1], h, None, lin, rows_t, cols_t))  # the last layer at the masks only
    return torch.stack(states)  # (L+1, M, H)


def apply_head(model, x, lin=None):
    """The MLM head on hidden states x (N, H) -> logits (N, V), with the kernels Fill-mask uses."""
    parts = mf.head_parts(model)
    if parts is None:
        return mlm_head(model)(x)
    lin = lin or linears(model)
    dense, act, norm, decoder = parts
    return lin(decoder, norm(act(lin(dense, x))))


def hidden_size(model) -> int:
    """The width of the encoder's hidden states."""
    return shape(model.config).hidden

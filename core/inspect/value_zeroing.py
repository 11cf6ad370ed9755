"""Value zeroing (Mohebbi, Zuidema, Chrupała & Alishahi, EACL 2023): how much each token's output at a layer depends
on each other token, measured by removing that token's value vectors in that layer.

For layer l and token j, every head's value vector of token j (the value projection's output at j) is set to zero
in layer l only, and layer l's output for every token i is compared with the unchanged one by cosine distance:
``raw[l, i, j] = 1 - cos(x_i, x_i without j)``. ``mixing`` normalises each row to sum to 1 (the paper's map). Unlike
raw attention it sees the value vectors' sizes, the residual and the layer norms.

Beside it, a gradient-based token importance, local to the layer as value zeroing is: gradient x input of token i's
output norm at layer l with respect to layer l's input at token j, ``|d ||x_i|| / d h_j . h_j|``, rows normalised;
and per layer the mean over rows i of the Spearman rank correlation of the two rows.

inseq implements value zeroing for decoders and seq2seq models only, and no library knows these encoders' value
projections, so it is written here: the registry names each family's value projection (``Family.value_proj``); one
forward hook per call, gated by a ``ContextVar`` so other sessions' forwards of the same shared model never see it,
zeroes token j's values in batch row j, and the layer outputs come from transformers' ``output_hidden_states``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.base.messages import Problem, msg
from core.base.text import display_piece
from core.inspect.attention import AttentionConfig, encode
from core.inspect.attention_views import WordGroups, word_attention
from core.registry import family_of_model, value_projections
from core.runtime.backend import model_op

# 1 - cos(x, x) in float64 is a few ulps, not 0: below this a distance is rounding (a float32 model's real changes
# are far above it), and a row of rounding alone would normalise to a uniform row
COS_ROUNDING = 1e-12
GRADIENT_MAX_TOKENS = 64  # one backward per (layer, token): above this the gradient comparison is left out
# one forward per layer and ROWS_PER_FORWARD tokens, each row the whole text: the work grows with the square of the
# length, so a page asks for at most MAX_TOKENS (bert-base: 48 forwards of 33 x 128 tokens), and rows go in chunks
# so that one request's hidden states stay small while other sessions share the process
MAX_TOKENS = 128
ROWS_PER_FORWARD = 32


class ValueZeroingError(Problem, ValueError):
    """A text or a model value zeroing cannot use; the message says why and what to do."""


@dataclass(frozen=True, eq=False)
class ValueZeroingResult:
    """Value zeroing of one text; arrays are (layers, seq, seq): row = the token whose output changes, column = the
    token whose values are zeroed."""

    checkpoint: str
    config: AttentionConfig
    tokens: tuple[str, ...]  # the pieces as a person reads them
    raw: np.ndarray  # cosine distances
    mixing: np.ndarray  # rows normalised to sum to 1 (an all-zero row stays zero)
    gradient: np.ndarray | None  # gradient x input importance, rows normalised; None when not computed
    spearman: np.ndarray | None  # (layers,) mean Spearman correlation of mixing and gradient rows; NaN: no row

    @property
    def n_layers(self) -> int:
        return int(self.raw.shape[0])


def rows_normalised(a: np.ndarray) -> np.ndarray:
    s = a.sum(-1, keepdims=True)
    return np.divide(a, s, out=np.zeros_like(a), where=s > 0)


@dataclass
class _Zeroing:
    """One forward's zeroing: at depth ``layer``, batch row r loses the values (columns ``cols``) of token
    ``positions[r]``; the last row, one more than the positions, loses nothing and is the reference (the same batched
    arithmetic: a layer that does not mix gives exactly zero)."""

    layer: int
    cols: slice
    positions: Any  # a torch tensor of token indices, one per zeroed row
    depths: dict  # id(module) -> the depths it serves, in call order (a shared layer serves several)
    calls: dict  # id(module) -> calls seen in this forward


_ZEROING: ContextVar[_Zeroing | None] = ContextVar("encoderlab_value_zeroing", default=None)
_LOCK = threading.Lock()  # hooks are added and removed one call at a time


def _hook_for(z: _Zeroing) -> Callable:
    def hook(mod, _args, out):
        if _ZEROING.get() is not z:  # another session's forward, or another call's hook: leave it alone
            return None
        served = z.depths[id(mod)]
        k = z.calls.get(id(mod), 0)
        z.calls[id(mod)] = k + 1
        if served[k % len(served)] != z.layer:
            return None
        import torch

        out = out.clone()
        rows = torch.arange(len(z.positions), device=out.device)  # the batch's last row keeps every value
        out[rows, z.positions.to(out.device), z.cols] = 0
        return out

    return hook


def _layer_outputs(model, inputs: dict) -> list:
    """Each layer's output (hidden_states[1:]), batch first."""
    out = model(**inputs, output_hidden_states=True)
    hs = getattr(out, "hidden_states", None)
    if hs is None:
        raise ValueZeroingError(msg("value_zeroing.no_hidden_states", model_class=type(model).__name__))
    return list(hs[1:])


@model_op
def value_zeroing(lm, config: AttentionConfig, gradient: bool = True) -> ValueZeroingResult:
    """Value zeroing of ``config``'s text on ``lm`` (a LoadedModel of any task), with the gradient comparison when
    ``gradient`` and the text has at most GRADIENT_MAX_TOKENS tokens. Raises ValueError for a text longer than the
    model reads (core.inspect.attention.encode) or than MAX_TOKENS, and the registry's ModelLoadError for a model
    whose value projections it does not locate."""
    import torch

    model, tok = lm.model, lm.tokenizer
    located = value_projections(model)
    _, part, parts = family_of_model(model).value_proj or ("", 0, 1)
    enc, inputs, _ = encode(lm, config)
    ids = enc["input_ids"][0].tolist()
    n = len(ids)
    if n > MAX_TOKENS:
        raise ValueZeroingError(msg("value_zeroing.text_too_long", n=n, max_tokens=MAX_TOKENS))
    depths: dict[int, list[int]] = {}
    for depth, mod in located:
        depths.setdefault(id(mod), []).append(depth)
    modules = {id(m): m for _, m in located}
    n_layers = len(located)
    raw = np.zeros((n_layers, n, n), dtype=np.float64)
    width = next(iter(modules.values())).out_features // parts  # the values' share of the projection's output
    cols = slice(part * width, (part + 1) * width)
    with torch.no_grad():
        for layer in range(n_layers):
            for start in range(0, n, ROWS_PER_FORWARD):
                js = torch.arange(start, min(n, start + ROWS_PER_FORWARD))
                m = len(js)
                z = _Zeroing(layer, cols, js, depths, {})
                batch = {k: v.expand(m + 1, *v.shape[1:]) for k, v in inputs.items()}
                with _LOCK:
                    handles = [mod.register_forward_hook(_hook_for(z)) for mod in modules.values()]
                token = _ZEROING.set(z)
                try:
                    out = _layer_outputs(model, batch)[layer].double()  # (row, i, hidden): row r without js[r]
                finally:
                    _ZEROING.reset(token)
                    with _LOCK:
                        for h in handles:
                            h.remove()
                cos = torch.nn.functional.cosine_similarity(out[:m], out[m][None], dim=-1)  # (r, i)
                dist = (1.0 - cos).T.cpu().numpy()  # (i, r): column j = start + r
                raw[layer][:, start : start + m] = np.where(dist > COS_ROUNDING, dist, 0.0)
    mixing = rows_normalised(raw)
    grad = corr = None
    if gradient and n <= GRADIENT_MAX_TOKENS:
        grad, corr = _gradient(model, inputs, n_layers, mixing)
    for a in (raw, mixing, grad, corr):
        if a is not None:
            a.setflags(write=False)
    tokens = tuple(display_piece(p, tok) for p in tok.convert_ids_to_tokens(ids))
    return ValueZeroingResult(lm.spec.checkpoint, config, tokens, raw, mixing, grad, corr)


def _gradient(model, inputs: dict, n_layers: int, mixing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradient x input importance per layer (rows normalised) and its mean row Spearman with ``mixing``."""
    import torch
    from scipy.stats import spearmanr  # lazy: only the rank correlations need it

    emb = model.get_input_embeddings()
    fed = {k: v for k, v in inputs.items() if k != "input_ids"}
    with torch.enable_grad():
        embeds = emb(inputs["input_ids"]).detach().requires_grad_(True)  # a frozen model's states still get a graph
        hs = model(**fed, inputs_embeds=embeds, output_hidden_states=True).hidden_states
        n = embeds.shape[1]
        imp = np.zeros((n_layers, n, n), dtype=np.float64)
        for layer in range(n_layers):
            h, x = hs[layer], hs[layer + 1]
            norms = x[0].norm(dim=-1)
            for i in range(n):
                (g,) = torch.autograd.grad(norms[i], h, retain_graph=True)
                imp[layer, i] = (g[0] * h[0]).sum(-1).abs().detach().double().cpu().numpy()
    imp = rows_normalised(imp)
    corr = np.full(n_layers, np.nan)
    for layer in range(n_layers):
        rs = [
            spearmanr(mixing[layer, i], imp[layer, i]).statistic
            for i in range(n)
            if np.ptp(mixing[layer, i]) > 0 and np.ptp(imp[layer, i]) > 0
        ]
        rs = [r for r in rs if np.isfinite(r)]
        if rs:
            corr[layer] = float(np.mean(rs))
    return imp, corr


def word_mixing(maps: np.ndarray, groups: WordGroups) -> np.ndarray:
    """(layers, seq, seq) row-normalised maps -> (layers, words, words), merged as the Words view merges attention
    (core.inspect.attention_views.word_attention): rows averaged over a word's pieces, columns summed."""
    return word_attention(np.asarray(maps, dtype=np.float64)[:, None], groups)[:, 0]

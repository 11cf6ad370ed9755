"""What the feature browser asks of a trained SAE (core.inspect.sae, core.inspect.sae_store): a feature's top contexts,
the tokens its decoder direction promotes and suppresses through the MLM head, the features that fire on each token of
a sentence, a search over features by the tokens they fire on, and steering: Fill-mask with one feature clamped to a
value (or zeroed) at the SAE's layer, before and after.

Steering edits the layer's output h at every token to h + (value - a(h)) d, where a(h) is the feature's activation
and d its decoder direction: the feature reads ``value`` and nothing else changes (the reconstruction error stays).
The edit goes through core.inspect.patching_sites' hooks for this call only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.base.messages import msg
from core.base.text import display_piece, with_mask_token
from core.inspect.patching_sites import Run, hooked, running, sites
from core.inspect.sae import SAEError, as_numpy, states_at
from core.inspect.sae_store import Browse
from core.models.spec import LoadedModel
from core.registry import final_norm, mlm_head

TOP_TOKENS = 10


@dataclass(frozen=True)
class Context:
    """One top-activating context: the sentence's pieces, the one that fired, and how strongly."""

    pieces: tuple[str, ...]
    position: int
    activation: float


def check_feature(sae, feature: int) -> None:
    if not isinstance(feature, int) or not 0 <= feature < sae.features:
        raise SAEError(msg("sae.feature_out_of_range", feature=feature, last=sae.features - 1))


def contexts(lm: LoadedModel, sae, browse: Browse, feature: int) -> list[Context]:
    """The feature's top-activating held-out contexts, strongest first (those where it fired)."""
    check_feature(sae, feature)
    tok = lm.tokenizer
    out = []
    for s, p, a in zip(
        browse.ctx_sentence[feature], browse.ctx_position[feature], browse.ctx_activation[feature], strict=True
    ):
        if a <= 0:
            continue
        ids = tok(browse.sentences[int(s)], truncation=True, max_length=64)["input_ids"]
        out.append(Context(tuple(display_piece(x, tok) for x in tok.convert_ids_to_tokens(ids)), int(p), float(a)))
    return out


def logit_effects(lm: LoadedModel, sae, browse: Browse, feature: int, top: int = TOP_TOKENS):
    """(promoted, suppressed): the tokens whose MLM logit most rises and falls when the feature's direction, at its
    mean activation, is added to the mean state and read by the MLM head after the base model's final norm, if it
    has one (a logit lens at the SAE's layer, as the Layer lens reads it)."""
    import torch

    check_feature(sae, feature)
    head = mlm_head(lm.model)
    if head is None:
        raise SAEError(msg("sae.no_mlm_head", model_class=type(lm.model).__name__))
    dtype = next(lm.model.parameters()).dtype
    mu = torch.as_tensor(browse.mean_state, device=lm.device)
    amount = float(browse.mean_activation[feature]) or 1.0
    norm = final_norm(lm.model) or (lambda x: x)  # what the base model does after its last layer (ModernBERT's norm)
    with torch.no_grad():
        base = head(norm(mu[None].to(dtype)))[0].float()
        moved = head(norm((mu + amount * sae.direction(feature).to(mu.device))[None].to(dtype)))[0].float()
    delta = moved - base
    tok = lm.tokenizer

    def named(idx) -> list[tuple[str, float]]:
        return [(display_piece(tok.convert_ids_to_tokens(int(i)), tok), float(delta[i])) for i in idx]

    return named(delta.topk(top).indices), named((-delta).topk(top).indices)


def token_features(lm: LoadedModel, sae, layer: int, text: str, top: int = 5):
    """The pieces of ``text`` and, per piece, its ``top`` features (feature, activation), strongest first."""
    import torch

    tok = lm.tokenizer
    enc = tok(with_mask_token(text, tok.mask_token), return_tensors="pt", truncation=True, max_length=512)
    enc = {k: v.to(lm.device) for k, v in enc.items() if k in tok.model_input_names}
    with torch.no_grad():
        codes = sae.encode(states_at(lm, enc, layer)[0].float())
    vals, idx = codes.topk(top, dim=-1)
    pieces = tuple(display_piece(p, tok) for p in tok.convert_ids_to_tokens(enc["input_ids"][0].tolist()))
    rows = [
        [(int(i), float(v)) for i, v in zip(ii, vv, strict=True) if v > 0]
        for ii, vv in zip(idx.tolist(), vals.tolist(), strict=True)
    ]
    return pieces, rows


def search(lm: LoadedModel, browse: Browse, query: str, limit: int = 20) -> list[tuple[int, int, float]]:
    """Features whose top contexts fire on a piece matching ``query`` (as the tokenizer shows it, any case):
    (feature, how many of its top contexts, their summed activation), most first."""
    tok = lm.tokenizer
    q = query.strip().lower()
    if not q:
        return []
    vocab = tok.convert_ids_to_tokens(np.unique(browse.ctx_token).tolist())
    wanted = {
        int(i)
        for i, p in zip(np.unique(browse.ctx_token), vocab, strict=True)
        if display_piece(p, tok).strip().lower() == q
    }
    hits = np.isin(browse.ctx_token, list(wanted)) & (browse.ctx_activation > 0)
    count = hits.sum(1)
    strength = (browse.ctx_activation * hits).sum(1)
    order = np.lexsort((-strength, -count))
    return [(int(f), int(count[f]), float(strength[f])) for f in order[:limit] if count[f] > 0]


@dataclass(frozen=True)
class Steered:
    """Fill-mask before and after the edit: per mask, the words in either side's top k (before's first) and each
    one's probability before and after."""

    pieces: tuple[str, ...]
    masks: tuple[int, ...]
    words: tuple[tuple[str, ...], ...]
    before: tuple[tuple[float, ...], ...]
    after: tuple[tuple[float, ...], ...]
    feature: int
    value: float


def steer(lm: LoadedModel, sae, layer: int, text: str, feature: int, value: float, top_k: int = 5) -> Steered:
    """Fill-mask on ``text`` as it is, and with ``feature`` clamped to ``value`` (0: switched off) at ``layer``'s
    output at every token. Raises SAEError for a feature out of range or a text without a mask."""
    import torch

    check_feature(sae, feature)
    tok = lm.tokenizer
    enc = tok(with_mask_token(text, tok.mask_token), return_tensors="pt", truncation=True, max_length=512)
    enc = {k: v.to(lm.device) for k, v in enc.items() if k in tok.model_input_names}
    ids = enc["input_ids"][0].tolist()
    masks = tuple(i for i, x in enumerate(ids) if x == tok.mask_token_id)
    if not masks:
        raise SAEError(msg("sae.no_mask", mask=tok.mask_token))
    head = mlm_head(lm.model)
    if head is None:
        raise SAEError(msg("sae.no_mlm_head", model_class=type(lm.model).__name__))
    special = tok(
        with_mask_token(text, tok.mask_token), truncation=True, max_length=512, return_special_tokens_mask=True
    )["special_tokens_mask"]
    on = torch.tensor([not x for x in special], device=lm.device)[None]  # the tokens the SAE was trained on
    clamp = clamp_edit(sae, feature, value, on)

    st = sites(lm.model)
    probs = []
    with torch.no_grad(), hooked(st) as owner:
        for edits in ({}, {("resid", layer): clamp}):
            with running(Run(owner, edits=edits)):
                h = lm.model.base_model(**enc)[0][0]
            probs.append(head(h[list(masks)]).float().softmax(-1))  # (masks, V)
    words, before, after = [], [], []
    for m in range(len(masks)):
        ids_m = list(dict.fromkeys(probs[0][m].topk(top_k).indices.tolist() + probs[1][m].topk(top_k).indices.tolist()))
        words.append(tuple(display_piece(tok.convert_ids_to_tokens(int(i)), tok) for i in ids_m))
        before.append(tuple(float(probs[0][m, i]) for i in ids_m))
        after.append(tuple(float(probs[1][m, i]) for i in ids_m))
    pieces = tuple(display_piece(p, tok) for p in tok.convert_ids_to_tokens(ids))
    return Steered(pieces, masks, tuple(words), tuple(before), tuple(after), feature, float(value))


def clamp_edit(sae, feature: int, value: float, on=None):
    """The edit that sets ``feature`` to ``value`` in a layer's output h (B, T, H): h + (value - a(h)) d at the tokens
    ``on`` (B, T) bool (default all), where a(h) is the feature's activation and d its decoder direction."""
    d = sae.direction(feature)

    def clamp(h):
        a = sae.encode(h.reshape(-1, h.shape[-1]).float())[:, feature].reshape(h.shape[:-1])
        step = (value - a)[..., None] * d.to(h.device)
        if on is not None:
            step = step * on[..., None].to(step.dtype)
        return h + step.to(h.dtype)

    return clamp


def direction_norms(sae) -> np.ndarray:
    """Each feature's decoder direction's norm in the states' units (1 / the input scale: all equal)."""
    return as_numpy(sae.w_dec.norm(dim=1) / sae.scale)

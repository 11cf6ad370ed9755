"""Attention of an encoder on one text (or a pair): the weights, q and k, and what can be computed from them.

``compute_attention`` runs the model once (eager attention, so the weights exist) and returns an
``AttentionResult`` of numpy arrays. Everything else here is a pure function of those arrays:

- ``head_stats`` / ``find_heads``: per-head statistics in the style of Clark et al. 2019 ("What does BERT look
  at?"): entropy, mean attention distance, and the share of attention on [CLS], [SEP], punctuation, the
  previous and the next token.
- ``rollout`` and ``flow``: Abnar & Zuidema 2020 ("Quantifying attention flow in transformers"). Both mix in
  the residual connection (0.5 A + 0.5 I, rows renormalised); rollout multiplies the layers, flow solves a
  max-flow problem per (output token, input token) pair in the layered graph.
- ``layer_similarity``: how alike each layer's heads are to the same heads in every other layer (correlation).
- ``qk_view``: the query/key "neuron view" of one head for one query token, from the captured q and k.
"""

from __future__ import annotations

import inspect
import threading
import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.base.messages import Problem, msg
from core.base.text import display_piece, removed_note, strip_typed_specials, with_mask_token
from core.models.spec import max_tokens as model_max_tokens
from core.registry import family, qk_modules
from core.runtime.backend import model_op

MAX_TOKENS = 512  # the most the Attention page shows: (layers, heads, n, n) maps grow with n squared
# Flow solves one max-flow problem per (output, input) token pair (networkx). On a 2-core CPU with 12 layers one
# row (e.g. [CLS]'s relevance, n problems) takes ~2.5 s at 32 tokens; the full map (n^2 problems) ~4 s at 16.
FLOW_MAX_TOKENS = 32
FLOW_MAP_MAX_TOKENS = 16


class AttentionUnavailable(Problem, ValueError):
    """The model returned no attention weights. The message says why and how to fix it."""


@dataclass(frozen=True)
class AttentionConfig:
    """What to run: one sentence, or a pair A/B when ``pair`` is set."""

    text: str
    text_b: str = ""
    pair: bool = False
    capture_qk: bool = True  # also capture q and k (for the query/key view)

    def __post_init__(self) -> None:
        if not self.text or not self.text.strip():
            first = msg("attention.sentence_a_empty" if self.pair else "attention.text_empty")
            raise ValueError(msg("attention.type_sentence_see_where", first=first))
        if self.pair and (not self.text_b or not self.text_b.strip()):
            raise ValueError(msg("attention.sentence_b_empty_type"))
        for name, s in (("Sentence A" if self.pair else "The text", self.text), ("Sentence B", self.text_b)):
            clean, found = strip_typed_specials(s)
            if found and not clean.strip():
                raise ValueError(msg("attention.holds_only_special_tokens", name=name, found=", ".join(found)))


@dataclass(frozen=True, eq=False)
class AttentionResult:
    """One forward pass. Arrays are numpy; attention rows sum to 1 (up to float16 rounding)."""

    tokens: tuple[str, ...]  # tokenizer pieces, as the tokenizer writes them (Ġ, ▁, ##)
    labels: tuple[str, ...]  # the same pieces as a person reads them (core.base.text.display_piece), never empty
    attentions: np.ndarray  # (layers, heads, seq, seq) float16: row i = how query i spreads over keys
    queries: np.ndarray | None  # (layers, heads, seq, head_dim) float16, the query projection before scaling
    keys: np.ndarray | None  # (layers, heads, seq, head_dim) float16
    sentence_b_start: int | None  # first position of sentence B, None for one sentence
    cls_mask: np.ndarray  # (seq,) bool: [CLS] / <s>
    sep_mask: np.ndarray  # (seq,) bool: [SEP] / </s>
    punct_mask: np.ndarray  # (seq,) bool: pieces made only of punctuation
    family: str
    checkpoint: str
    model_type: str
    max_tokens: int  # what this model can read
    qk_note: str = ""  # why queries/keys are None, when they are
    notes: tuple[str, ...] = ()  # what was changed in the text before the model read it (typed special tokens)

    @property
    def n_layers(self) -> int:
        return int(self.attentions.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.attentions.shape[1])

    @property
    def n_tokens(self) -> int:
        return int(self.attentions.shape[2])

    @property
    def cls_index(self) -> int:
        hits = np.flatnonzero(self.cls_mask)
        return int(hits[0]) if hits.size else 0


# ---------------------------------------------------------------------------------------------- running
def is_punct(token: str) -> bool:
    """True when the piece (without word-start marks) is only Unicode punctuation (ASCII or CJK)."""
    t = token.replace("Ġ", "").replace("▁", "").replace("##", "").strip()
    return bool(t) and all(unicodedata.category(c).startswith("P") for c in t)


def position_limit(model, tokenizer) -> int:
    """How many tokens the model can read: its position table (less RoBERTa's padding offset), at most 512."""
    return min(model_max_tokens(model, tokenizer), MAX_TOKENS)


def _capture_qk(model, names: tuple[str, str]):
    """Forward hooks on every query/key projection (``names``: their last names, from the family's registry entry).
    Returns (handles, store). Calls from other threads (another session using the same cached model) are ignored,
    so concurrent runs cannot mix."""
    owner = threading.get_ident()
    store: dict[str, list] = {"q": [], "k": []}
    handles = []

    def make(kind):
        def hook(_module, _inputs, output):
            if threading.get_ident() == owner:
                store[kind].append(output.detach().float().cpu())

        return hook

    for name, module in model.named_modules():
        last = name.rsplit(".", 1)[-1]
        if last == names[0]:
            handles.append(module.register_forward_hook(make("q")))
        elif last == names[1]:
            handles.append(module.register_forward_hook(make("k")))
    return handles, store


def _split_heads(x, n_heads: int) -> np.ndarray:
    # (1, seq, hidden) -> (heads, seq, head_dim)
    _, seq, hidden = x.shape
    return x[0].reshape(seq, n_heads, hidden // n_heads).permute(1, 0, 2).numpy()


def model_texts(config: AttentionConfig, tokenizer) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The one text (or the pair) as the tokenizer reads it, and the typed special tokens taken out: typed specials
    removed, a typed [MASK] / <mask> as the tokenizer's own mask token (core.base.text). compute_attention and the
    word view (core.inspect.attention_views) encode these, so their tokens are the same."""
    mask = getattr(tokenizer, "mask_token", None)
    text, found = strip_typed_specials(config.text)
    texts = [with_mask_token(text, mask)]
    if config.pair:
        text_b, found_b = strip_typed_specials(config.text_b)
        texts.append(with_mask_token(text_b, mask))
        found = tuple(dict.fromkeys(found + found_b))
    return tuple(texts), found


def encode(lm, config: AttentionConfig) -> tuple[Any, dict, tuple[str, ...]]:
    """``config``'s text as ``lm`` reads it: the tokenizer's encoding (with its special-tokens mask), the tensors
    its forward takes, on its device, and the typed special tokens taken out (model_texts). compute_attention and
    core.inspect.value_zeroing encode through this, so their tokens are the same. Raises ValueError when the text is
    longer than the model can read."""
    model, tok = lm.model, lm.tokenizer
    limit = position_limit(model, tok)
    texts, found = model_texts(config, tok)
    enc = tok(*texts, return_tensors="pt", return_special_tokens_mask=True, truncation=False)
    n = int(enc["input_ids"].shape[1])
    if n > limit:
        raise ValueError(msg("attention.text_too_long", n=n, limit=limit, n_over=n - limit))
    accepted = set(inspect.signature(model.forward).parameters)
    inputs = {k: v.to(lm.device) for k, v in enc.items() if k in accepted and k != "special_tokens_mask"}
    return enc, inputs, found


@model_op
def compute_attention(lm, config: AttentionConfig) -> AttentionResult:
    """Run ``lm`` (a core.models.loading.LoadedModel) once on the config's text and return its attention.

    Raises ValueError when the text is longer than the model can read, and AttentionUnavailable when the
    model returns no attention weights (loaded with sdpa/flash attention instead of eager).
    q and k are captured with forward hooks that are always removed; the model itself is not changed.
    """
    import torch

    model, tok = lm.model, lm.tokenizer
    enc, inputs, found = encode(lm, config)
    ids = enc["input_ids"][0].tolist()
    tokens = tuple(tok.convert_ids_to_tokens(ids))
    b_start = None
    if config.pair:
        seq_ids = enc.sequence_ids(0)
        b_start = next((i for i, s in enumerate(seq_ids) if s == 1), None)
    impl = getattr(model.config, "_attn_implementation", None)
    qk_names = qk_modules(model)
    want_qk = qk_names if config.capture_qk else None  # the q/k projections' names, when asked for and known
    handles, store = _capture_qk(model, want_qk) if want_qk is not None else ([], {"q": [], "k": []})
    try:
        with torch.inference_mode():
            out = model(**inputs, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    atts = getattr(out, "attentions", None)
    if not atts or any(a is None for a in atts):
        raise AttentionUnavailable(msg("attention.no_attention_weights", checkpoint=lm.spec.checkpoint, impl=impl))
    att = torch.stack([a[0].float().cpu() for a in atts]).numpy().astype(np.float16)  # (L, H, n, n)
    n_layers, n_heads = att.shape[0], att.shape[1]
    queries = keys = None
    qk_note = "" if config.capture_qk else "q and k were not asked for (capture_qk=False)."
    if config.capture_qk and qk_names is None:
        qk_note = lm.family.qk_note or "This family fuses its query and key projections: there is no q/k view."
    elif want_qk is not None and (len(store["q"]) != n_layers or len(store["k"]) != n_layers):
        qk_note = msg(
            "attention.no_qk_view",
            n_items=len(store["q"]),
            n_items2=len(store["k"]),
            n_layers=n_layers,
            qk_names=want_qk[0],
            qk_names2=want_qk[1],
        )
    elif want_qk is not None:
        queries = np.stack([_split_heads(q, n_heads) for q in store["q"]]).astype(np.float16)
        keys = np.stack([_split_heads(k, n_heads) for k in store["k"]]).astype(np.float16)
    special = enc["special_tokens_mask"][0].numpy().astype(bool)
    cls_mask = np.array([i == tok.cls_token_id for i in ids]) & special
    sep_mask = np.array([i == tok.sep_token_id for i in ids]) & special
    punct_mask = np.array([is_punct(t) for t in tokens]) & ~special
    return AttentionResult(
        tokens=tokens,
        labels=tuple(display_piece(t, tok) for t in tokens),
        attentions=att,
        queries=queries,
        keys=keys,
        sentence_b_start=b_start,
        cls_mask=cls_mask,
        sep_mask=sep_mask,
        punct_mask=punct_mask,
        family=lm.spec.family,
        checkpoint=lm.spec.checkpoint,
        model_type=str(model.config.model_type),
        max_tokens=position_limit(model, tok),
        qk_note=qk_note,
        notes=(removed_note(found),) if found else (),
    )


# ---------------------------------------------------------------------------------------------- head statistics
PATTERNS: dict[str, str] = {
    "previous": "attends to the previous token",
    "next": "attends to the next token",
    "self": "attends to itself",
    "cls": "attends to [CLS]",
    "sep": "attends to [SEP]",
    "punct": "attends to punctuation",
    "broad": "spreads attention broadly (high entropy)",
}


@dataclass(frozen=True, eq=False)
class HeadStats:
    """Per-head statistics, each (layers, heads), averaged over query positions."""

    entropy: np.ndarray  # bits; log2(seq) would be uniform attention
    distance: np.ndarray  # mean |i - j| weighted by attention, in tokens
    cls: np.ndarray  # share of attention on [CLS]
    sep: np.ndarray  # share on [SEP]
    punct: np.ndarray  # share on punctuation
    previous: np.ndarray  # share on token i-1 (rows i >= 1)
    next: np.ndarray  # share on token i+1 (rows i < seq-1)
    self: np.ndarray  # share on token i itself
    n_tokens: int

    def share(self, pattern: str) -> np.ndarray:
        """The (layers, heads) score of a pattern in PATTERNS; 'broad' is entropy / log2(seq)."""
        if pattern == "broad":
            return self.entropy / max(np.log2(self.n_tokens), 1e-9)
        if pattern not in PATTERNS:
            raise ValueError(msg("attention.unknown_pattern_use_one", pattern=pattern, choices=", ".join(PATTERNS)))
        return getattr(self, pattern)


def head_stats(att: np.ndarray, cls_mask: np.ndarray, sep_mask: np.ndarray, punct_mask: np.ndarray) -> HeadStats:
    """Clark et al. 2019 statistics of ``att`` (layers, heads, seq, seq) given boolean masks (seq,).
    Works one layer at a time, so a 12 x 12 x 512 x 512 input needs ~25 MB of scratch, not gigabytes."""
    n_layers, n_heads, n, _ = att.shape
    idx = np.arange(n)
    dist = np.abs(idx[:, None] - idx[None, :]).astype(np.float64)
    masks = [np.asarray(m, dtype=bool) for m in (cls_mask, sep_mask, punct_mask)]
    out = {
        k: np.zeros((n_layers, n_heads))
        for k in ("entropy", "distance", "cls", "sep", "punct", "previous", "next", "self")
    }
    for layer in range(n_layers):
        a = np.asarray(att[layer], dtype=np.float64)  # (heads, n, n)
        safe_a = np.where(a > 0, a, 1.0)
        out["entropy"][layer] = -(a * np.log2(safe_a)).sum(-1).mean(-1)
        out["distance"][layer] = (a * dist).sum(-1).mean(-1)
        for key, m in zip(("cls", "sep", "punct"), masks):
            out[key][layer] = a[..., m].sum(-1).mean(-1) if m.any() else 0.0
        out["self"][layer] = np.diagonal(a, axis1=-2, axis2=-1).mean(-1)
        if n > 1:
            out["previous"][layer] = np.diagonal(a, offset=-1, axis1=-2, axis2=-1).mean(-1)
            out["next"][layer] = np.diagonal(a, offset=1, axis1=-2, axis2=-1).mean(-1)
    return HeadStats(n_tokens=n, **out)


@dataclass(frozen=True)
class HeadMatch:
    layer: int
    head: int
    score: float


def find_heads(stats: HeadStats, pattern: str, threshold: float = 0.5) -> list[HeadMatch]:
    """Heads whose score for ``pattern`` is at least ``threshold``, best first. Raises ValueError on a bad
    pattern or a threshold outside [0, 1]."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(msg("attention.threshold_outside_share_attention", threshold=threshold))
    s = stats.share(pattern)
    hits = [HeadMatch(int(layer), int(h), float(s[layer, h])) for layer, h in zip(*np.nonzero(s >= threshold))]
    return sorted(hits, key=lambda m: -m.score)


# ---------------------------------------------------------------------------------------------- rollout, flow
def residual_attention(att: np.ndarray) -> np.ndarray:
    """(layers, heads, seq, seq) -> (layers, seq, seq): heads averaged, 0.5 A + 0.5 I, rows renormalised."""
    a = np.mean(att, axis=1, dtype=np.float64)  # accumulates in float64 without a float64 copy of att
    a = 0.5 * a + 0.5 * np.eye(a.shape[-1])[None]
    return a / a.sum(-1, keepdims=True)


def rollout(att: np.ndarray) -> np.ndarray:
    """Attention rollout (seq, seq): row i = how much output token i (top layer) draws on input token j."""
    aug = residual_attention(att)
    joint = aug[0]
    for layer in aug[1:]:
        joint = layer @ joint
    return joint


def flow(att: np.ndarray, rows: list[int] | None = None, max_tokens: int | None = None) -> np.ndarray:
    """Attention flow (seq, seq): entry (i, j) is the max flow from output token i at the top layer to input
    token j at the embeddings, through a layered graph whose edge capacities are the residual attention.

    Only ``rows`` are solved (all when None); the others are NaN. Raises ValueError above ``max_tokens``
    tokens (default FLOW_MAP_MAX_TOKENS for the full map, FLOW_MAX_TOKENS for chosen rows), because each entry
    is a separate max-flow problem.
    """
    import networkx as nx
    from networkx.algorithms.flow import shortest_augmenting_path

    aug = residual_attention(att)
    n_layers, n, _ = aug.shape
    if max_tokens is None:
        max_tokens = FLOW_MAP_MAX_TOKENS if rows is None else FLOW_MAX_TOKENS
    if n > max_tokens:
        raise ValueError(msg("attention.attention_flow_limited_tokens", max_tokens=max_tokens, n=n))
    g = nx.DiGraph()
    for layer in range(n_layers):  # edges go from layer+1 (the attending token) down to layer (the attended one)
        for i in range(n):
            for j in range(n):
                if aug[layer, i, j] > 0:
                    g.add_edge((layer + 1, i), (layer, j), capacity=float(aug[layer, i, j]))
    out = np.full((n, n), np.nan)
    for i in range(n) if rows is None else rows:
        for j in range(n):
            out[i, j] = nx.maximum_flow_value(g, (n_layers, i), (0, j), flow_func=shortest_augmenting_path)
    return out


def restrict(att: np.ndarray, start: int, end: int) -> np.ndarray:
    """Attention among tokens start..end-1 only, rows renormalised (what leaves the range is dropped)."""
    if not 0 <= start < end <= att.shape[-1]:
        raise ValueError(msg("attention.token_range_outside", start=start, end=end, shape=att.shape[-1]))
    a = np.asarray(att[..., start:end, start:end], dtype=np.float64)
    return a / np.maximum(a.sum(-1, keepdims=True), 1e-12)


def relevance(mixed: np.ndarray, index: int) -> np.ndarray:
    """Row ``index`` of a rollout/flow map, normalised to sum to 1: each input token's share for that output."""
    row = np.asarray(mixed[index], dtype=np.float64)
    total = row.sum()
    return row / total if total > 0 else row


@dataclass(frozen=True, eq=False)
class Mixing:
    """How the tokens mix: by one layer (its raw attention, heads averaged) and through the whole stack (rollout),
    with each input token's share in one output token under each (``relevance``)."""

    layer: int
    index: int  # the output token the shares are of (the page's: [CLS])
    raw: np.ndarray  # (seq, seq) float64
    rollout: np.ndarray  # (seq, seq) float64
    raw_relevance: np.ndarray  # (seq,)
    rollout_relevance: np.ndarray  # (seq,)


def mixing(att: np.ndarray, layer: int, index: int) -> Mixing:
    """The raw attention of ``layer`` (heads averaged) and the rollout of ``att`` (layers, heads, seq, seq), and
    row ``index`` of each as shares."""
    raw = np.asarray(att[layer], dtype=np.float64).mean(0)
    roll = rollout(att)
    return Mixing(layer, index, raw, roll, relevance(raw, index), relevance(roll, index))


# ---------------------------------------------------------------------------------------------- comparisons
def layer_similarity(att: np.ndarray) -> np.ndarray:
    """(layers, layers): mean over heads of the correlation between head h's map in layer a and in layer b.

    Pearson correlation of the flattened maps (each centred on its mean), not raw cosine: attention rows are
    distributions, so two near-uniform maps have cosine ~1 whatever their pattern; the correlation compares
    where each map departs from uniform. 1 = the same pattern, 0 = unrelated, < 0 = opposite.
    """
    flat = np.asarray(att, dtype=np.float32).reshape(att.shape[0], att.shape[1], -1)  # float32: half the memory
    flat = flat - flat.mean(-1, keepdims=True, dtype=np.float64).astype(np.float32)
    flat /= np.maximum(np.linalg.norm(flat, axis=-1, keepdims=True), 1e-12)
    return np.einsum("ahx,bhx->abh", flat, flat).mean(-1).astype(np.float64)


def adjacent_similarity(sim: np.ndarray) -> float:
    """Mean similarity of each layer to the next one (the first off-diagonal of ``layer_similarity``)."""
    d = np.diagonal(sim, offset=1)
    return float(d.mean()) if d.size else float("nan")


@dataclass(frozen=True, eq=False)
class ModelAttention:
    """One model's side of a comparison: its result, head statistics and layer-to-layer similarity."""

    result: AttentionResult
    stats: HeadStats
    similarity: np.ndarray  # (layers, layers), layer_similarity
    adjacent: float  # adjacent_similarity

    @property
    def label(self) -> str:
        return f"{family(self.result.family).label} · {self.result.checkpoint}"


def model_attention(r: AttentionResult, stats: HeadStats | None = None) -> ModelAttention:
    """The comparison side of one result (its head statistics computed unless given)."""
    stats = stats or head_stats(r.attentions, r.cls_mask, r.sep_mask, r.punct_mask)
    sim = layer_similarity(r.attentions)
    return ModelAttention(r, stats, sim, adjacent_similarity(sim))


def compare_attention(
    r: AttentionResult, stats: HeadStats, other_lm, config: AttentionConfig
) -> tuple[ModelAttention, ModelAttention]:
    """Run ``other_lm`` (a LoadedModel with eager attention) on the same config and return both sides. Raises what
    compute_attention raises."""
    return model_attention(r, stats), model_attention(compute_attention(other_lm, config))


# ---------------------------------------------------------------------------------------------- query/key view
@dataclass(frozen=True, eq=False)
class QKView:
    """How one head's attention for one query token comes out of q and k."""

    query: np.ndarray  # (head_dim,)
    keys: np.ndarray  # (seq, head_dim)
    product: np.ndarray  # (seq, head_dim): q * k elementwise; each row sums to q . k
    scores: np.ndarray  # (seq,): q . k / sqrt(head_dim)
    weights: np.ndarray  # (seq,): softmax of scores, what the head attends with


def qk_view(queries: np.ndarray, keys: np.ndarray, layer: int, head: int, index: int) -> QKView:
    """The query/key view of ``head`` in ``layer`` for query token ``index`` from (layers, heads, seq, dim) arrays."""
    q = np.asarray(queries[layer, head, index], dtype=np.float64)
    k = np.asarray(keys[layer, head], dtype=np.float64)
    prod = k * q[None, :]
    scores = prod.sum(-1) / np.sqrt(q.shape[0])
    w = np.exp(scores - scores.max())
    return QKView(query=q, keys=k, product=prod, scores=scores, weights=w / w.sum())

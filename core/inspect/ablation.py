"""Head ablation: switch attention heads off (zero, or replace by their mean over a corpus). Recomputing a
prediction with them off (fill-mask top-k, the NSP/SOP probability, a fine-tuned classifier's class) is
core.inspect.ablation_predict's.

transformers 5 removed ``head_mask``, so heads are controlled by our own hook: a forward pre-hook on each layer's
attention output projection (the family's ``head_output`` in core/models/loading.py) rewrites the slice of the
concatenated per-head context that belongs to a head before it is projected. Where a family shares one layer across
depth, that layer's hook is called once per depth, so it counts calls within one forward (the counter resets on the
embeddings' pre-hook, which every forward path calls once).

Thread safety: a loaded model is shared by every session of the server. The hooks are installed once per model and
do nothing unless a ``contextvars.ContextVar`` set by ``ablated(...)`` in the calling thread/context says so; other
threads' forwards are never affected. So an ablated forward must run on the calling thread, never through
core.runtime.serving's batcher (core.inspect.ablation_predict calls the batch functions directly).

Heads are 0-based ``(layer, head)`` tuples in code and 0-based "L3H7" in text (as bertviz, the Attention page and
TransformerLens number them).
"""

from __future__ import annotations

import hashlib
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.base.caches import register as register_cache
from core.base.messages import Message, Problem, carry, msg
from core.data.corpus import CORPUS_DIR, HELDOUT_FILE
from core.models.spec import max_tokens
from core.registry import ModelLoadError, attention_layers

MODES = ("zero", "mean")  # zero the head's output, or replace it with its mean over the corpus


class AblationError(Problem, ValueError):
    """Heads or a mode that cannot be used; the message names the problem and the valid choices."""


Heads = tuple[tuple[int, int], ...]

_TOKEN = re.compile(r"^(?:l(\d+)|\*)(?:h(\d+)|\*)$")


def _range_text(n_layers: int, n_heads: int) -> Message:
    """The valid range, quoted at the end of a head-spec error (a Message: the page writes it in its language)."""
    return msg("ablation.heads_range", layers=n_layers, heads=n_heads, last=f"L{n_layers - 1}H{n_heads - 1}")


def parse_heads(spec: str, n_layers: int, n_heads: int) -> Heads:
    """Parse "L3H7, L5*", "L3H7 L3H8", "*H2" (head 2 of every layer), any case, into sorted, deduplicated
    (layer, head) tuples. Numbers are 0-based, as on the rest of the Attention page, in bertviz and in
    TransformerLens ("L0H0" is the first head of the first layer). An empty spec gives (). Raises AblationError naming the bad token and the valid range.
    """
    if not isinstance(spec, str):
        raise AblationError(msg("ablation.heads_must_text_such", got_type=type(spec).__name__))
    out: set[tuple[int, int]] = set()
    for raw in re.split(r"[\s,;]+", spec.strip()):
        if not raw:
            continue
        tok = raw.lower()
        m = _TOKEN.match(tok)
        if m is None or tok == "**":
            raise AblationError(msg("ablation.not_a_head", raw=raw, heads_range=_range_text(n_layers, n_heads)))
        layer, head = m.group(1), m.group(2)
        if layer is not None and not 0 <= int(layer) < n_layers:
            raise AblationError(
                msg("ablation.no_such_layer", raw=raw, layer=int(layer), heads_range=_range_text(n_layers, n_heads))
            )
        if head is not None and not 0 <= int(head) < n_heads:
            raise AblationError(
                msg("ablation.no_such_head", raw=raw, head=int(head), heads_range=_range_text(n_layers, n_heads))
            )
        layers = [int(layer)] if layer is not None else range(n_layers)
        heads = [int(head)] if head is not None else range(n_heads)
        out.update((la, h) for la in layers for h in heads)
    return tuple(sorted(out))


def format_heads(heads: Sequence[tuple[int, int]], n_heads: int | None = None) -> str:
    """The compact inverse of parse_heads: "L3H7, L5*" (a whole layer as L<layer>* when ``n_heads`` is given or
    the layer holds every head 0..max seen). 0-based, like parse_heads."""
    by_layer: dict[int, set[int]] = {}
    for la, h in heads:
        by_layer.setdefault(int(la), set()).add(int(h))
    if n_heads is None:
        n_heads = 1 + max((h for hs in by_layer.values() for h in hs), default=-1)
    parts = []
    for la in sorted(by_layer):
        hs = by_layer[la]
        if n_heads and hs == set(range(n_heads)) and n_heads > 1:
            parts.append(f"L{la}*")
        else:
            parts += [f"L{la}H{h}" for h in sorted(hs)]
    return ", ".join(parts)


@dataclass(frozen=True)
class AblationConfig:
    """Which heads to switch off, 0-based (layer, head), and how: "zero" or "mean". Empty heads are allowed (the
    forward is then exactly the normal one)."""

    heads: Heads = ()
    mode: str = "zero"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise AblationError(msg("ablation.unknown_ablation_mode_use", mode=self.mode, choices=", ".join(MODES)))
        try:
            heads = tuple(sorted({(int(la), int(h)) for la, h in self.heads}))
        except (TypeError, ValueError):
            raise AblationError(msg("ablation.heads_must_layer_head")) from None
        if any(la < 0 or h < 0 for la, h in heads):
            raise AblationError(msg("ablation.negative_number"))
        object.__setattr__(self, "heads", heads)

    def check(self, n_layers: int, n_heads: int) -> None:
        """Raise AblationError when a head is outside the model (layers x heads)."""
        bad = [(la, h) for la, h in self.heads if la >= n_layers or h >= n_heads]
        if bad:
            raise AblationError(
                msg("ablation.outside_model", heads=format_heads(bad), heads_range=_range_text(n_layers, n_heads))
            )


# ---------------------------------------------------------------------------------------------- hooks
# transformers 5 has no head_mask any more, and neither captum nor transformers offers a per-thread head switch on a
# shared model, hence these hooks. One module-level pre-hook per attention output projection (and one on the
# embeddings, which resets a shared layer's per-forward depth counter); they read the calling context's _ACTIVE and do
# nothing when it is None or belongs to another model, so a forward outside ``ablated`` is exactly the normal one.
_ACTIVE: ContextVar[_State | None] = ContextVar("encoderlab_ablation", default=None)
_INSTALL_LOCK = threading.Lock()
_LAYOUT: weakref.WeakKeyDictionary[Any, _Layout] = weakref.WeakKeyDictionary()  # model -> where its heads are
MEANS_CACHE = 8  # head_means results kept per model (least recently used evicted); freed with the model
_MEANS: weakref.WeakKeyDictionary[Any, OrderedDict] = weakref.WeakKeyDictionary()
_MEANS_LOCK = threading.Lock()


def _forget_means() -> None:
    with _MEANS_LOCK:
        _MEANS.clear()


register_cache(__name__, _forget_means)  # not _LAYOUT: it records the hooks installed on each model
MEAN_TEXTS = 128  # held-out sentences head_means reads by default
MEAN_CHUNK = 16


@dataclass(frozen=True)
class _Layout:
    n_layers: int
    n_heads: int
    head_dim: int
    depths: dict  # output projection module -> tuple of the depths it serves (several for a shared layer)
    resets: frozenset  # ids of the modules whose pre-hook starts a new forward (the embeddings)


class _State:
    """One ``ablated`` block (or a gate / capture pass) on one model in one context: what each depth does."""

    def __init__(self, layout: _Layout, keep=None, fill=None, gate=None, capture=None):
        self.layout = layout
        self.keep = keep or {}  # depth -> (heads, 1) tensor, 0 for a head that is off
        self.fill = fill or {}  # depth -> (heads, head_dim) tensor added after keep (mean-ablation)
        self.gate = gate  # (batch, layers, heads) or (layers, heads) tensor multiplied in (gradient importance)
        self.capture = capture  # depth -> [sum (heads*head_dim,), count] of non-padding inputs (head_means)
        self.capture_mask = None  # (batch, seq) bool of real tokens for the capture pass
        self.calls: dict[int, int] = {}  # id(module) -> calls in this forward (a shared layer serves many depths)


def _pre_hook(mod, args):
    st = _ACTIVE.get()
    if st is None:
        return None
    depths = st.layout.depths.get(mod)
    if depths is None:  # another model's module
        return None
    if len(depths) == 1:
        depth = depths[0]
    else:
        k = st.calls.get(id(mod), 0)
        st.calls[id(mod)] = k + 1
        depth = depths[k % len(depths)]
    x = args[0]
    lay = st.layout
    if st.capture is not None:
        flat = x.detach().reshape(-1, x.shape[-1])
        if st.capture_mask is not None and st.capture_mask.numel() == flat.shape[0]:
            flat = flat[st.capture_mask.reshape(-1)]
        acc = st.capture[depth]
        acc[0] += flat.double().sum(0).cpu()
        acc[1] += int(flat.shape[0])
        return None
    keep, fill = st.keep.get(depth), st.fill.get(depth)
    if keep is None and st.gate is None:
        return None
    v = x.unflatten(-1, (lay.n_heads, lay.head_dim))  # (..., heads, head_dim)
    if keep is not None:
        v = v * keep
        if fill is not None:
            v = v + fill
    if st.gate is not None:
        g = st.gate[..., depth, :]  # (heads,) or (batch, heads)
        v = v * (g[:, None] if g.dim() == 1 else g.reshape(g.shape[0], *([1] * (v.dim() - 3)), lay.n_heads, 1))
    return (v.flatten(-2),)


def _reset_hook(mod, args):
    st = _ACTIVE.get()
    if st is not None and id(mod) in st.layout.resets:
        st.calls.clear()
    return None


def _embeddings(model):
    inner = next((m for m in model.modules() if hasattr(m, "base_model") and hasattr(m, "config")), model)
    return inner.base_model.embeddings


def layout(model) -> _Layout:
    """Where ``model``'s heads are (core.registry.attention_layers), installing the hooks on first use (once per
    model, under a lock). Raises AblationError for a model whose heads cannot be located."""
    with _INSTALL_LOCK:
        lay = _LAYOUT.get(model)
        if lay is not None:
            return lay
        try:
            layers = attention_layers(model)
        except ModelLoadError as e:
            raise AblationError(carry(e)) from None
        emb = _embeddings(model)
        inner = next((m for m in model.modules() if hasattr(m, "base_model") and hasattr(m, "config")), model)
        cfg = inner.base_model.config
        n_heads = int(getattr(cfg, "num_attention_heads", 0) or cfg.n_heads)
        hidden = layers[0][1].in_features
        depths: dict = {}
        for d, m in layers:
            depths.setdefault(m, []).append(d)
        for m in depths:  # a deep copy of a hooked model carries the hooks along: never install twice
            if _pre_hook not in m._forward_pre_hooks.values():
                m.register_forward_pre_hook(_pre_hook)
        if _reset_hook not in emb._forward_pre_hooks.values():
            emb.register_forward_pre_hook(_reset_hook)
        lay = _Layout(
            len(layers), n_heads, hidden // n_heads, {m: tuple(v) for m, v in depths.items()}, frozenset({id(emb)})
        )
        _LAYOUT[model] = lay
        return lay


@contextmanager
def _activate(state: _State) -> Iterator[_State]:
    token = _ACTIVE.set(state)
    try:
        yield state
    finally:
        _ACTIVE.reset(token)


def _param(model):
    return next(model.parameters())


# ---------------------------------------------------------------------------------------------- means
def default_texts(n: int = MEAN_TEXTS) -> tuple[str, ...]:
    """``n`` sentences spread evenly over the bundled held-out corpus (assets/corpus/heldout.txt), 5-40 words."""
    lines = [ln.strip() for ln in (CORPUS_DIR / HELDOUT_FILE).read_text(encoding="utf-8").splitlines()]
    good = [ln for ln in lines if 5 <= len(ln.split()) <= 40]
    step = max(1, len(good) // n)
    return tuple(good[::step][:n])


def head_means(lm, texts: Sequence[str] | None = None) -> np.ndarray:
    """(layers, heads, head_dim): each head's mean output (its slice of the context that enters the attention
    output projection) over every non-padding token of ``texts`` (default: default_texts(), the bundled held-out
    corpus). ``lm``: a LoadedModel or a core.predict.classify.FinetunedModel. Cached per (model, texts), at most
    MEANS_CACHE entries per model (least recently used evicted; dropped with the model)."""
    import torch  # lazy: torch loads in seconds; importing this module (the page) does not need it

    model, tok = lm.model, lm.tokenizer
    texts = tuple(default_texts() if texts is None else texts)
    if not texts or not any(t.strip() for t in texts):
        raise AblationError(msg("ablation.mean_ablation_needs_some"))
    key = hashlib.sha1("\n\x00".join(texts).encode()).hexdigest()
    with _MEANS_LOCK:
        hit = _MEANS.get(model, OrderedDict()).get(key)
        if hit is not None:
            _MEANS[model].move_to_end(key)
            return hit
    lay = layout(model)
    dev = _param(model).device
    limit = min(128, max_tokens(model, tok) if hasattr(tok, "model_max_length") else 128)
    st = _State(
        lay, capture={d: [torch.zeros(lay.n_heads * lay.head_dim, dtype=torch.float64), 0] for d in range(lay.n_layers)}
    )
    with torch.inference_mode(), _activate(st):
        for i in range(0, len(texts), MEAN_CHUNK):
            enc = tok(
                list(texts[i : i + MEAN_CHUNK]), truncation=True, max_length=limit, padding=True, return_tensors="pt"
            )
            enc = {k: v.to(dev) for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
            st.capture_mask = enc["attention_mask"].bool()
            st.calls.clear()
            base_model(model)(**enc)
    out = np.stack(
        [
            (s / max(c, 1)).numpy().reshape(lay.n_heads, lay.head_dim)
            for s, c in (st.capture[d] for d in range(lay.n_layers))
        ]
    ).astype(np.float32)
    out.setflags(write=False)
    with _MEANS_LOCK:
        cache = _MEANS.setdefault(model, OrderedDict())
        cache[key] = out
        while len(cache) > MEANS_CACHE:
            cache.popitem(last=False)
    return out


def base_model(model):
    """The transformers base model (the encoder without a task head) inside ``model`` or a wrapper of it."""
    inner = next((m for m in model.modules() if hasattr(m, "base_model") and hasattr(m, "config")), model)
    return inner.base_model


# ---------------------------------------------------------------------------------------------- the switch
def _state_for(model, lay: _Layout, cfg: AblationConfig, means: np.ndarray | None) -> _State:
    import torch  # lazy: as in head_means

    p = _param(model)
    keep, fill = {}, {}
    by_layer: dict[int, list[int]] = {}
    for la, h in cfg.heads:
        by_layer.setdefault(la, []).append(h)
    for la, hs in by_layer.items():
        k = torch.ones(lay.n_heads, 1, dtype=p.dtype, device=p.device)
        k[hs] = 0
        keep[la] = k
        if cfg.mode == "mean":
            f = torch.zeros(lay.n_heads, lay.head_dim, dtype=p.dtype, device=p.device)
            f[hs] = torch.as_tensor(np.asarray(means)[la, hs], dtype=p.dtype, device=p.device)
            fill[la] = f
    return _State(lay, keep=keep, fill=fill)


@contextmanager
def ablated(lm, cfg: AblationConfig, means: np.ndarray | None = None) -> Iterator[None]:
    """While inside, forwards of ``lm.model`` (a LoadedModel or a core.predict.classify.FinetunedModel) in this
    thread/context run with ``cfg.heads`` off: zeroed, or in mode "mean" replaced by ``means`` (layers, heads,
    head_dim), computed with head_means(lm) when None. Other threads' forwards are unaffected. Raises
    AblationError for heads outside the model or means of the wrong shape."""
    model = lm.model
    lay = layout(model)
    cfg.check(lay.n_layers, lay.n_heads)
    if cfg.mode == "mean" and cfg.heads:
        if means is None:
            means = head_means(lm)
        if tuple(np.shape(means)) != (lay.n_layers, lay.n_heads, lay.head_dim):
            raise AblationError(
                msg(
                    "ablation.head_means_wrong_shape",
                    shape=tuple(np.shape(means)),
                    expected=(lay.n_layers, lay.n_heads, lay.head_dim),
                )
            )
    with _activate(_state_for(model, lay, cfg, means)):
        yield


def gated(model, gate) -> AbstractContextManager[_State]:
    """Forwards of ``model`` in this context multiply each head's output by ``gate`` ((layers, heads) or
    (batch, layers, heads), usually ones with requires_grad: core.inspect.head_importance)."""
    return _activate(_State(layout(model), gate=gate))

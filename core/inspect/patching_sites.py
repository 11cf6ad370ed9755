"""Where activation patching (core.inspect.patching) reads and overwrites a model's activations, and the hooks that
do it, gated per call.

pyvene and nnsight do activation patching, but neither knows these encoders' layouts nor gates its interventions per
calling context: a model here is shared by every session of the server. So, as value zeroing does
(core.inspect.value_zeroing), ``hooked(sites)`` adds forward hooks for the length of one call, and each hook acts
only for a forward run under ``running(run)`` with a ``Run`` of that same call (a ``contextvars.ContextVar``): other
sessions' forwards of the same model never see them.

Sites, found through the registry and transformers' generic API, never by a family's name:

- ``resid``: index 0 the embeddings' output, index d+1 depth d's layer output (the residual stream after the
  layer); the layers are the parents of the family's attention output projection (core.registry.attention_layers,
  which also serves ALBERT's one layer shared across depth), else core.registry.encoder_layers (the generic family);
- ``heads``: the input of each depth's attention output projection, the concatenated per-head context (what head
  ablation rewrites, core.inspect.ablation); absent where the registry cannot locate it (the generic family);
- ``mlp``: the output of each layer's one Linear from the feed-forward width to the hidden width (the feed-forward's
  last projection, before dropout, the residual and any norm: BERT's ``output.dense``, DistilBERT's ``lin2``,
  ModernBERT's ``mlp.Wo``); absent where a layer has no single such Linear.

A shared layer is one module serving several depths: its hooks count their calls within one forward (each ``Run``
is one forward), as head ablation's and value zeroing's do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from core.base.messages import Problem, msg
from core.registry import ModelLoadError, attention_layers, encoder_layers, family_of_model
from core.registry.shape import shape

KINDS = ("resid", "heads", "mlp")


class PatchError(Problem, ValueError):
    """Inputs or a model that activation patching cannot use; the message says why and what to do."""


class Stopped(Exception):
    """Raised by a hook once the activation a run stops at is captured: the rest of the forward is skipped."""


@dataclass(frozen=True, eq=False)
class Sites:
    """The patchable modules of one model: ``modules[kind]`` lists one module per index (resid: the embeddings, then
    one layer per depth; heads and mlp: one per depth; a shared layer repeats), a kind the model lacks is absent."""

    n_layers: int
    n_heads: int
    head_dim: int
    modules: dict[str, tuple[Any, ...]]

    def served(self) -> dict[tuple[str, int], tuple[int, ...]]:
        """(kind, id(module)) -> the indices the module serves, in call order."""
        out: dict[tuple[str, int], list[int]] = {}
        for kind, mods in self.modules.items():
            for i, m in enumerate(mods):
                out.setdefault((kind, id(m)), []).append(i)
        return {k: tuple(v) for k, v in out.items()}


@dataclass(eq=False)
class Run:
    """One forward through the hooks of one call (``owner``): what to overwrite, per (kind, index), as (rows,
    positions, heads or None, values), or a function of the activation (``edits``: core.inspect.sae replaces a
    layer's output by its reconstruction, or steers one feature); whether to keep each activation (``capture``, in the
    autograd graph when the forward builds one); and the calls each shared module has had in this forward."""

    owner: object
    patches: dict[tuple[str, int], tuple[Any, Any, Any, Any]] = field(default_factory=dict)
    edits: dict[tuple[str, int], Callable[[Any], Any]] = field(default_factory=dict)
    capture: bool = False
    stop: tuple[str, int] | None = None  # raise Stopped once this (kind, index) is captured
    acts: dict[tuple[str, int], Any] = field(default_factory=dict)
    calls: dict[tuple[str, int], int] = field(default_factory=dict)


_RUN: ContextVar[Run | None] = ContextVar("encoderlab_patching", default=None)
_LOCK = threading.Lock()  # hooks are added and removed one call at a time


def _layers(model) -> tuple[list[Any], list[Any] | None]:
    """(layer module per depth, attention output projection per depth or None)."""
    base = model.base_model
    try:
        att = attention_layers(model)
    except ModelLoadError:
        att = None
    if att is not None:
        suffix = "." + family_of_model(model).head_output
        names = {id(m): n for n, m in base.named_modules()}
        layers = [base.get_submodule(names[id(m)][: -len(suffix)]) for _, m in att]
        return layers, [m for _, m in att]
    found = encoder_layers(base)
    if found is None:
        raise PatchError(msg("patching.no_layers", model_class=type(model).__name__))
    return list(found), None


def _ffn_out(layer, ffn: int, hidden: int) -> Any | None:
    import torch

    found = [
        m
        for m in layer.modules()
        if isinstance(m, torch.nn.Linear) and m.in_features == ffn and m.out_features == hidden
    ]
    return found[0] if len(found) == 1 else None


def sites(model) -> Sites:
    """The patchable modules of ``model`` (a transformers model of any task). Raises PatchError for a model whose
    layers cannot be located, or that has no embeddings module."""
    base = model.base_model
    sh = shape(base.config)
    layers, heads = _layers(model)
    embeddings = getattr(base, "embeddings", None)
    if embeddings is None:
        raise PatchError(msg("patching.no_layers", model_class=type(model).__name__))
    mlp = [_ffn_out(la, sh.ffn, sh.hidden) for la in layers]
    modules: dict[str, tuple[Any, ...]] = {"resid": (embeddings, *layers)}
    if heads is not None:
        modules["heads"] = tuple(heads)
    if None not in mlp:
        modules["mlp"] = tuple(mlp)
    return Sites(len(layers), sh.heads, sh.hidden // max(sh.heads, 1), modules)


def _apply(run: Run, kind: str, idx: int, x, n_heads: int, head_dim: int):
    """The activation to use instead of ``x`` (None: keep it), recorded when the run captures."""
    p = run.patches.get((kind, idx))
    edit = run.edits.get((kind, idx))
    if edit is not None:
        x = edit(x)
    if p is not None:
        rows, pos, heads, vals = p
        if kind == "heads":
            v = x.unflatten(-1, (n_heads, head_dim)).clone()
            v[rows, pos, heads] = vals.to(v.dtype)
            x = v.flatten(-2)
        else:
            x = x.clone()
            x[rows, pos] = vals.to(x.dtype)
    if run.capture:
        run.acts[(kind, idx)] = x
    if run.stop == (kind, idx):
        raise Stopped
    return x if p is not None or edit is not None else None


def _index(run: Run, served: dict, kind: str, mod) -> int:
    idx = served[(kind, id(mod))]
    k = run.calls.get((kind, id(mod)), 0)
    run.calls[(kind, id(mod))] = k + 1
    return idx[k % len(idx)]


@contextmanager
def hooked(st: Sites) -> Iterator[object]:
    """Hooks on ``st``'s modules for the length of the block; yields the owner a ``Run`` of this call names."""
    owner = object()
    served = st.served()

    def out_hook(kind):
        def hook(mod, _args, out):
            run = _RUN.get()
            if run is None or run.owner is not owner:
                return None
            first = out[0] if isinstance(out, tuple) else out
            new = _apply(run, kind, _index(run, served, kind, mod), first, st.n_heads, st.head_dim)
            if new is None:
                return None
            return (new, *out[1:]) if isinstance(out, tuple) else new

        return hook

    def head_hook(mod, args):
        run = _RUN.get()
        if run is None or run.owner is not owner:
            return None
        new = _apply(run, "heads", _index(run, served, "heads", mod), args[0], st.n_heads, st.head_dim)
        return None if new is None else (new, *args[1:])

    handles: list[Any] = []
    try:  # registered inside the try: a failure halfway leaves no hook behind
        with _LOCK:
            for kind, mods in st.modules.items():
                for m in {id(m): m for m in mods}.values():
                    if kind == "heads":
                        handles.append(m.register_forward_pre_hook(head_hook))
                    else:
                        handles.append(m.register_forward_hook(out_hook(kind)))
        yield owner
    finally:
        with _LOCK:
            for h in handles:
                h.remove()


@contextmanager
def running(run: Run) -> Iterator[Run]:
    """Forwards in this context go through ``run``; everyone else's are untouched."""
    token = _RUN.set(run)
    try:
        yield run
    finally:
        _RUN.reset(token)

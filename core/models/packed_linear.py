"""Linear layers on CPU with oneDNN-packed weights, for the interactive inference paths (fill-mask, pair scoring, a
classifier's prediction).

``linears(model)`` returns ``lin(module, x)``, which computes ``module(x)`` for an ``nn.Linear``. On a CPU in fp32
with no gradient it uses torch's oneDNN kernel on a copy of the weight laid out once for it ("packed", what
``torch.jit.freeze`` and torch.compile's freezing do for inference); otherwise it simply calls the module.
``packed_forward(model)`` does the same for a whole transformers forward (pair scoring, classify_now): within the
block, on this thread, a torch function mode sends ``F.linear`` to the packed kernel; the model is not changed. Packs
are kept per weight tensor, so both routes share them.

Why: transformers' ``nn.Linear`` goes to torch's default CPU matrix multiply. For the few rows of one typed sentence
(~12 tokens) that runs far below the machine's speed; the packed oneDNN kernel does the same fp32 products 1.8x
faster on this project's CPU (bench/fill_mask.py prints the effect on a whole fill-mask). Results agree with
``F.linear`` to float rounding (~1e-6); tests/core/test_masked_forward.py checks every family against the
transformers forward.

Costs and safety:
- a second copy of each weight it touches (bert-base: +0.43 GB), made on first use and dropped with the model;
- a pack is rebuilt when its weight changes (another tensor, or an in-place update bumping its version counter).
  Fused optimizers (``torch.optim.AdamW(fused=True)``, as core.train.finetune and core.train.pretrain use) update weights in
  place *without* bumping the counter (checked in tests/core/test_everyday_probe.py), so code that runs a model
  through here while it trains must do so under ``off()`` (core.predict.everyday_probe.during_training does); the app
  itself only packs models loaded from disk;
- ``ENCODERLAB_PACKED=0`` turns it off; where this torch build cannot pack (the probe below fails) it stays off.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import weakref
from collections.abc import Callable, Iterator

import torch

from core.base.caches import register as register_cache

_LOCK = threading.RLock()  # re-entrant: a weight collected while it is held calls _forget on this thread
# id(weight) -> (weakref to the weight, its version when packed, the packed weight); an entry goes with its weight
_PACKS: dict[int, tuple] = {}
register_cache(__name__, _PACKS.clear)
_AVAILABLE: bool | None = None
# packing switched off in this context (off()): a context variable, so that a batch the batcher runs on its compute
# thread in the caller's context (core.runtime.serving.batcher) honours it too
_OFF: contextvars.ContextVar[bool] = contextvars.ContextVar("encoderlab_packed_off", default=False)


def _probe() -> bool:
    """True when this torch build packs and runs oneDNN linears and gets F.linear's answer."""
    try:
        w, b, x = torch.randn(8, 4), torch.randn(8), torch.randn(3, 4)
        with torch.inference_mode():
            y = torch.ops.mkldnn._linear_pointwise(x, torch.ops.mkldnn._reorder_linear_weight(w), b, "none", [], "")
        return bool(torch.allclose(y, torch.nn.functional.linear(x, w, b), atol=1e-5))
    except Exception:  # no mkldnn in this build, or the private op changed: use the plain path
        return False


def available() -> bool:
    """Whether packed linears can run here (this torch build) and are not switched off (ENCODERLAB_PACKED=0)."""
    global _AVAILABLE
    if os.environ.get("ENCODERLAB_PACKED", "1") == "0" or _OFF.get():
        return False
    if _AVAILABLE is None:
        _AVAILABLE = _probe()
    return _AVAILABLE


@contextlib.contextmanager
def off() -> Iterator[None]:
    """Within this block (this context: this thread, and a batch the batcher runs for it on its compute thread),
    linears(model) calls the modules as they are: the baseline that bench/fill_mask.py compares against."""
    token = _OFF.set(True)
    try:
        yield
    finally:
        _OFF.reset(token)


def _forget(key: int) -> None:
    with _LOCK:
        _PACKS.pop(key, None)


def _forgetter(key: int) -> Callable[[weakref.ref], None]:
    """The weakref callback that drops the pack of the weight ``key`` once that weight is gone."""
    return lambda _: _forget(key)


def _packed_weight(w: torch.Tensor) -> torch.Tensor:
    """The packed copy of ``w``, made on first use and again when ``w`` changed (its version counter moved)."""
    key = id(w)
    entry = _PACKS.get(key)
    if entry is None or entry[0]() is not w or entry[1] != w._version:
        with _LOCK, torch.no_grad():
            entry = _PACKS.get(key)
            if entry is None or entry[0]() is not w or entry[1] != w._version:
                entry = (weakref.ref(w, _forgetter(key)), w._version, _reorder(w.detach()))
                _PACKS[key] = entry
    return entry[2]


def _reorder(w: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(w)


def _packed(mod: torch.nn.Module) -> torch.Tensor:
    return _packed_weight(mod.weight)


def _packed_linear(mod: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    for hook in tuple(mod._forward_pre_hooks.values()):  # as module(x) would: core.inspect.ablation's head hooks
        r = hook(mod, (x,))
        if r is not None:
            x = r[0] if isinstance(r, tuple) else r
    return torch.ops.mkldnn._linear_pointwise(x, _packed(mod), mod.bias, "none", [], "")


def _module_call(mod: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return mod(x)


def linears(
    model: torch.nn.Module, packed: bool | None = None
) -> Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]:
    """``lin(module, x) == module(x)`` for the model's ``nn.Linear`` modules, packed where that helps.

    ``packed=None`` packs on CPU fp32 without gradients when available(); False never packs; True requires it
    (RuntimeError when it cannot: wrong device, dtype, gradients on, or no oneDNN).
    """
    p = next(model.parameters())
    fits = (
        p.device.type == "cpu"
        and p.dtype == torch.float32
        and not torch.is_grad_enabled()
        and not getattr(model, "encoderlab_quant", "")
    )  # int8 linears (core.compare.int8) run their own kernels
    if packed is None:
        packed = fits and available()
    elif packed and not (fits and available()):
        raise RuntimeError("Packed linears need a CPU fp32 model, no gradients, and a torch build with oneDNN.")
    return _packed_linear if packed else _module_call


def packed_modules(model: torch.nn.Module) -> int:
    """How many of the model's linear modules hold a packed weight now (tests check the fast path really runs)."""

    def held(w: object) -> bool:
        entry = _PACKS.get(id(w)) if isinstance(w, torch.Tensor) else None
        return entry is not None and entry[0]() is w

    return sum(1 for m in model.modules() if isinstance(m, torch.nn.Linear) and held(m.weight))


class _PackedMode(torch.overrides.TorchFunctionMode):
    """Runs ``F.linear`` (what every ``nn.Linear`` calls) on packed weights, for CPU fp32 without gradients."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.linear and not torch.is_grad_enabled():
            x, w = args[0], args[1] if len(args) > 1 else kwargs["weight"]
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            if x.device.type == "cpu" and x.dtype == w.dtype == torch.float32 and w.dim() == 2 and x.dim() >= 2:
                return torch.ops.mkldnn._linear_pointwise(x, _packed_weight(w), b, "none", [], "")
        return func(*args, **kwargs)


@contextlib.contextmanager
def packed_forward(model: torch.nn.Module) -> Iterator[None]:
    """Within this block (this thread only: torch keeps function modes per thread), the model's own transformers
    forward runs its linear layers on packed weights wherever ``linears(model)`` would (CPU, fp32, no gradients,
    packing available and not switched off). For the plain predictions that run the whole forward (pair scoring, a
    classifier): the same kernels as fill-mask, with no change to the model (other threads, hooks, gradients and
    deep copies see the plain modules)."""
    if linears(model) is _module_call:
        yield
        return
    with _PackedMode():
        yield

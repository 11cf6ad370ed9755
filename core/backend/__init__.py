"""Where the work runs: this process (the default) or a Ray cluster, behind one interface.

Pages and app/ never ask which backend is in use. They call core as before (``fill_mask(lm, cfg)``,
``score_pairs``, ``classify``, ``compute_attention``, ``attribute``, ``runner().submit(...)``, ``room.store()``), and
core reaches the backend through three seams:

- ``batched(obj, op, fn, item)``: one request of a batchable prediction. ``fn(obj, items) -> results`` is a
  module-level function. In this process concurrent requests on one model coalesce into one forward
  (core.serving); on Ray they go to the model's Serve deployment, where ``@serve.batch`` coalesces them.
- ``@model_op``: a core function whose first argument is a loaded model (``LoadedModel``, ``FinetunedModel``) and
  whose result is a frozen result dataclass. On Ray it runs on a replica of the model's deployment; a
  ``progress`` argument is streamed back, and an exception it raises (Cancel) stops the replica's work.
- ``current().job_runner()`` and ``current().room_store()``: the job runner (core.jobs.runner) and the room store
  (core.room.store).

``ENCODERLAB_BACKEND`` (``inprocess`` or ``ray``) chooses once per process; ``ENCODERLAB_RAY_ADDRESS`` is the
cluster (empty starts a local Ray). A model object with no ``recipe`` (loaded with a dtype or a fresh head:
core.models.load) has no way to be rebuilt elsewhere, so its ops always run in this process.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import os
import threading
from abc import ABC, abstractmethod
from typing import Any, Callable, Sequence

BACKENDS = ("inprocess", "ray")


class BackendError(RuntimeError):
    """The backend cannot do what was asked (no cluster at the address, a replica that will not start)."""


class Backend(ABC):
    name: str

    @abstractmethod
    def batched(self, obj: Any, op: str, fn: Callable[[Any, Sequence[Any]], Sequence[Any]], item: Any) -> Any:
        """``fn(obj, [item])[0]``, batched with concurrent requests on the same model and ``op``."""

    @abstractmethod
    def call(self, obj: Any, fn: Callable[..., Any], args: tuple, kwargs: dict,
             progress: Callable[..., Any] | None = None) -> Any:
        """``fn(obj, *args, **kwargs)``; ``progress`` (when given) receives the function's progress calls."""

    def prepare(self, obj: Any) -> None:
        """Get ready to serve ``obj`` (a model just loaded): nothing to do in this process."""

    def runs_on(self, obj: Any) -> str:
        """Where ``obj``'s predictions run, for the page's source line: its device here."""
        return str(getattr(obj, "device", "?"))

    @abstractmethod
    def job_runner(self):
        """The process's core.jobs.JobRunner (created once)."""

    @abstractmethod
    def room_store(self):
        """The core.room.RoomStore every front-end of this deployment shares."""


def op_name(fn: Callable) -> str:
    """``module:qualname``, how a replica finds the same function."""
    return f"{fn.__module__}:{fn.__qualname__}"


def resolve_op(name: str) -> Callable:
    """The function ``op_name`` named, unwrapped from ``@model_op`` (a replica runs the body itself)."""
    mod, _, qual = name.partition(":")
    obj: Any = importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return getattr(obj, "__wrapped__", obj)


def load_recipe(recipe: tuple) -> Any:
    """Load a model from its recipe ``(loader "module:function", args, kwargs)`` (what a replica holds)."""
    loader, args, kwargs = recipe
    return resolve_op(loader)(*args, **kwargs)


def outcome_error(e: BaseException) -> BaseException:
    """``e`` when it pickles (it then crosses to the front-end as itself), else a RuntimeError with its text."""
    import pickle

    try:
        pickle.dumps(e)
        return e
    except Exception:
        return RuntimeError(f"{type(e).__name__}: {e}")


# ---------------------------------------------------------------------------------------------- the seams
def batched(obj: Any, op: str, fn: Callable[[Any, Sequence[Any]], Sequence[Any]], item: Any) -> Any:
    """One request of the batchable prediction ``op`` (its batches never mix with another op's)."""
    return current().batched(obj, op, fn, item)


def model_op(fn: Callable) -> Callable:
    """Run ``fn(model, ...)`` where the backend keeps its models. ``fn`` must be a module-level function whose
    arguments and result can be pickled; a ``progress`` parameter, if it has one, stays a live callback."""
    sig = inspect.signature(fn)
    has_progress = "progress" in sig.parameters

    @functools.wraps(fn)
    def op(obj, *args, **kwargs):
        progress = None
        if has_progress:
            bound = sig.bind(obj, *args, **kwargs)
            progress = bound.arguments.pop("progress", None)
            args, kwargs = tuple(bound.args[1:]), dict(bound.kwargs)
        return current().call(obj, fn, args, kwargs, progress)

    return op


# ---------------------------------------------------------------------------------------------- in this process
class InProcessBackend(Backend):
    """Everything here: models in this process's caches, jobs in its worker processes, rooms in its memory."""

    name = "inprocess"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runner = None
        self._store = None

    def batched(self, obj, op, fn, item):
        from core.serving import coalesce

        return coalesce(obj, op, item, lambda items: fn(obj, items))

    def call(self, obj, fn, args, kwargs, progress=None):
        if progress is not None:
            kwargs = {**kwargs, "progress": progress}
        return fn(obj, *args, **kwargs)

    def job_runner(self):
        with self._lock:
            if self._runner is None:
                from core.jobs import JobRunner

                self._runner = JobRunner()
            return self._runner

    def room_store(self):
        with self._lock:
            if self._store is None:
                from core.room import InProcessStore

                self._store = InProcessStore()
            return self._store


_BACKEND: Backend | None = None
_LOCK = threading.Lock()


def chosen() -> str:
    """The backend the environment asks for (``ENCODERLAB_BACKEND``). Raises ValueError for an unknown one."""
    raw = os.environ.get("ENCODERLAB_BACKEND", "").strip().lower() or "inprocess"
    if raw not in BACKENDS:
        raise ValueError(f"ENCODERLAB_BACKEND={raw!r} is not a backend; use one of {', '.join(BACKENDS)}.")
    return raw


def current() -> Backend:
    """This process's backend, chosen on first use. Inside a Ray replica or job worker it is always in-process."""
    global _BACKEND
    with _LOCK:
        if _BACKEND is None:
            if chosen() == "ray":
                try:
                    from core.backend.ray_backend import RayBackend
                except ImportError as e:
                    raise BackendError(f"ENCODERLAB_BACKEND=ray needs Ray ({e}): install it with "
                                       "`pip install -r requirements-ray.txt`, or unset ENCODERLAB_BACKEND.") from None
                _BACKEND = RayBackend.from_settings()
            else:
                _BACKEND = InProcessBackend()
        return _BACKEND


def use(backend: Backend | None) -> Backend | None:
    """Replace this process's backend (a Ray replica uses in-process; tests swap backends); returns the old one.
    ``None`` forgets it, so the next ``current()`` chooses again from the environment."""
    global _BACKEND
    with _LOCK:
        old, _BACKEND = _BACKEND, backend
        return old

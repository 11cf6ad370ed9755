"""The backend interface (``Backend``), the names of functions that cross to another process, and which backend
this process uses (``use``; core.runtime.backend.current chooses one on first use).

Apart from the package's ``__init__`` so that the Ray modules (core.runtime.backend.ray_*), which the chooser
imports, can import what they share with it without importing the chooser back.
"""

from __future__ import annotations

import importlib
import pickle
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

BACKENDS = ("inprocess", "ray")


class BackendError(RuntimeError):
    """The backend cannot do what was asked (no cluster at the address, a replica that will not start)."""


class Backend(ABC):
    name: str

    @abstractmethod
    def batched(self, obj: Any, op: str, fn: Callable[[Any, Sequence[Any]], Sequence[Any]], item: Any) -> Any:
        """``fn(obj, [item])[0]``, batched with concurrent requests on the same model and ``op``."""

    @abstractmethod
    def call(
        self, obj: Any, fn: Callable[..., Any], args: tuple, kwargs: dict, progress: Callable[..., Any] | None = None
    ) -> Any:
        """``fn(obj, *args, **kwargs)``; ``progress`` (when given) receives the function's progress calls."""

    def prepare(self, obj: Any) -> None:  # noqa: B027 (a hook: nothing to do unless a backend overrides it)
        """Get ready to serve ``obj`` (a model just loaded): nothing to do in this process."""

    def runs_on(self, obj: Any) -> str:
        """Where ``obj``'s predictions run, for the page's source line: its device here."""
        return str(getattr(obj, "device", "?"))

    @abstractmethod
    def job_runner(self):
        """The process's core.runtime.jobs.JobRunner (created once)."""

    @abstractmethod
    def room_store(self):
        """The core.runtime.room.RoomStore every front-end of this deployment shares."""


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
    try:
        pickle.dumps(e)
        return e
    except Exception:
        return RuntimeError(f"{type(e).__name__}: {e}")


_BACKEND: Backend | None = None
LOCK = threading.Lock()  # guards _BACKEND; core.runtime.backend.current holds it while it chooses


def installed() -> Backend | None:
    """The backend this process uses, or None before the first ``current()`` (call it with LOCK held)."""
    return _BACKEND


def install(backend: Backend | None) -> Backend | None:
    """Set this process's backend (call it with LOCK held); returns the old one."""
    global _BACKEND
    old, _BACKEND = _BACKEND, backend
    return old


def use(backend: Backend | None) -> Backend | None:
    """Replace this process's backend (a Ray replica uses in-process; tests swap backends); returns the old one.
    ``None`` forgets it, so the next ``current()`` chooses again from the environment."""
    with LOCK:
        return install(backend)

"""Where the work runs: this process (the default) or a Ray cluster, behind one interface.

Pages and app/ never ask which backend is in use. They call core as before (``fill_mask(lm, cfg)``,
``score_pairs``, ``classify``, ``compute_attention``, ``attribute``, ``runner().submit(...)``, ``room.store()``), and
core reaches the backend through three seams:

- ``batched(obj, op, fn, item)``: one request of a batchable prediction. ``fn(obj, items) -> results`` is a
  module-level function. In this process concurrent requests on one model coalesce into one forward
  (core.runtime.serving); on Ray they go to the model's Serve deployment, where ``@serve.batch`` coalesces them.
- ``@model_op``: a core function whose first argument is a loaded model (``LoadedModel``, ``FinetunedModel``) and
  whose result is a frozen result dataclass. On Ray it runs on a replica of the model's deployment; a
  ``progress`` argument is streamed back, and an exception it raises (Cancel) stops the replica's work.
- ``current().job_runner()`` and ``current().room_store()``: the job runner (``runner()``) and the room store
  (``store()``).

``ENCODERLAB_BACKEND`` (``inprocess`` or ``ray``) chooses once per process; ``ENCODERLAB_RAY_ADDRESS`` is the
cluster (empty starts a local Ray). A model object with no ``recipe`` (loaded with a dtype or a fresh head:
core.models.loading.load) has no way to be rebuilt elsewhere, so its ops always run in this process.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Sequence
from typing import Any

from core.runtime.backend import base
from core.runtime.backend.base import BACKENDS, Backend, BackendError, use  # noqa: F401  (the seam's API)
from core.runtime.backend.inprocess import InProcessBackend


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


def runner():
    """The process-wide job runner (every Streamlit session shares it): the backend's, whose worker processes are
    this machine's or, on Ray, actors placed where the resource a job asks for is free."""
    return current().job_runner()


def store():
    """This deployment's room store: the backend's. In-process, every Streamlit session of this server shares it;
    on Ray, every front-end of the deployment does."""
    return current().room_store()


def prepare_serving(lm) -> None:
    """Tell the backend a model was just loaded for the pages: on Ray its deployment starts now."""
    current().prepare(lm)


def runs_on(lm) -> str:
    """Where ``lm``'s predictions run: its device in this process, or the model tier that serves it."""
    return current().runs_on(lm)


def chosen() -> str:
    """The backend the environment asks for (``ENCODERLAB_BACKEND``). Raises ValueError for an unknown one."""
    raw = os.environ.get("ENCODERLAB_BACKEND", "").strip().lower() or "inprocess"
    if raw not in BACKENDS:
        raise ValueError(f"ENCODERLAB_BACKEND={raw!r} is not a backend; use one of {', '.join(BACKENDS)}.")
    return raw


def current() -> Backend:
    """This process's backend, chosen on first use. Inside a Ray replica or job worker it is always in-process."""
    with base.LOCK:
        backend = base.installed()
        if backend is None:
            if chosen() == "ray":
                try:
                    from core.runtime.backend.ray_backend import RayBackend  # optional: Ray is installed apart
                except ImportError as e:
                    raise BackendError(
                        f"ENCODERLAB_BACKEND=ray needs Ray ({e}): install it with "
                        "`pip install -r requirements-ray.txt`, or unset ENCODERLAB_BACKEND."
                    ) from None
                backend = RayBackend.from_settings()
            else:
                backend = InProcessBackend()
            base.install(backend)
        return backend

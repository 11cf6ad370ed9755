"""What a running job sees and how its run ends, the same wherever it runs (a thread, a worker process, a Ray actor).

- ``JobContext``: the job's handle: ``ctx.progress(fraction, message, **metrics)`` reports, ``ctx.cancelled`` /
  ``ctx.check_cancelled()`` (raises ``JobCancelled``) see Cancel. Where the report goes (the Job itself, a pipe, an
  actor's box) is the one thing that differs: a ``report(fraction, message, metrics)`` callable.
- ``run_job``: run a job and say how it ended, as one outcome tuple: ``("done", result)``, ``("cancelled",)`` or
  ``("error", message, traceback)``; core.runtime.jobs.Job.settle turns that tuple into the job's final status.
- ``describe_error``: the message a page shows for a failed job (out-of-memory says what to lower, and names this
  server's cap on a job's memory when one is set; a full disk says so, whichever library was writing).
"""

from __future__ import annotations

import pickle
import traceback
from collections.abc import Callable
from typing import Any

from core.base.messages import carry, msg
from core.models.devices import is_oom
from core.runtime.disk_full import is_disk_full, root_cause

OOM_ADVICE = (
    "Lower the batch size, the maximum sequence length, the number of rows or the model size, then start it again."
)


class JobCancelled(Exception):
    """Raised inside a job when the user pressed Cancel."""


class JobContext:
    """What a running job sees: report progress and metrics, and check for cancel.

    ``cancel``: an Event (threading or multiprocessing) set by Cancel. ``report(fraction, message, metrics)``
    receives each progress call, the fraction clamped to [0, 1] and the metrics as a list (empty or one dict);
    ``flush`` (optional) sends what ``report`` held back, before the job's outcome goes out."""

    def __init__(
        self,
        cancel: Any,
        report: Callable[[float, str, list[dict[str, Any]]], None],
        flush: Callable[[], None] | None = None,
    ):
        self._cancel, self._report, self._flush = cancel, report, flush

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def check_cancelled(self) -> None:
        if self.cancelled:
            raise JobCancelled()

    def progress(self, fraction: float, message: str = "", **metrics: Any) -> None:
        self._report(float(min(max(fraction, 0.0), 1.0)), message, [dict(metrics)] if metrics else [])
        self.check_cancelled()

    def flush(self) -> None:
        if self._flush is not None:
            self._flush()


def describe_error(e: BaseException, name: str) -> str:
    """The message a page shows for a failed job; out-of-memory says what to lower (and, where this server caps a
    job's memory, ``ENCODERLAB_JOB_MEMORY_MB``, by how much), a full disk that nothing half-written was kept."""
    if is_disk_full(e):  # core.runtime.disk_full: ENOSPC however the writing library put it
        cause = root_cause(e)
        text = msg("jobs.failed_with", type=type(cause).__name__, error=carry(cause))
        return msg("jobs.disk_full_not_saved", name=name, text=text)
    text = msg("jobs.failed_with", type=type(e).__name__, error=carry(e))
    if is_oom(e):  # the one out-of-memory test, fine-tune's and pretraining's too
        cap = memory_cap_mb()
        if cap is not None:  # a job's worker under ENCODERLAB_JOB_MEMORY_MB (core.runtime.job_worker.limit_memory)
            return msg("jobs.out_of_memory_cap", name=name, limit_mb=cap, text=text)
        return msg("jobs.out_of_memory", name=name, text=text)
    return text


def memory_cap_mb() -> int | None:
    """The cap on this process's memory in MB: its RLIMIT_DATA, which core.runtime.job_worker.limit_memory sets in a
    job's worker from ``ENCODERLAB_JOB_MEMORY_MB``; None when it has none."""
    try:
        import resource  # lazy: Unix-only standard module
    except ImportError:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    return None if soft == resource.RLIM_INFINITY else soft // 2**20


def failed(e: BaseException, name: str) -> tuple:
    """The outcome of a job that raised ``e`` (call it inside the ``except``: it keeps the traceback)."""
    return ("error", describe_error(e, name), traceback.format_exc())


def run_job(fn: Callable[[JobContext], Any] | bytes, ctx: JobContext, name: str) -> tuple:
    """Run the job ``fn`` (or its pickle, a worker's payload: unpickling is part of the run) and return its outcome:
    ``("done", result)``, ``("cancelled",)`` or ``("error", message, traceback)``. Every failure becomes an outcome,
    so it reaches the page as a message."""
    try:
        job = pickle.loads(fn) if isinstance(fn, bytes) else fn
        ctx.check_cancelled()
        return ("done", job(ctx))
    except JobCancelled:
        return ("cancelled",)
    except BaseException as e:  # noqa: BLE001 - every failure must reach the page as a message
        return failed(e, name)

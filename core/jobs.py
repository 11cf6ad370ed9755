"""One background job runner per process: long work (benchmarks, fine-tuning, pretraining) off the UI thread.

A job is a function ``fn(ctx)``. It reports with ``ctx.progress(fraction, message, **metrics)`` and stops early
when ``ctx.cancelled`` turns true (``ctx.check_cancelled()`` raises ``JobCancelled``). Each job needs a
resource ("cpu" or "gpu"); each resource runs at most ``limits[resource]`` jobs at once and queues the rest
in submission order, so one GPU fine-tune cannot starve every other session.
"""
from __future__ import annotations

import itertools
import os
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

QUEUED, RUNNING, DONE, ERROR, CANCELLED = "queued", "running", "done", "error", "cancelled"
FINISHED = (DONE, ERROR, CANCELLED)


class JobCancelled(Exception):
    """Raised inside a job when the user pressed Cancel."""


@dataclass
class Job:
    id: int
    name: str
    resource: str
    owner: str | None
    status: str = QUEUED
    progress: float = 0.0
    message: str = "queued"
    metrics: list[dict[str, Any]] = field(default_factory=list)
    result: Any = None
    error: str | None = None
    error_detail: str | None = None
    submitted: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def done(self) -> bool:
        return self.status in FINISHED

    @property
    def elapsed(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.time()) - self.started

    @property
    def eta(self) -> float | None:
        """Seconds left, from elapsed time and progress; None before there is progress."""
        if self.status != RUNNING or self.progress <= 0.0:
            return None
        return self.elapsed * (1.0 - self.progress) / self.progress

    def cancel(self) -> None:
        self._cancel.set()


class JobContext:
    """What a running job sees: report progress and metrics, and check for cancel."""

    def __init__(self, job: Job):
        self._job = job

    @property
    def cancelled(self) -> bool:
        return self._job._cancel.is_set()

    def check_cancelled(self) -> None:
        if self.cancelled:
            raise JobCancelled()

    def progress(self, fraction: float, message: str = "", **metrics: Any) -> None:
        self._job.progress = float(min(max(fraction, 0.0), 1.0))
        if message:
            self._job.message = message
        if metrics:
            self._job.metrics.append(dict(metrics))
        self.check_cancelled()


def default_limits() -> dict[str, int]:
    return {"cpu": int(os.environ.get("ENCODERLAB_CPU_JOBS", "2")),
            "gpu": int(os.environ.get("ENCODERLAB_GPU_JOBS", "1"))}


class JobRunner:
    """Runs jobs on daemon threads, at most ``limits[resource]`` at a time per resource."""

    def __init__(self, limits: dict[str, int] | None = None):
        self.limits = limits or default_limits()
        for k, v in self.limits.items():
            if v < 1:
                raise ValueError(f"Job limit for {k!r} must be at least 1, got {v}.")
        self._jobs: dict[int, Job] = {}
        self._queue: list[tuple[Job, Callable[[JobContext], Any]]] = []
        self._running: dict[str, int] = dict.fromkeys(self.limits, 0)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def submit(self, name: str, fn: Callable[[JobContext], Any], resource: str = "cpu",
               owner: str | None = None) -> Job:
        """Queue ``fn`` and return its Job at once. Raises ValueError for an unknown resource."""
        if resource not in self.limits:
            raise ValueError(f"Unknown resource {resource!r}: use one of {', '.join(self.limits)}.")
        job = Job(next(self._ids), name, resource, owner)
        with self._lock:
            self._jobs[job.id] = job
            self._queue.append((job, fn))
        self._pump()
        return job

    def get(self, job_id: int) -> Job | None:
        return self._jobs.get(job_id)

    def jobs(self, owner: str | None = None) -> list[Job]:
        return [j for j in self._jobs.values() if owner is None or j.owner == owner]

    def queue_position(self, job: Job) -> int:
        """1-based place among queued jobs of the same resource; 0 when it is not queued."""
        with self._lock:
            waiting = [j for j, _ in self._queue if j.resource == job.resource]
        return waiting.index(job) + 1 if job in waiting else 0

    def cancel(self, job_id: int) -> None:
        job = self._jobs.get(job_id)
        if job is None:
            return
        job.cancel()
        with self._lock:
            for i, (j, _) in enumerate(self._queue):
                if j is job:
                    del self._queue[i]
                    j.status, j.message, j.finished = CANCELLED, "cancelled before it started", time.time()
                    break

    def wait(self, job: Job, timeout: float = 60.0) -> Job:
        """Block until the job finishes (tests and the command line); raises TimeoutError."""
        end = time.time() + timeout
        while not job.done:
            if time.time() > end:
                raise TimeoutError(f"Job {job.name!r} still {job.status} after {timeout:.0f}s.")
            time.sleep(0.02)
        return job

    def _pump(self) -> None:
        with self._lock:
            for item in list(self._queue):
                job, fn = item
                if job.status != QUEUED or self._running[job.resource] >= self.limits[job.resource]:
                    continue
                self._queue.remove(item)
                self._running[job.resource] += 1
                job.status, job.started, job.message = RUNNING, time.time(), "starting"
                threading.Thread(target=self._run, args=(job, fn), daemon=True, name=f"job-{job.id}").start()

    def _run(self, job: Job, fn: Callable[[JobContext], Any]) -> None:
        ctx = JobContext(job)
        try:
            ctx.check_cancelled()
            job.result = fn(ctx)
            job.status, job.progress, job.message = DONE, 1.0, "done"
        except JobCancelled:
            job.status, job.message = CANCELLED, "cancelled"
        except Exception as e:  # the job failed: keep the message for the page, the app goes on
            job.status, job.error, job.message = ERROR, f"{type(e).__name__}: {e}", "failed"
            job.error_detail = traceback.format_exc()
        finally:
            job.finished = time.time()
            _free_gpu_memory(job.resource)
            with self._lock:
                self._running[job.resource] -= 1
            self._pump()


def _free_gpu_memory(resource: str) -> None:
    if resource != "gpu":
        return
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # pragma: no cover - best effort
        pass


_RUNNER: JobRunner | None = None
_RUNNER_LOCK = threading.Lock()


def runner() -> JobRunner:
    """The process-wide runner (every Streamlit session shares it)."""
    global _RUNNER
    with _RUNNER_LOCK:
        if _RUNNER is None:
            _RUNNER = JobRunner()
        return _RUNNER

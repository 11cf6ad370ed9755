"""One background job runner per process: long work (benchmarks, fine-tuning, pretraining) off the UI thread.

A job is a function ``fn(ctx)``. It reports with ``ctx.progress(fraction, message, **metrics)`` and stops early
when ``ctx.cancelled`` turns true (``ctx.check_cancelled()`` raises core.runtime.job_outcome.JobCancelled). Each
job needs a resource ("cpu" or "gpu", resolved from the device the job will really use: ``resource_for(device)``);
each resource runs at most ``limits[resource]`` jobs at once and queues the rest in submission order, so one GPU
fine-tune cannot starve every other session. Interactive jobs (``submit(..., interactive=True)``: seconds of
analysis a person waits for, such as an attribution) run in a lane of their own, at most ``limits["interactive"]``
at once (ENCODERLAB_INTERACTIVE_JOBS, default 4), so they never queue behind training: in bench/soak.py two
fine-tunes held both CPU slots for minutes and every session's attribution waited behind them.

Worker processes. A job whose function can be pickled (a module-level function, or a ``functools.partial`` of one
over picklable data: what core.train.finetune.job_fn, core.train.pretrain.lab.job and progress_job(core.compare.speed.measure_speed, ...) return) runs in a
fresh worker process (spawn: CUDA cannot be forked). Training then does not share the UI process's interpreter
lock with the pages that poll it, a crash or an out-of-memory kill ends only that job, and everything the job
held (GPU memory included) is given back when its process exits. Progress, metrics, the result and errors come
back over a pipe; Cancel is a shared event. Jobs that need objects of this process (a cached model: attribution
and pair batches) run on a thread, as before. ``ENCODERLAB_JOB_WORKERS=0`` runs every job on a thread.

Bounds (core.base.settings): finished jobs are evicted by count and age, with their results; a session may have at
most ``session_running`` jobs running and ``session_running + session_queued`` running or waiting (``QuotaError``
says what to do); a closed session's jobs are cancelled (``cancel_owner``) and leave the table (``forget_owner``);
core.runtime.run_folders.evict_run_folders keeps each session's run folders under a size and an age.

What a job sees (JobContext) and how its run ends (the outcome tuple) are core.runtime.job_outcome's, the worker
process's side is core.runtime.job_worker's: the same for thread, worker-process and Ray jobs.
"""

from __future__ import annotations

import functools
import gc
import itertools
import multiprocessing
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.base import settings
from core.base.messages import Problem, msg
from core.models.devices import resolve_device
from core.registry import ModelLoadError
from core.runtime.job_outcome import JobContext, failed, run_job
from core.runtime.job_worker import main_not_rerun_in_worker, worker_main, worker_threads
from core.runtime.run_folders import drop_checkpoints, evict_run_folders

QUEUED, RUNNING, DONE, ERROR, CANCELLED = "queued", "running", "done", "error", "cancelled"
FINISHED = (DONE, ERROR, CANCELLED)
CANCEL_GRACE_S = 60.0  # a cancelled worker may take this long to save its checkpoint before it is terminated
SWEEP_EVERY_S = 30.0  # a finished job trims the run folders at most this often (core.runtime.run_folders)


class QuotaError(Problem, ValueError):
    """A session asked for more jobs than the server allows it; the message says what to do."""


class NotYourJobError(Problem, LookupError):
    """A session named a job that is not one of its own (another session's, or one already gone); the message says
    so without telling which, so a guessed id learns nothing of other sessions."""


@dataclass
class Job:
    id: int
    name: str
    resource: str
    owner: str | None
    status: str = QUEUED
    progress: float = 0.0
    # a Message (progress.* of assets/i18n/errors.toml): the job's status or its last progress line, which the page
    # writes in its language; code asks ``status``, never this text
    message: str = field(default_factory=lambda: msg("progress.queued"))
    metrics: list[dict[str, Any]] = field(default_factory=list)
    result: Any = None
    error: str | None = None
    error_detail: str | None = None
    submitted: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    in_process: bool = False  # True when it runs (or will run) in a worker process
    interactive: bool = False  # a person waits for it: it runs in the interactive lane, not behind training
    placement: dict | None = None  # where its worker ran, on Ray: {"node", "ip", "pid"} (core.runtime.backend.ray_jobs)
    _cancel: Any = field(default_factory=threading.Event, repr=False)  # a threading or multiprocessing Event

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

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        self._cancel.set()

    def context(self) -> JobContext:
        """The context a thread job of this process runs with: its reports land on this Job."""
        return JobContext(self._cancel, self.report)

    def report(self, fraction: float, message: str, metrics: list[dict[str, Any]]) -> None:
        """Progress from wherever the job runs (its context here, a worker's pipe, a Ray actor's poll)."""
        self.progress = fraction
        if message:
            self.message = message
        self.metrics.extend(metrics)

    def settle(self, final: tuple) -> None:
        """Take a run's outcome (core.runtime.job_outcome.run_job: ("done", result), ("cancelled",) or
        ("error", message, detail)) as this job's final status; every runner ends its jobs through here."""
        if final[0] == DONE:
            self.result = final[1]
            self.status, self.progress, self.message = DONE, 1.0, msg("progress.done")
        elif final[0] == CANCELLED:
            self.status, self.message = CANCELLED, msg("progress.cancelled")
        else:
            self.status, self.error, self.message, self.error_detail = ERROR, final[1], msg("progress.failed"), final[2]


INTERACTIVE = "interactive"  # the lane of interactive jobs (a key of JobRunner.limits, beside the resources)


def default_limits() -> dict[str, int]:
    return {
        "cpu": int(os.environ.get("ENCODERLAB_CPU_JOBS", "2")),
        "gpu": int(os.environ.get("ENCODERLAB_GPU_JOBS", "1")),
        INTERACTIVE: int(os.environ.get("ENCODERLAB_INTERACTIVE_JOBS", "4")),
    }


def resource_for(device: str, gpus_available: float | None = None) -> str:
    """The resource a job on ``device`` ("auto", "cpu", "cuda") needs: 'gpu' when it will run on a GPU, else 'cpu'.

    ``gpus_available`` None judges this machine (core.models.devices.resolve_device); a number judges a cluster
    with that many GPUs (core.runtime.backend.ray_jobs: "auto" asks for a GPU when any node has one, and the job
    then resolves "auto" to the GPU it is given). Raises ModelLoadError (a ValueError) for "cuda" where there is
    none."""
    if gpus_available is None:
        return "gpu" if resolve_device(device).kind == "cuda" else "cpu"
    if device == "cuda" and not gpus_available:
        raise ModelLoadError(msg("jobs.no_gpu_node"))
    return "gpu" if device in ("cuda", "auto") and gpus_available else "cpu"


def progress_job(fn: Callable[..., Any], *args: Any) -> Callable[[Any], Any]:
    """A job running ``fn(*args, ctx.progress)`` (e.g. core.compare.speed.measure_speed(cfg, on_progress)); picklable
    when ``fn`` and ``args`` are, so it runs in a worker process."""
    return functools.partial(_call_with_progress, fn, args)


def _call_with_progress(fn: Callable[..., Any], args: tuple, ctx) -> Any:
    return fn(*args, ctx.progress)


def exit_message(code: int | None) -> str:
    if code is not None and code < 0:
        sig = -code
        try:
            signame = signal.Signals(sig).name
        except ValueError:
            signame = f"signal {sig}"
        if sig == getattr(signal, "SIGKILL", 9):
            return msg("jobs.worker_killed", signame=signame)
        return msg("jobs.worker_signal", signame=signame)
    return msg("jobs.worker_exited", code=code)


# ---------------------------------------------------------------------------------------------- runner
class JobRunner:
    """Runs jobs in worker processes (picklable ones) or on daemon threads, at most ``limits[resource]`` at a time
    per resource; finished jobs are evicted by count and age (core.base.settings)."""

    def __init__(self, limits: dict[str, int] | None = None, workers: bool | None = None):
        self.limits = dict(limits or default_limits())
        self.limits.setdefault(INTERACTIVE, default_limits()[INTERACTIVE])
        for k, v in self.limits.items():
            if v < 1:
                raise ValueError(msg("jobs.job_limit_must_least", resource=k, limit=v))
        self.workers = settings.current().job_workers if workers is None else workers
        self._jobs: dict[int, Job] = {}
        self._queue: list[tuple[Job, Any]] = []  # (job, fn or pickled fn)
        self._running: dict[str, int] = dict.fromkeys(self.limits, 0)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._mp = None
        self._sweep_lock = threading.Lock()
        self._swept = float("-inf")  # monotonic time of the last run-folder sweep
        self._forgotten: set[str] = set()  # closed sessions whose jobs leave the table as they finish

    # ------------------------------------------------------------------------------------------- public
    def submit(
        self,
        name: str,
        fn: Callable[[JobContext], Any],
        resource: str | None = "cpu",
        owner: str | None = None,
        device: str | None = None,
        interactive: bool = False,
    ) -> Job:
        """Queue ``fn`` and return its Job at once.

        ``device`` ("auto", "cpu", "cuda"), when given, decides the resource from the device the job will use.
        ``interactive``: a short job a person waits for; it runs in the interactive lane (the module docstring).
        Raises ValueError for an unknown resource, QuotaError when ``owner`` has as many jobs as it may.
        """
        if device is not None:
            resource = resource_for(device, self.gpus_available())
        if resource not in self.limits or resource == INTERACTIVE:
            raise ValueError(msg("jobs.unknown_resource_use_one", resource=resource, choices=", ".join(self.limits)))
        s = settings.current()
        payload = self._payload(fn)
        with self._lock:
            if owner is not None:
                mine = [j for j in self._jobs.values() if j.owner == owner and not j.done]
                cap = s.session_running + s.session_queued
                if len(mine) >= cap:
                    running = sum(j.status == RUNNING for j in mine)
                    raise QuotaError(
                        msg(
                            "jobs.you_already_have_job",
                            running=running,
                            queued=len(mine) - running,
                            session_running=s.session_running,
                            session_queued=s.session_queued,
                        )
                    )
            job = Job(next(self._ids), name, resource, owner, in_process=payload is not None, interactive=interactive)
            if payload is not None:
                job._cancel = self._context().Event()
            self._jobs[job.id] = job
            self._queue.append((job, payload if payload is not None else fn))
        self._pump()
        self.evict()
        return job

    def get(self, job_id: int, owner: str | None = None) -> Job | None:
        """The job ``job_id``, or None once it is gone; with ``owner``, None too when it is another owner's (job ids
        count up, so a session could guess another's: the app always asks with its own session id)."""
        job = self._jobs.get(job_id)
        return None if job is None or (owner is not None and job.owner != owner) else job

    def jobs(self, owner: str | None = None) -> list[Job]:
        return [j for j in list(self._jobs.values()) if owner is None or j.owner == owner]

    def queue_position(self, job: Job) -> int:
        """1-based place among queued jobs of the same lane (its resource, or the interactive lane); 0 when it is
        not queued."""
        with self._lock:
            waiting = [j for j, _ in self._queue if lane(j) == lane(job)]
        return waiting.index(job) + 1 if job in waiting else 0

    def cancel(self, job_id: int, owner: str | None = None) -> None:
        """Cancel ``job_id`` (a queued one leaves the queue; a running one is asked to stop). With ``owner``, raises
        NotYourJobError unless it is that owner's job (a gone job and another's read alike); without, an unknown id
        is ignored (cancel_owner, the command line)."""
        job = self._jobs.get(job_id)
        if owner is not None and (job is None or job.owner != owner):
            raise NotYourJobError(msg("jobs.not_this_sessions_job", job_id=job_id))
        if job is None:
            return
        job.cancel()
        with self._lock:
            for i, (j, _) in enumerate(self._queue):
                if j is job:
                    del self._queue[i]
                    j.status, j.message, j.finished = CANCELLED, msg("progress.cancelled_before_start"), time.time()
                    break
        self._pump()  # a session's own running limit may have held another of its jobs

    def cancel_owner(self, owner: str, running: bool = False) -> int:
        """Cancel ``owner``'s queued jobs (and its running ones with ``running``); returns how many."""
        hit = [j for j in self.jobs(owner) if j.status == QUEUED or (running and j.status == RUNNING)]
        for j in hit:
            self.cancel(j.id)
        return len(hit)

    def forget_owner(self, owner: str) -> int:
        """A closed session's finished jobs leave the table now, with their results, and its running ones as they
        finish: no page can show them again (a session's id lives in its browser tab), and on a workshop day the
        table otherwise grew with every tab that came and went until the count bound (bench/soak.py). Returns how
        many left now. Once none of its jobs runs, its runs' resumable checkpoints go too (run_folders.drop_checkpoints:
        nothing can resume them without the tab); its run folders stay, bounded by core.runtime.run_folders, so a
        model it trained still loads from its folder."""
        with self._lock:
            self._forgotten.add(owner)
        return self.evict()

    def wait(self, job: Job, timeout: float = 60.0) -> Job:
        """Block until the job finishes (tests and the command line); raises TimeoutError."""
        end = time.time() + timeout
        while not job.done:
            if time.time() > end:
                raise TimeoutError(msg("jobs.job_still_after_s", name=job.name, status=job.status, timeout=timeout))
            time.sleep(0.02)
        return job

    def evict(self) -> int:
        """Drop finished jobs beyond the newest ``jobs_keep`` and those finished over ``jobs_ttl_s`` ago, with
        their results; returns how many went."""
        s = settings.current()
        now = time.time()
        with self._lock:
            # a job counts once _finish has stamped it (its status may turn done a moment earlier)
            done = sorted(
                (j for j in self._jobs.values() if j.done and j.finished is not None),
                key=lambda j: j.finished or 0.0,
                reverse=True,
            )  # finished is set (filtered above)
            gone = done[s.jobs_keep :] + [
                j for j in done[: s.jobs_keep] if now - (j.finished or now) > s.jobs_ttl_s or j.owner in self._forgotten
            ]
            for j in gone:
                self._jobs.pop(j.id, None)
            left = {j.owner for j in self._jobs.values() if j.owner is not None}
            idle = self._forgotten - left  # closed sessions whose last job has left the table
            self._forgotten &= left
        for owner in idle:
            try:
                drop_checkpoints(owner)
            except OSError:  # a folder removed meanwhile: nothing left to free
                pass
        return len(gone)

    # ------------------------------------------------------------------------------------------- internals
    def gpus_available(self) -> float | None:
        """GPUs a job's ``device`` is judged against (resource_for): None, this machine's own."""
        return None

    def _context(self):
        if self._mp is None:
            self._mp = multiprocessing.get_context("spawn")  # CUDA cannot be used in a forked child
        return self._mp

    def _payload(self, fn) -> bytes | None:
        """The pickled job for a worker process, or None when it must run on a thread here."""
        if not self.workers:
            return None
        try:
            return pickle.dumps(fn)
        except (pickle.PicklingError, AttributeError, TypeError):  # a closure or a lambda over live objects
            return None

    def _pump(self) -> None:
        s = settings.current()
        with self._lock:
            for item in list(self._queue):
                job, fn = item
                if job.status != QUEUED or self._running[lane(job)] >= self.limits[lane(job)]:
                    continue
                if (
                    job.owner is not None
                    and sum(
                        j.owner == job.owner and j.status == RUNNING and j.interactive == job.interactive
                        for j in self._jobs.values()
                    )
                    >= s.session_running
                ):
                    continue  # this session runs as many of this kind as it may; the job keeps its place
                self._queue.remove(item)
                self._running[lane(job)] += 1
                job.status, job.started, job.message = RUNNING, time.time(), msg("progress.starting")
                target = self._run_process if job.in_process else self._run
                threading.Thread(target=target, args=(job, fn), daemon=True, name=f"job-{job.id}").start()

    def _run(self, job: Job, fn: Callable[[JobContext], Any]) -> None:
        try:
            job.settle(run_job(fn, job.context(), job.name))
        finally:
            del fn  # the job's objects (a model copy, its optimizer) go before the cache is emptied
            self._finish(job)

    def _run_process(self, job: Job, payload: bytes) -> None:
        mp = self._context()
        parent, child = mp.Pipe(duplex=False)
        proc = mp.Process(
            target=worker_main,
            daemon=True,
            name=f"encoderlab-job-{job.id}",
            args=(payload, child, job._cancel, worker_threads(job.resource, self.limits), job.name),
        )
        final: tuple[Any, ...] | None = None
        try:
            with main_not_rerun_in_worker():
                proc.start()
            child.close()
            cancelled_at = None
            while True:
                if job._cancel.is_set() and cancelled_at is None:
                    cancelled_at = time.time()
                if cancelled_at is not None and time.time() - cancelled_at > CANCEL_GRACE_S:
                    proc.terminate()
                    final = ("cancelled",)
                    break
                try:
                    if not parent.poll(0.25):
                        if not proc.is_alive() and not parent.poll(0):
                            break
                        continue
                    msg = parent.recv()
                except (EOFError, OSError):
                    break
                if msg[0] == "progress":
                    job.report(*msg[1:])
                else:
                    final = msg
                    break
            proc.join(30)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
            if final is None:
                final = (
                    ("cancelled",)
                    if job._cancel.is_set() and proc.exitcode in (0, None)
                    else ("error", exit_message(proc.exitcode), None)
                )
            job.settle(final)
        except Exception as e:  # the worker could not even start (e.g. out of processes)
            job.settle(failed(e, job.name))
        finally:
            parent.close()
            self._finish(job, gpu_in_this_process=False)

    def _finish(self, job: Job, gpu_in_this_process: bool = True) -> None:
        job.finished = time.time()
        if gpu_in_this_process:
            _free_gpu_memory(job.resource)
        with self._lock:
            self._running[lane(job)] -= 1
        self._pump()
        self.evict()
        self._sweep_run_folders()

    def _sweep_run_folders(self) -> None:
        """Trim the run folders, at most once every SWEEP_EVERY_S and one sweep at a time: a sweep walks every
        session's runs, and a burst of short jobs each walking them held their finished threads (and results) in
        a queue behind one another."""
        if not self._sweep_lock.acquire(blocking=False):
            return  # another job's thread is sweeping now
        try:
            if time.monotonic() - self._swept < SWEEP_EVERY_S:
                return
            self._swept = time.monotonic()
            evict_run_folders(settings.runs_base(), busy=self._busy_since)
        except OSError:  # another process removed a folder first: the bound still holds
            pass
        finally:
            self._sweep_lock.release()

    def _busy_since(self, owner: str) -> float | None:
        """Start time of ``owner``'s oldest running job (its run folders written since are in use)."""
        starts = [j.started for j in self.jobs(owner) if j.status == RUNNING and j.started]
        return min(starts) if starts else None


def lane(job: Job) -> str:
    """The queue a job waits in and the limit it counts against: its resource, or the interactive lane."""
    return INTERACTIVE if job.interactive else job.resource


def _free_gpu_memory(resource: str) -> None:
    """Give a thread job's GPU memory back: collect the references it left first, or empty_cache frees nothing."""
    if resource != "gpu":
        return
    gc.collect()
    try:
        import torch  # lazy: only a GPU job's end needs it

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # pragma: no cover - best effort
        pass

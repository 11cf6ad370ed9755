"""One background job runner per process: long work (benchmarks, fine-tuning, pretraining) off the UI thread.

A job is a function ``fn(ctx)``. It reports with ``ctx.progress(fraction, message, **metrics)`` and stops early
when ``ctx.cancelled`` turns true (``ctx.check_cancelled()`` raises ``JobCancelled``). Each job needs a
resource ("cpu" or "gpu", resolved from the device the job will really use: ``resource_for(device)``); each
resource runs at most ``limits[resource]`` jobs at once and queues the rest in submission order, so one GPU
fine-tune cannot starve every other session.

Worker processes. A job whose function can be pickled (a module-level function, or a ``functools.partial`` of one
over picklable data: what core.train.finetune.job_fn, core.train.pretrain.lab.job and core.compare.speed.speed_job return) runs in a
fresh worker process (spawn: CUDA cannot be forked). Training then does not share the UI process's interpreter
lock with the pages that poll it, a crash or an out-of-memory kill ends only that job, and everything the job
held (GPU memory included) is given back when its process exits. Progress, metrics, the result and errors come
back over a pipe; Cancel is a shared event. Jobs that need objects of this process (a cached model: attribution
and pair batches) run on a thread, as before. ``ENCODERLAB_JOB_WORKERS=0`` runs every job on a thread.

Bounds (core.base.settings): finished jobs are evicted by count and age, with their results; a session may have at
most ``session_running`` jobs running and ``session_running + session_queued`` running or waiting (``QuotaError``
says what to do); ``cancel_owner`` drops a closed session's queued jobs; ``evict_run_folders`` keeps each
session's run folders under a size and an age.
"""
from __future__ import annotations

import gc
import itertools
import os
import pickle
import shutil
import sys
import threading
import types
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from core.base import settings

QUEUED, RUNNING, DONE, ERROR, CANCELLED = "queued", "running", "done", "error", "cancelled"
FINISHED = (DONE, ERROR, CANCELLED)
CANCEL_GRACE_S = 60.0  # a cancelled worker may take this long to save its checkpoint before it is terminated
SWEEP_EVERY_S = 30.0  # a finished job trims the run folders at most this often (core.runtime.jobs.evict_run_folders)
OOM_ADVICE = ("Lower the batch size, the maximum sequence length, the number of rows or the model size, "
              "then start it again.")


class JobCancelled(Exception):
    """Raised inside a job when the user pressed Cancel."""


class QuotaError(ValueError):
    """A session asked for more jobs than the server allows it; the message says what to do."""


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
    in_process: bool = False  # True when it runs (or will run) in a worker process
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


def resource_for(device: str) -> str:
    """'gpu' when ``device`` ("auto", "cpu", "cuda") resolves to CUDA here, else 'cpu'. Raises ModelLoadError
    (a ValueError) for "cuda" on a machine without one."""
    from core.models.devices import resolve_device

    return "gpu" if resolve_device(device).kind == "cuda" else "cpu"


def progress_job(fn: Callable[..., Any], *args: Any) -> Callable[[Any], Any]:
    """A job running ``fn(*args, ctx.progress)`` (e.g. core.compare.speed.measure_speed(cfg, on_progress)); picklable
    when ``fn`` and ``args`` are, so it runs in a worker process."""
    import functools

    return functools.partial(_call_with_progress, fn, args)


def _call_with_progress(fn: Callable[..., Any], args: tuple, ctx) -> Any:
    return fn(*args, ctx.progress)


def describe_error(e: BaseException, name: str) -> str:
    """The message a page shows for a failed job; out-of-memory says what to lower."""
    from core.train.common import is_oom  # the one out-of-memory test, fine-tune's and pretraining's too

    text = f"{type(e).__name__}: {e}"
    if is_oom(e):
        return f"{name!r} ran out of memory ({text}). {OOM_ADVICE}"
    return text


def _worker_threads(resource: str, limits: dict[str, int]) -> int:
    """torch threads for one worker: the CPU cores shared by the jobs that may run at once plus the serving
    process, so that training never takes every core from the people predicting."""
    raw = os.environ.get("ENCODERLAB_JOB_THREADS", "").strip()
    if raw:
        return max(1, int(raw))
    cores = os.cpu_count() or 1
    if resource == "gpu":
        return max(1, min(2, cores // 4))
    return max(1, cores // (limits.get("cpu", 1) + 1))


# ---------------------------------------------------------------------------------------------- worker process
SEND_EVERY_S = 0.2  # a worker sends its progress at most this often, the metrics of the steps between in one go


class _WorkerContext:
    """JobContext's interface inside a worker process: progress goes over the pipe, cancel is a shared event.

    Progress is sent in batches: a small model reports hundreds of steps a second, and a pipe message per step
    fills the pipe whenever the UI process is slow to read it (busy drawing a page), which then blocks the
    training on ``send``: watching a job would slow it."""

    def __init__(self, conn, cancel):
        self._conn, self._cancel = conn, cancel
        self._metrics: list[dict[str, Any]] = []
        self._state: tuple[float, str] | None = None
        self._sent = 0.0

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def check_cancelled(self) -> None:
        if self.cancelled:
            raise JobCancelled()

    def progress(self, fraction: float, message: str = "", **metrics: Any) -> None:
        self._state = (float(min(max(fraction, 0.0), 1.0)), message)
        if metrics:
            self._metrics.append(dict(metrics))
        if time.monotonic() - self._sent >= SEND_EVERY_S:
            self.flush()
        self.check_cancelled()

    def flush(self) -> None:
        if self._state is None and not self._metrics:
            return
        fraction, message = self._state or (0.0, "")
        self._conn.send(("progress", fraction, message, self._metrics))
        self._metrics, self._state, self._sent = [], None, time.monotonic()


_START_LOCK = threading.Lock()  # one worker start at a time swaps ``__main__`` (below)


@contextmanager
def _main_not_rerun_in_worker():
    """Start a worker without re-running a Streamlit page script in it.

    Spawn prepares the child from the parent's ``sys.modules["__main__"]``: a main with a ``__file__`` and no
    ``__spec__`` is run again there (multiprocessing.spawn.get_preparation_data -> _fixup_main_from_path). Under
    ``streamlit run`` that main is the fake module Streamlit's ScriptRunner installs for each script run (no spec,
    no loader, ``__file__`` = the page script), so every worker ran the whole app in bare mode: hundreds of "missing
    ScriptRunContext" warnings per probes or corpus-index job, and seconds of imports before the job began. The
    jobs themselves live in core/ and never need the script. While the process starts (milliseconds, under a lock)
    ``__main__`` is a bare stand-in that multiprocessing leaves alone; a real ``python script.py`` main (it has a
    loader) is kept, so a job defined in such a script still unpickles in its worker."""
    main = sys.modules.get("__main__")
    fake = (main is not None and getattr(main, "__spec__", None) is None
            and getattr(main, "__loader__", None) is None and getattr(main, "__file__", None) is not None)
    if not fake:
        yield
        return
    with _START_LOCK:
        stand_in = sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if sys.modules.get("__main__") is stand_in:  # else a new script run installed its own meanwhile: keep it
                sys.modules["__main__"] = main


def _worker_main(payload: bytes, conn, cancel, threads: int, name: str) -> None:
    """Entry point of a worker process: run the job, send back ('done', result) / ('cancelled',) / ('error', ...)."""
    import torch

    torch.set_num_threads(threads)
    _lower_priority()
    ctx = _WorkerContext(conn, cancel)
    try:
        fn = pickle.loads(payload)
        ctx.check_cancelled()
        result = fn(ctx)
        ctx.flush()
        conn.send(("done", result))
    except JobCancelled:
        ctx.flush()
        conn.send(("cancelled",))
    except BaseException as e:  # noqa: BLE001 - every failure must reach the page as a message
        try:
            ctx.flush()
            conn.send(("error", describe_error(e, name), traceback.format_exc()))
        except Exception:  # the exception itself could not be sent: send its text
            conn.send(("error", f"{type(e).__name__}: {e}", None))
    finally:
        conn.close()


JOB_NICE = 19  # niceness added to a worker: predictions (the serving process) win the CPU over training.
# bench/concurrency.py, 8 sessions + a fine-tune, bert-mini, 2 cores: p95 4.22x lone at nice 0, 4.86x at 10, 3.16x at 19
# (the fine-tune then ran at 0.63x while they predicted; alone it has the CPU as before).


def _lower_priority() -> None:
    """Background jobs yield the CPU to people waiting for a prediction: the worker process runs ``nice``
    (``ENCODERLAB_JOB_NICE``, default 19; 0 keeps the serving process's priority). A job on a GPU is hardly slowed,
    its CPU side only feeds the device; a CPU job uses what the serving process leaves idle."""
    raw = os.environ.get("ENCODERLAB_JOB_NICE", "").strip()
    step = int(raw) if raw.lstrip("-").isdigit() else JOB_NICE
    if step > 0 and hasattr(os, "nice"):
        try:
            os.nice(step)
        except OSError:  # not permitted here: run at the normal priority
            pass


def _exit_message(code: int | None) -> str:
    if code is not None and code < 0:
        import signal

        sig = -code
        try:
            signame = signal.Signals(sig).name
        except ValueError:
            signame = f"signal {sig}"
        if sig == getattr(signal, "SIGKILL", 9):
            return (f"The job's worker process was killed ({signame}), most often because the machine ran out of "
                    f"memory. {OOM_ADVICE}")
        return f"The job's worker process ended on {signame}. Start it again; if it recurs, {OOM_ADVICE[0].lower()}" \
               f"{OOM_ADVICE[1:]}"
    return (f"The job's worker process exited (code {code}) without a result. Start it again; if it recurs, "
            f"{OOM_ADVICE[0].lower()}{OOM_ADVICE[1:]}")


# ---------------------------------------------------------------------------------------------- runner
class JobRunner:
    """Runs jobs in worker processes (picklable ones) or on daemon threads, at most ``limits[resource]`` at a time
    per resource; finished jobs are evicted by count and age (core.base.settings)."""

    def __init__(self, limits: dict[str, int] | None = None, workers: bool | None = None):
        self.limits = limits or default_limits()
        for k, v in self.limits.items():
            if v < 1:
                raise ValueError(f"Job limit for {k!r} must be at least 1, got {v}.")
        self.workers = settings.current().job_workers if workers is None else workers
        self._jobs: dict[int, Job] = {}
        self._queue: list[tuple[Job, Any]] = []  # (job, fn or pickled fn)
        self._running: dict[str, int] = dict.fromkeys(self.limits, 0)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._mp = None
        self._sweep_lock = threading.Lock()
        self._swept = float("-inf")  # monotonic time of the last run-folder sweep

    # ------------------------------------------------------------------------------------------- public
    def submit(self, name: str, fn: Callable[[JobContext], Any], resource: str | None = "cpu",
               owner: str | None = None, device: str | None = None) -> Job:
        """Queue ``fn`` and return its Job at once.

        ``device`` ("auto", "cpu", "cuda"), when given, decides the resource from the device the job will use.
        Raises ValueError for an unknown resource, QuotaError when ``owner`` has as many jobs as it may.
        """
        if device is not None:
            resource = resource_for(device)
        if resource not in self.limits:
            raise ValueError(f"Unknown resource {resource!r}: use one of {', '.join(self.limits)}.")
        s = settings.current()
        payload = self._payload(fn)
        with self._lock:
            if owner is not None:
                mine = [j for j in self._jobs.values() if j.owner == owner and not j.done]
                cap = s.session_running + s.session_queued
                if len(mine) >= cap:
                    running = sum(j.status == RUNNING for j in mine)
                    raise QuotaError(
                        f"You already have {running} job(s) running and {len(mine) - running} waiting; this server "
                        f"allows {s.session_running} running and {s.session_queued} waiting per session. Wait for "
                        "one to finish or cancel one, then start this again.")
            job = Job(next(self._ids), name, resource, owner, in_process=payload is not None)
            if payload is not None:
                job._cancel = self._context().Event()
            self._jobs[job.id] = job
            self._queue.append((job, payload if payload is not None else fn))
        self._pump()
        self.evict()
        return job

    def get(self, job_id: int) -> Job | None:
        return self._jobs.get(job_id)

    def jobs(self, owner: str | None = None) -> list[Job]:
        return [j for j in list(self._jobs.values()) if owner is None or j.owner == owner]

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
        self._pump()  # a session's own running limit may have held another of its jobs

    def cancel_owner(self, owner: str, running: bool = False) -> int:
        """Cancel ``owner``'s queued jobs (and its running ones with ``running``); returns how many."""
        hit = [j for j in self.jobs(owner) if j.status == QUEUED or (running and j.status == RUNNING)]
        for j in hit:
            self.cancel(j.id)
        return len(hit)

    def wait(self, job: Job, timeout: float = 60.0) -> Job:
        """Block until the job finishes (tests and the command line); raises TimeoutError."""
        end = time.time() + timeout
        while not job.done:
            if time.time() > end:
                raise TimeoutError(f"Job {job.name!r} still {job.status} after {timeout:.0f}s.")
            time.sleep(0.02)
        return job

    def evict(self) -> int:
        """Drop finished jobs beyond the newest ``jobs_keep`` and those finished over ``jobs_ttl_s`` ago, with
        their results; returns how many went."""
        s = settings.current()
        now = time.time()
        with self._lock:
            # a job counts once _finish has stamped it (its status may turn done a moment earlier)
            done = sorted((j for j in self._jobs.values() if j.done and j.finished is not None),
                          key=lambda j: j.finished, reverse=True)
            gone = done[s.jobs_keep:] + [j for j in done[:s.jobs_keep] if now - (j.finished or now) > s.jobs_ttl_s]
            for j in gone:
                self._jobs.pop(j.id, None)
        return len(gone)

    # ------------------------------------------------------------------------------------------- internals
    def _context(self):
        if self._mp is None:
            import multiprocessing

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
                if job.status != QUEUED or self._running[job.resource] >= self.limits[job.resource]:
                    continue
                if job.owner is not None and sum(j.owner == job.owner and j.status == RUNNING
                                                 for j in self._jobs.values()) >= s.session_running:
                    continue  # this session runs as many as it may; the job keeps its place
                self._queue.remove(item)
                self._running[job.resource] += 1
                job.status, job.started, job.message = RUNNING, time.time(), "starting"
                target = self._run_process if job.in_process else self._run
                threading.Thread(target=target, args=(job, fn), daemon=True, name=f"job-{job.id}").start()

    def _run(self, job: Job, fn: Callable[[JobContext], Any]) -> None:
        ctx = JobContext(job)
        try:
            ctx.check_cancelled()
            job.result = fn(ctx)
            job.status, job.progress, job.message = DONE, 1.0, "done"
        except JobCancelled:
            job.status, job.message = CANCELLED, "cancelled"
        except Exception as e:  # the job failed: keep the message for the page, the app goes on
            job.status, job.error, job.message = ERROR, describe_error(e, job.name), "failed"
            job.error_detail = traceback.format_exc()
        finally:
            del fn, ctx  # the job's objects (a model copy, its optimizer) go before the cache is emptied
            self._finish(job)

    def _run_process(self, job: Job, payload: bytes) -> None:
        mp = self._context()
        parent, child = mp.Pipe(duplex=False)
        proc = mp.Process(target=_worker_main, daemon=True, name=f"encoderlab-job-{job.id}",
                          args=(payload, child, job._cancel, _worker_threads(job.resource, self.limits), job.name))
        final = None
        try:
            with _main_not_rerun_in_worker():
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
                    _, fraction, message, metrics = msg
                    job.progress = fraction
                    if message:
                        job.message = message
                    job.metrics.extend(metrics)
                else:
                    final = msg
                    break
            proc.join(30)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
            if final is None:
                final = ("cancelled",) if job._cancel.is_set() and proc.exitcode in (0, None) else \
                    ("error", _exit_message(proc.exitcode), None)
            if final[0] == "done":
                job.result = final[1]
                job.status, job.progress, job.message = DONE, 1.0, "done"
            elif final[0] == "cancelled":
                job.status, job.message = CANCELLED, "cancelled"
            else:
                job.status, job.error, job.message, job.error_detail = ERROR, final[1], "failed", final[2]
        except Exception as e:  # the worker could not even start (e.g. out of processes)
            job.status, job.error, job.message = ERROR, describe_error(e, job.name), "failed"
            job.error_detail = traceback.format_exc()
        finally:
            parent.close()
            self._finish(job, gpu_in_this_process=False)

    def _finish(self, job: Job, gpu_in_this_process: bool = True) -> None:
        job.finished = time.time()
        if gpu_in_this_process:
            _free_gpu_memory(job.resource)
        with self._lock:
            self._running[job.resource] -= 1
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


def _free_gpu_memory(resource: str) -> None:
    """Give a thread job's GPU memory back: collect the references it left first, or empty_cache frees nothing."""
    if resource != "gpu":
        return
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # pragma: no cover - best effort
        pass


# ---------------------------------------------------------------------------------------------- run folders
def _tree(folder: Path) -> tuple[int, float]:
    """(bytes, newest modification time) of everything under ``folder``."""
    size, newest = 0, folder.stat().st_mtime
    for p in folder.rglob("*"):
        try:
            st = p.stat()
        except OSError:
            continue
        newest = max(newest, st.st_mtime)
        if p.is_file():
            size += st.st_size
    return size, newest


def evict_run_folders(root: str | Path, keep_mb: float | None = None, ttl_s: float | None = None,
                      busy: Callable[[str], float | None] | None = None) -> list[Path]:
    """Delete run folders under ``root/<session>/<run>``: each session keeps its newest runs within ``keep_mb``,
    and a run untouched for ``ttl_s`` goes. ``busy(session)`` gives the start time of that session's oldest
    running job (its folders written since then are kept). Returns the folders removed."""
    s = settings.current()
    keep = (s.runs_keep_mb if keep_mb is None else keep_mb) * 2**20
    ttl = s.runs_ttl_s if ttl_s is None else ttl_s
    root = Path(root)
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    now = time.time()
    for session in (p for p in root.iterdir() if p.is_dir()):
        since = busy(session.name) if busy else None
        runs = []
        for run in (p for p in session.iterdir() if p.is_dir()):
            size, newest = _tree(run)
            runs.append((newest, size, run))
        total = 0
        for newest, size, run in sorted(runs, reverse=True):  # newest first: they are kept first
            total += size
            in_use = since is not None and newest >= since
            if not in_use and (total > keep or now - newest > ttl):
                shutil.rmtree(run, ignore_errors=True)
                removed.append(run)
                total -= size
        if not any(session.iterdir()):
            session.rmdir()
    return removed


class SessionSweeper:
    """Cancels the queued jobs of sessions whose browser tab has closed.

    The UI tells it which transport session (``is_active(session_id)``, e.g. Streamlit's runtime) each job owner
    is; a session seen inactive on ``strikes`` sweeps in a row is gone (one miss can be a network blip that
    reconnects). Its queued jobs are cancelled (running ones finish: their results stay until evicted) and it
    is forgotten, so the table holds live sessions only."""

    def __init__(self, runner: JobRunner, is_active: Callable[[str], bool], strikes: int = 2):
        self.runner, self.is_active, self.strikes = runner, is_active, strikes
        self._owners: dict[str, str] = {}
        self._misses: dict[str, int] = {}
        self._lock = threading.Lock()

    def remember(self, owner: str, session_id: str) -> None:
        with self._lock:
            self._owners[owner] = session_id
            self._misses.pop(owner, None)

    def sweep(self) -> int:
        """One pass; returns how many jobs it cancelled."""
        with self._lock:
            owners = list(self._owners.items())
        cancelled = 0
        for owner, sid in owners:
            if self.is_active(sid):
                with self._lock:
                    self._misses.pop(owner, None)
                continue
            with self._lock:
                self._misses[owner] = self._misses.get(owner, 0) + 1
                gone = self._misses[owner] >= self.strikes
                if gone:
                    self._owners.pop(owner, None)
                    self._misses.pop(owner, None)
            if gone:
                cancelled += self.runner.cancel_owner(owner)
        return cancelled

    def run_forever(self, every_s: float = 5.0) -> None:
        while True:
            time.sleep(every_s)
            try:
                self.sweep()
            except Exception:  # pragma: no cover - the sweeper must outlive one bad pass
                traceback.print_exc()

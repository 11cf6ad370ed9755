"""The worker-process side of a job (core.runtime.jobs runs picklable jobs in spawned processes, and
core.runtime.backend.ray_jobs in Ray actors): the worker's entry point, its progress over the pipe, its threads, its
lowered priority and its cap on memory, its end when the server that started it is gone, and starting one without
re-running a Streamlit page script in it.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
import traceback
import types
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any

from core.base import settings
from core.runtime.job_outcome import JobContext, describe_error, run_job

SERVER_GONE_EXIT = 3  # a worker's exit code when it ended because its server was gone (end_with_server)
SEND_EVERY_S = 0.2  # a worker sends its progress at most this often, the metrics of the steps between in one go
JOB_NICE = 19  # niceness added to a worker: predictions (the serving process) win the CPU over training.
# bench/concurrency.py, 8 sessions + a fine-tune, bert-mini, 2 cores: p95 4.22x lone at nice 0, 4.86x at 10, 3.16x at 19
# (the fine-tune then ran at 0.63x while they predicted; alone it has the CPU as before).


def worker_threads(resource: str, limits: dict[str, int]) -> int:
    """torch threads for one worker: the CPU cores shared by the jobs that may run at once plus the serving
    process, so that training never takes every core from the people predicting."""
    raw = os.environ.get("ENCODERLAB_JOB_THREADS", "").strip()
    if raw:
        return max(1, int(raw))
    cores = os.cpu_count() or 1
    if resource == "gpu":
        return max(1, min(2, cores // 4))
    return max(1, cores // (limits.get("cpu", 1) + 1))


def lower_priority() -> None:
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


def limit_memory() -> int:
    """Cap the memory this worker may allocate at ``ENCODERLAB_JOB_MEMORY_MB`` (0, the default: no cap), so that one
    job too large for the server fails alone, with a message naming memory, instead of the kernel's OOM killer
    choosing a process (the serving one, perhaps). The cap is the process's RLIMIT_DATA: its heap and anonymous
    memory (tensors, arrays, Python objects), not the libraries it maps nor a GPU's memory. Past it an allocation
    fails (MemoryError, or torch's "can't allocate memory"), and core.runtime.job_outcome.describe_error names the
    cap. A worker imports torch and transformers in about 250 MB of it. Returns the cap in MB (0: none)."""
    mb = settings.current().job_memory_mb
    if not mb:
        return 0
    try:
        import resource  # lazy: Unix-only standard module
    except ImportError:  # no such limit here (Windows): the job runs uncapped
        return 0
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = mb * 2**20 if hard == resource.RLIM_INFINITY else min(mb * 2**20, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    return cap // 2**20


def prepare_worker(threads: int) -> None:
    """What every job process does first: ``threads`` torch threads, a lower priority than the serving process, and
    its cap on memory (``limit_memory``)."""
    import torch  # lazy: the UI process imports this module and needs no torch for it

    torch.set_num_threads(threads)
    lower_priority()
    limit_memory()


class PipeReport:
    """A worker's ``report`` for its JobContext: progress goes over the pipe, in batches.

    A small model reports hundreds of steps a second, and a pipe message per step fills the pipe whenever the UI
    process is slow to read it (busy drawing a page), which then blocks the training on ``send``: watching a job
    would slow it."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._metrics: list[dict[str, Any]] = []
        self._state: tuple[float, str] | None = None
        self._sent = 0.0

    def __call__(self, fraction: float, message: str, metrics: list[dict[str, Any]]) -> None:
        self._state = (fraction, message)
        self._metrics.extend(metrics)
        if time.monotonic() - self._sent >= SEND_EVERY_S:
            self.flush()

    def flush(self) -> None:
        if self._state is None and not self._metrics:
            return
        fraction, message = self._state or (0.0, "")
        self._conn.send(("progress", fraction, message, self._metrics))
        self._metrics, self._state, self._sent = [], None, time.monotonic()


def end_with_server() -> None:
    """End this worker the moment the process that started it (the server) is gone, killed or stopped without ending
    its jobs. The job's table went with the server, so nobody waits for the result; left running, the job would go
    on holding a CPU or a GPU's memory, and writing into a runs folder, that the restarted server thinks free. A job
    noticed the pipe's end only at its next progress report (BrokenPipeError), which a job in a long stretch without
    one (a model loading, a long evaluation) may be minutes away from. A thread waits on multiprocessing's parent
    sentinel (the spawn pipe, closed when the server exits), then ends the process at once: whatever it was writing
    stays a temporary folder beside its place (core.runtime.artifacts.write_folder, core.train.common's checkpoint),
    never the place itself."""
    server = multiprocessing.parent_process()
    if server is None:  # not a spawned worker (a Ray actor, a test calling worker_main itself)
        return

    def wait_then_end() -> None:
        server.join()
        os._exit(SERVER_GONE_EXIT)

    threading.Thread(target=wait_then_end, daemon=True, name="end-with-server").start()


def worker_main(payload: bytes, conn, cancel, threads: int, name: str) -> None:
    """Entry point of a worker process: run the job, send back its outcome (core.runtime.job_outcome.run_job)."""
    end_with_server()
    prepare_worker(threads)
    report = PipeReport(conn)
    ctx = JobContext(cancel, report, report.flush)
    try:
        final = run_job(payload, ctx, name)
        try:
            ctx.flush()
            conn.send(final)
        except Exception as e:  # noqa: BLE001 - the result could not be sent (not picklable): say why
            if final[0] == "error":  # the error itself could not be sent: send its text
                conn.send(("error", final[1], None))
            else:
                conn.send(("error", describe_error(e, name), traceback.format_exc()))
    finally:
        conn.close()


_START_LOCK = threading.Lock()  # one worker start at a time swaps ``__main__`` (below)


@contextmanager
def main_not_rerun_in_worker():
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
    fake = (
        main is not None
        and getattr(main, "__spec__", None) is None
        and getattr(main, "__loader__", None) is None
        and getattr(main, "__file__", None) is not None
    )
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

"""Server settings read from the environment: batching, job quotas and eviction, and the hosted mode's limits.

Every value has a safe default and is read when asked for (``current()``), so a test or an operator changing the
environment takes effect without a restart of the module. A bad value raises ValueError naming the variable.

``ENCODERLAB_HOSTED=1`` (on in the Docker image) turns on the hosted limits: the custom-checkpoint box takes Hub
ids only, messages never show server paths, and texts, batches, attribution steps, epochs and uploads are capped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

TRUE = ("1", "true", "yes", "on")


def env_int(name: str, default: int, lo: int = 0) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        v = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a whole number; unset it or give e.g. {name}={default}.") from None
    if v < lo:
        raise ValueError(f"{name}={v} is below {lo}; unset it or give e.g. {name}={default}.")
    return v


def env_float(name: str, default: float, lo: float = 0.0) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        v = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number; unset it or give e.g. {name}={default}.") from None
    if v < lo:
        raise ValueError(f"{name}={v} is below {lo}; unset it or give e.g. {name}={default}.")
    return v


def runs_base() -> Path:
    """Where sessions' run folders live: $ENCODERLAB_RUNS (core.train.finetune.runs_root puts each session under it)."""
    return Path(os.environ.get("ENCODERLAB_RUNS", "/tmp/encoderlab-runs"))


def hosted() -> bool:
    """True when this server is the hosted demo (``ENCODERLAB_HOSTED=1``)."""
    return os.environ.get("ENCODERLAB_HOSTED", "").strip().lower() in TRUE


@dataclass(frozen=True)
class Settings:
    # batching of concurrent predictions on one model (core.runtime.serving)
    batch_window_ms: float  # how long a request waits for companions once other requests are arriving
    max_batch: int  # most requests run in one forward; 1 turns batching off
    # jobs (core.runtime.jobs)
    session_running: int  # training jobs one session may have running at once
    session_queued: int  # jobs one session may have waiting in the queue
    jobs_keep: int  # finished jobs kept (newest first); older ones are evicted with their results
    jobs_ttl_s: float  # a finished job is evicted this long after it ended
    runs_keep_mb: float  # a session's run folders beyond this size are evicted, oldest first
    runs_ttl_s: float  # a run folder untouched this long is evicted
    job_workers: bool  # run picklable jobs (training, pretraining, benchmarks) in worker processes
    job_memory_mb: int  # the most memory one job's worker process may allocate (core.runtime.job_worker); 0 = no cap
    # hosted mode
    hosted: bool
    hub_allowlist: tuple[str, ...]  # Hub ids the custom box accepts in hosted mode; empty = official ids
    max_text_chars: int  # one text typed or pasted
    max_batch_rows: int  # rows of a batch (fill-mask lines, pair CSV, attribution batch)
    max_attribution_steps: int  # Integrated Gradients steps / samples of the perturbation methods
    max_epochs: int  # fine-tune epochs
    max_upload_mb: float  # an uploaded data set or corpus


def current() -> Settings:
    """The settings as the environment gives them now. Raises ValueError naming a bad variable."""
    h = hosted()
    allow = tuple(s.strip() for s in os.environ.get("ENCODERLAB_HUB_ALLOWLIST", "").split(",") if s.strip())
    return Settings(
        batch_window_ms=env_float("ENCODERLAB_BATCH_WINDOW_MS", 5.0),
        max_batch=env_int("ENCODERLAB_MAX_BATCH", 32, lo=1),
        session_running=env_int("ENCODERLAB_SESSION_RUNNING", 2 if not h else 1, lo=1),
        session_queued=env_int("ENCODERLAB_SESSION_QUEUED", 4 if not h else 2, lo=0),
        jobs_keep=env_int("ENCODERLAB_JOBS_KEEP", 200, lo=1),
        jobs_ttl_s=env_float("ENCODERLAB_JOBS_TTL_S", 6 * 3600.0, lo=1.0),
        runs_keep_mb=env_float("ENCODERLAB_RUNS_MB", 2000.0 if not h else 500.0, lo=1.0),
        runs_ttl_s=env_float("ENCODERLAB_RUNS_TTL_S", 24 * 3600.0, lo=1.0),
        job_workers=os.environ.get("ENCODERLAB_JOB_WORKERS", "1").strip().lower() in TRUE,
        job_memory_mb=env_int("ENCODERLAB_JOB_MEMORY_MB", 0, lo=0),
        hosted=h,
        hub_allowlist=allow,
        max_text_chars=env_int("ENCODERLAB_MAX_TEXT_CHARS", 20_000 if not h else 2_000, lo=1),
        max_batch_rows=env_int("ENCODERLAB_MAX_BATCH_ROWS", 500 if not h else 100, lo=1),
        max_attribution_steps=env_int("ENCODERLAB_MAX_ATTR_STEPS", 1000 if not h else 64, lo=1),
        max_epochs=env_int("ENCODERLAB_MAX_EPOCHS", 50 if not h else 5, lo=1),
        max_upload_mb=env_float("ENCODERLAB_MAX_UPLOAD_MB", 20.0 if not h else 5.0, lo=0.01),
    )

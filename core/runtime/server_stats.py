"""What a server holds, written where an operator can read it: ``ENCODERLAB_STATS_FILE=<path>`` makes the app
rewrite one JSON object there every few seconds (the job table's size by status, the sessions the job sweeper
watches, the process's resident memory, open files and threads).

A long-running server's tables must stay bounded (core.runtime.jobs evicts finished jobs, the sweeper forgets closed
tabs); bench/soak.py reads this file each minute to show that they do. The file is written whole or not at all
(core.runtime.artifacts.write_file), so a reader never sees half of one.
"""

from __future__ import annotations

import json
import os
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.runtime.artifacts import write_file
from core.runtime.jobs import JobRunner
from core.runtime.run_folders import SessionSweeper

STATS_ENV = "ENCODERLAB_STATS_FILE"
EVERY_S = 5.0


def process_counts(pid: int | str = "self") -> dict[str, int]:
    """Resident memory (bytes), open file descriptors and threads of process ``pid``, from /proc (Linux); an empty
    dict where there is no /proc or the process is gone."""
    base = Path("/proc") / str(pid)
    try:
        status = (base / "status").read_text()
        fds = len(os.listdir(base / "fd"))
    except OSError:
        return {}
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {
        "rss_bytes": int(fields["VmRSS"].split()[0]) * 1024 if "VmRSS" in fields else 0,
        "fds": fds,
        "threads": int(fields.get("Threads", "0").strip() or 0),
    }


def snapshot(runner: JobRunner, sweeper: SessionSweeper | None = None) -> dict[str, Any]:
    """The server's tables now: jobs by status and in all, the sessions the sweeper watches, and this process's
    counts (process_counts)."""
    jobs = runner.jobs()
    return {
        "time": time.time(),
        "jobs": len(jobs),
        "jobs_by_status": dict(Counter(j.status for j in jobs)),
        "watched_sessions": sweeper.watched() if sweeper is not None else None,
        **process_counts(),
    }


def write_forever(path: Path, take: Callable[[], dict[str, Any]], every_s: float = EVERY_S) -> None:
    """Rewrite ``path`` with ``take()`` every ``every_s`` seconds, for ever (a daemon thread's loop)."""
    while True:
        try:
            write_file(path, json.dumps(take()))
        except Exception:  # pragma: no cover - the writer must outlive one bad pass (a full disk, a removed folder)
            traceback.print_exc()
        time.sleep(every_s)


def start_writer(runner: JobRunner, sweeper: SessionSweeper | None = None) -> threading.Thread | None:
    """Start the stats writer when ``ENCODERLAB_STATS_FILE`` names a file; returns its thread, or None."""
    raw = os.environ.get(STATS_ENV, "").strip()
    if not raw:
        return None
    th = threading.Thread(
        target=write_forever,
        args=(Path(raw), lambda: snapshot(runner, sweeper)),
        daemon=True,
        name="encoderlab-stats",
    )
    th.start()
    return th

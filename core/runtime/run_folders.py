"""Housekeeping around jobs: run folders trimmed by size and age (``evict_run_folders``), and the queued jobs of
closed browser tabs cancelled (``SessionSweeper``).
"""

from __future__ import annotations

import shutil
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from core.base import settings

# the folder inside a run where training keeps what it resumes from (core.train.finetune, core.train.pretrain.train):
# a resumable state (weights, optimizer moments, RNG) several times the size of the model the run saves
CHECKPOINT_DIR = "checkpoint"


class CancelsOwners(Protocol):
    """What SessionSweeper needs of a runner (core.runtime.jobs.JobRunner)."""

    def cancel_owner(self, owner: str, running: bool = False) -> int: ...

    def forget_owner(self, owner: str) -> int: ...


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


def evict_run_folders(
    root: str | Path,
    keep_mb: float | None = None,
    ttl_s: float | None = None,
    busy: Callable[[str], float | None] | None = None,
) -> list[Path]:
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


def drop_checkpoints(session: str, root: str | Path | None = None) -> int:
    """Remove the resumable checkpoints of a closed session's runs (``<root>/<session>/<run>/checkpoint``), and
    keep everything else: a model a run saved still loads from its folder. Resuming happens from the session's
    own page (its run list lives in the tab), so once the tab is gone nothing can resume them; a cancelled bert-mini
    fine-tune kept 87-347 MB of them (bench/soak.py), and a workshop's tabs kept every one until the runs' age bound.
    Returns the bytes freed."""
    base = Path(root) if root is not None else settings.runs_base()
    freed = 0
    for ckpt in base.joinpath(session).glob(f"*/{CHECKPOINT_DIR}"):
        if ckpt.is_dir():
            freed += _tree(ckpt)[0]
            shutil.rmtree(ckpt, ignore_errors=True)
    return freed


class SessionSweeper:
    """Cancels the jobs of sessions whose browser tab has closed.

    The UI tells it which transport session (``is_active(session_id)``, e.g. Streamlit's runtime) each job owner
    is; a session seen inactive on ``strikes`` sweeps in a row is gone (one miss can be a network blip that
    reconnects). Its queued and running jobs are cancelled (a fine-tune of a closed tab held a training slot
    for nobody: bench/soak.py), its finished jobs leave the runner's table with their results (the cancelled ones
    as they end: ``forget_owner``), and it is forgotten, so the tables hold live sessions only."""

    def __init__(self, runner: CancelsOwners, is_active: Callable[[str], bool], strikes: int = 2):
        self.runner, self.is_active, self.strikes = runner, is_active, strikes
        self._owners: dict[str, str] = {}
        self._misses: dict[str, int] = {}
        self._lock = threading.Lock()

    def remember(self, owner: str, session_id: str) -> None:
        with self._lock:
            self._owners[owner] = session_id
            self._misses.pop(owner, None)

    def watched(self) -> int:
        """How many sessions it is watching now (each owner of a job whose tab has not been seen closed)."""
        with self._lock:
            return len(self._owners)

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
            if gone:  # its running jobs too: nothing can show their results once the tab is gone (forget_owner)
                cancelled += self.runner.cancel_owner(owner, running=True)
                self.runner.forget_owner(owner)  # its finished jobs leave the table (and its running ones as they end)
        return cancelled

    def run_forever(self, every_s: float = 5.0) -> None:
        while True:
            time.sleep(every_s)
            try:
                self.sweep()
            except Exception:  # pragma: no cover - the sweeper must outlive one bad pass
                traceback.print_exc()

"""The server's tables written for an operator (core.runtime.server_stats): what bench/soak.py samples each minute."""

from __future__ import annotations

import json
import os
import threading
import time

from core.runtime.jobs import JobRunner
from core.runtime.run_folders import SessionSweeper
from core.runtime.server_stats import STATS_ENV, process_counts, snapshot, start_writer


def test_process_counts_read_this_process():
    c = process_counts()
    assert c["rss_bytes"] > 10 * 2**20 and c["fds"] >= 3 and c["threads"] >= 1
    assert process_counts(2**22 + 12345) == {}  # no such process


def test_snapshot_counts_the_job_table_by_status_and_the_watched_sessions():
    runner = JobRunner({"cpu": 1}, workers=False)
    release = threading.Event()
    done = runner.submit("quick", lambda ctx: 1, owner="a")
    runner.wait(done, 30)
    held = runner.submit("held", lambda ctx: release.wait(30), owner="b")
    waiting = runner.submit("waiting", lambda ctx: 2, owner="b")
    sweeper = SessionSweeper(runner, lambda sid: True)
    sweeper.remember("a", "tab-a")
    sweeper.remember("b", "tab-b")
    try:
        end = time.time() + 30
        while held.status != "running" and time.time() < end:
            time.sleep(0.01)
        s = snapshot(runner, sweeper)
        assert s["jobs"] == 3
        assert s["jobs_by_status"] == {"done": 1, "running": 1, "queued": 1}
        assert s["watched_sessions"] == 2 and s["threads"] >= 2
    finally:
        release.set()
        runner.wait(held, 30)
        runner.wait(waiting, 30)
    assert snapshot(runner)["jobs_by_status"] == {"done": 3}


def test_the_writer_starts_only_when_asked_and_rewrites_the_file(tmp_path, monkeypatch):
    runner = JobRunner({"cpu": 1}, workers=False)
    monkeypatch.delenv(STATS_ENV, raising=False)
    assert start_writer(runner) is None
    path = tmp_path / "stats.json"
    monkeypatch.setenv(STATS_ENV, str(path))
    th = start_writer(runner)
    assert th is not None and th.daemon
    end = time.time() + 20
    while not path.exists() and time.time() < end:
        time.sleep(0.05)
    data = json.loads(path.read_text())
    assert data["jobs"] == 0 and data["watched_sessions"] is None and data["rss_bytes"] > 0
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]  # written whole, then renamed

"""Faults on the real components (#34 §2): a job's worker over its memory cap, the runs folder's disk full, and the
server stopped in the middle of a job. Real worker processes, a real tmpfs, a real fine-tune; nothing mocked."""

from __future__ import annotations

import errno
import functools
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from core.base.messages import message_of, render
from core.compare.glue_claims import find_runs
from core.data.datasets_local import LabelledData, Split
from core.inspect.tuned_lens import TuneConfig, load_tuned, tune_job
from core.models.loading import ModelSpec, load
from core.predict.classify import load_finetuned
from core.represent.corpus_index import IndexConfig, index_job, load_index
from core.runtime.jobs import DONE, ERROR, JobRunner
from core.train import finetune as ft
from core.train.finetune_config import FinetuneConfig


# ---------------------------------------------------------------------------------------------- the memory cap
def allocating_job(mb: int, ctx) -> int:
    """What a batch too large for the server does: ask torch for ``mb`` MB at once (torch.empty touches no page,
    so without a cap it succeeds at once and costs nothing)."""
    import torch

    ctx.progress(0.1, "allocating")
    x = torch.empty(mb * 2**20, dtype=torch.uint8)
    return int(x.numel() // 2**20)


def test_a_job_over_the_memory_cap_fails_naming_memory_and_the_next_job_runs(monkeypatch):
    """ENCODERLAB_JOB_MEMORY_MB caps each job's worker (RLIMIT_DATA): a job asking for more fails alone, its
    message names memory and the cap (English and 中文), and the next job on the same runner runs and finishes."""
    monkeypatch.setenv("ENCODERLAB_JOB_MEMORY_MB", "1024")
    r = JobRunner({"cpu": 1}, workers=True)
    big = r.wait(r.submit("big batch", functools.partial(allocating_job, 4096)), timeout=120)
    assert big.in_process and big.status == ERROR, (big.status, big.result)
    assert big.error.startswith("'big batch' ran out of memory: this server lets one job use at most 1024 MB")
    assert "Lower the batch size" in big.error
    m = message_of(big.error)
    assert m.kind == "jobs.out_of_memory_cap"
    assert "内存不足" in render(m.kind, "zh", m.params) and "1024 MB" in render(m.kind, "zh", m.params)
    nxt = r.wait(r.submit("next", functools.partial(allocating_job, 64)), timeout=120)
    assert nxt.status == DONE and nxt.result == 64, nxt.error


# ---------------------------------------------------------------------------------------------- a full disk
@pytest.fixture
def tmpfs(tmp_path):
    """``tmpfs(folder, mb)`` mounts a tmpfs of ``mb`` MB at ``folder`` (tests run as root here), unmounted after the
    test; the test is skipped, with the reason, where mounting is not allowed."""
    mounted: list[Path] = []

    def mount(where: Path, mb: int) -> Path:
        where.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={mb}m", "tmpfs", str(where)], capture_output=True, text=True
            )
            why = done.stderr.strip() or f"mount exited {done.returncode}"
        except OSError as e:  # no mount command
            done, why = None, str(e)
        if done is None or done.returncode != 0:
            pytest.skip(f"a tmpfs cannot be mounted here ({why}): it is the full disk of this test")
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)  # a file still open: detach it


def fill_up(disk: Path, leave: int = 8192) -> Path:
    """Write a ballast file until the disk says ENOSPC, then give back ``leave`` bytes: what a disk full of other
    runs looks like to the next job. Returns the ballast (delete it to free the space)."""
    ballast = disk / "ballast"
    with ballast.open("wb") as fh:
        try:
            while True:
                fh.write(bytes(1 << 16))
                fh.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    os.truncate(ballast, max(0, ballast.stat().st_size - leave))
    return ballast


def toy_data(n_train: int = 16, n_test: int = 4) -> LabelledData:
    rng = random.Random(0)

    def split(n: int) -> Split:
        labels = [rng.randint(0, 1) for _ in range(n)]
        return Split(tuple(f"it was {'good' if y else 'bad'}" for y in labels), tuple(labels))

    return LabelledData("toy", split(n_train), split(n_test), ("neg", "pos"), "generated in the test", "n/a")


INDEX = IndexConfig("text", ("The bank of the river was muddy.", "I put money in the bank."), depth=1)
LENS = TuneConfig(steps=2, batch_size=2, max_length=16, heldout_sentences=2)


def jobs_for(tiny: Path, runs: Path) -> dict:
    """The jobs that write under the runs folder: a fine-tune (its model folder at the end), a fine-tune of two
    epochs (a checkpoint after the first, four times the model: into a disk of its own), a corpus index build and a
    tuned-lens training (their caches), all of the tiny model."""
    spec = ModelSpec("bert", str(tiny), "cpu")
    cfg = FinetuneConfig("bert", str(tiny), epochs=1, batch_size=8, max_length=16, device="cpu")
    return {
        "fine-tune": ft.job_fn(cfg, toy_data(), runs / "session" / "run1"),
        "two epochs": ft.job_fn(replace(cfg, epochs=2), toy_data(), runs / "tight" / "run2"),
        "corpus index": index_job(spec, INDEX),
        "tuned lens": tune_job(spec, LENS),
    }


# four workers and three in-process jobs: 37 s on a lightly loaded 2-core machine, 156 s at load 12
@pytest.mark.timeout(600)
def test_a_full_runs_disk_ends_each_job_with_a_clear_message_and_nothing_half_written_is_offered(
    tmpfs, tiny_models, tmp_path, monkeypatch
):
    """The runs folder's disk fills (real tmpfs mounts): two fine-tunes (one at its model, one at its first
    checkpoint, where torch.save says only "unexpected pos"), a corpus index build and a tuned-lens training each
    end with a message naming the full disk (English and 中文); no half-written file is left, so no loader and no
    list of finished runs offers one; once space is freed the same runner runs them to the end."""
    runs = tmpfs(tmp_path / "runs", 8)
    tmpfs(runs / "tight", 5)  # the checkpoint's model weights fit, its optimizer state does not
    monkeypatch.setenv("ENCODERLAB_RUNS", str(runs))  # the caches' roots default to folders under it
    for var in ("ENCODERLAB_LENS_DIR", "ENCODERLAB_CORPUS_INDEX_DIR"):
        monkeypatch.delenv(var, raising=False)
    tiny = tiny_models["bert"]
    ballast = fill_up(runs)
    r = JobRunner({"cpu": 4}, workers=True)
    for name, fn in jobs_for(tiny, runs).items():
        job = r.wait(r.submit(name, fn), timeout=240)
        assert job.in_process and job.status == ERROR, (job.name, job.status)
        prefix = f"'{job.name}' could not save its results: the disk that holds the runs folder is full"
        assert job.error.startswith(prefix), job.error
        m = message_of(job.error)
        assert m.kind == "jobs.disk_full_not_saved" and "磁盘已满" in render(m.kind, "zh", m.params)
    left = sorted(str(p.relative_to(runs)) for p in runs.rglob("*") if p.is_file())
    assert left == ["ballast"], f"half-written files were left: {left}"
    assert find_runs([runs]) == []  # the Models page lists no finished run
    lm_base = load(ModelSpec("bert", str(tiny), "cpu"), task="base")
    lm_mlm = load(ModelSpec("bert", str(tiny), "cpu"), task="mlm")
    assert load_index(lm_base, INDEX) is None and load_tuned(lm_mlm) is None

    ballast.unlink()  # space is freed: the next jobs run on the same runner (on its threads: no more processes)
    again = {k: v for k, v in jobs_for(tiny, runs).items() if k != "two epochs"}
    for name, fn in again.items():
        job = r.wait(r.submit(name, lambda ctx, fn=fn: fn(ctx)), timeout=240)
        assert not job.in_process and job.status == DONE, (job.name, job.error)
    assert [x.path for x in find_runs([runs])] == [str(runs / "session" / "run1" / "model")]
    assert load_finetuned(runs / "session" / "run1" / "model", "cpu").label_names == ("neg", "pos")
    assert load_index(lm_base, INDEX) is not None and load_tuned(lm_mlm) is not None


# ---------------------------------------------------------------------------------------------- a stopped server
ROOT = Path(__file__).resolve().parents[2]


def silent_job(ctx) -> None:
    """A job in a long stretch without a progress report (a big model loading, a long evaluation): it would learn
    of its server's end only at its next report."""
    ctx.progress(0.01, "started")
    ctx.flush()
    time.sleep(600)


def serve(tiny: str, run: str, silent: bool) -> None:
    """The server's part, in a process of its own that the test stops: a JobRunner as the app's, running a real
    fine-tune (and, with ``silent``, a silent_job) in worker processes. Once the fine-tune is in its second epoch
    (its first checkpoint written), it prints its workers' pids and waits to be stopped. SIGTERM ends it as it ends
    Streamlit (the server stops, then Python exits); SIGKILL leaves nothing to run."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    r = JobRunner({"cpu": 2}, workers=True)
    cfg = FinetuneConfig("bert", tiny, epochs=50, batch_size=8, max_length=16, device="cpu", patience=0)
    jobs = [r.submit("fine-tune", ft.job_fn(cfg, toy_data(40, 4), run))]
    if silent:
        jobs.append(r.submit("silent", silent_job))
    end = time.monotonic() + 240
    while not (any(m.get("epoch", 0) > 1 for m in jobs[0].metrics) and all(j.progress > 0 for j in jobs)):
        assert time.monotonic() < end and not any(j.done for j in jobs), [(j.status, j.error) for j in jobs]
        time.sleep(0.05)
    print(json.dumps([p.pid for p in multiprocessing.active_children()]), flush=True)
    while True:
        time.sleep(1)


def running(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie no longer does)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# two server processes and three workers: 10-14 s after the file's other tests, 86 s at load 12
@pytest.mark.timeout(600)
def test_a_server_stopped_mid_fine_tune_leaves_no_running_job_and_its_finished_runs_load(tiny_models, tmp_path):
    """Two servers, each mid fine-tune (one also in a job's long silent stretch), are stopped: one by SIGTERM, the
    other by SIGKILL. Their workers end with them, whatever they were doing; on restart nothing under the runs folder
    is offered as a finished model but the run that finished before the stop, which loads."""
    runs, tiny = tmp_path / "runs", str(tiny_models["bert"])
    done = runs / "session" / "finished"
    ft.train(FinetuneConfig("bert", tiny, epochs=1, batch_size=8, max_length=16, device="cpu"), toy_data(), done)
    servers = {}
    for sig, silent in ((signal.SIGTERM, False), (signal.SIGKILL, True)):
        code = f"from tests.core.test_faults_jobs import serve; serve({tiny!r}, {str(runs / 'session' / sig.name)!r}, {silent})"
        servers[sig] = subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ}
        )
    workers = {sig: json.loads(p.stdout.readline() or "[]") for sig, p in servers.items()}
    for sig, p in servers.items():
        assert len(workers[sig]) == (2 if sig == signal.SIGKILL else 1), (sig, workers[sig], p.poll())
        p.send_signal(sig)
        p.wait(60)
        p.stdout.close()
    end = time.monotonic() + 60  # a hang guard: the silent job would sleep ten minutes
    while any(running(pid) for pids in workers.values() for pid in pids):
        assert time.monotonic() < end, (
            f"workers outlived their server: {[p for w in workers.values() for p in w if running(p)]}"
        )
        time.sleep(0.1)
    for sig in servers:
        assert (runs / "session" / sig.name / "checkpoint").is_dir()  # the stopped run had got that far
        assert not (runs / "session" / sig.name / "model").exists()
    assert [r.path for r in find_runs([runs])] == [str(done / "model")]  # what the Models page lists after restart
    assert load_finetuned(done / "model", "cpu").label_names == ("neg", "pos")

"""Jobs on Ray: a fine-tune as a Ray actor with progress and Cancel, whose result folder another front-end process
loads (through the Ray model tier) and gets the same predictions; the queue and quotas are the in-process ones."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from core.predict.classify import classify, load_finetuned
from core.runtime.backend import ray_jobs, runner
from core.runtime.jobs import CANCELLED, DONE, QuotaError
from core.train import finetune as ft
from core.train.finetune import FinetuneResult
from core.train.finetune_config import FinetuneConfig
from tests.core.test_finetune import toy
from tests.ray_backend import jobs_fixture
from tests.ray_backend.conftest import RAY_TESTS

pytestmark = RAY_TESTS
ROOT = Path(__file__).resolve().parents[2]
FOLLOWER = """
import json, sys
from core.predict.classify import classify, load_finetuned
fm = load_finetuned(sys.argv[1], device="cpu")
print(json.dumps({"probs": classify(fm, sys.argv[2:]).tolist()}))
"""


def wait_for(cond, timeout: float, what: str) -> None:
    """A hang guard: poll ``cond`` until it holds; fail naming ``what`` after ``timeout`` s."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.timeout(600)
def test_finetune_runs_as_a_ray_job_and_another_front_end_loads_it(tiny_models, ray_backend, tmp_path):
    r = runner()
    assert r is ray_backend.job_runner()  # what the pages call (core.runtime.backend.runner) is the backend's
    cfg = FinetuneConfig(
        "bert", str(tiny_models["bert"]), epochs=4, lr=1e-3, batch_size=8, max_length=16, patience=0, device="cpu"
    )
    job = r.submit("finetune", ft.job_fn(cfg, toy(64, 16), tmp_path / "run"), device="cpu", owner="s1")
    assert job.in_process  # a picklable job: it runs in a worker (here a Ray actor), not on a thread of ours
    seen = []
    while not job.done:
        seen.append(job.progress)
        time.sleep(0.05)
    assert job.status == DONE, job.error
    assert job.placement and job.placement["pid"] != os.getpid()
    assert any(0.0 < p < 1.0 for p in seen) and seen == sorted(seen)  # progress came live, in order
    assert [m["step"] for m in job.metrics if m.get("kind") == "train"][:3] == [1, 2, 3]
    res = job.result
    assert isinstance(res, FinetuneResult) and Path(res.model_dir).is_dir()

    texts = ["it was good", "it was awful", "it was fine"]
    here = classify(load_finetuned(res.model_dir, device="cpu"), texts)
    env = {
        **os.environ,
        "ENCODERLAB_BACKEND": "ray",
        "PYTHONPATH": str(ROOT),
        "ENCODERLAB_RAY_ADDRESS": ray_backend.address,
        "ENCODERLAB_RAY_REPLICA_CPUS": "0.25",
    }
    out = subprocess.run(
        [sys.executable, "-c", FOLLOWER, res.model_dir, *texts],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    there = np.array(json.loads(out.stdout.strip().splitlines()[-1])["probs"])
    assert np.allclose(here, there, atol=1e-5)


@pytest.mark.timeout(600)
def test_cancel_reaches_the_actor_and_quotas_hold(ray_backend, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_SESSION_RUNNING", "1")
    monkeypatch.setenv("ENCODERLAB_SESSION_QUEUED", "1")
    r = ray_backend.job_runner()
    long = r.submit("long", functools.partial(jobs_fixture.ticking, 120.0), resource="cpu", owner="s2")
    queued = r.submit("second", functools.partial(jobs_fixture.ticking, 0.2), resource="cpu", owner="s2")
    with pytest.raises(QuotaError, match="1 running and 1 waiting"):
        r.submit("third", functools.partial(jobs_fixture.ticking, 0.2), resource="cpu", owner="s2")
    wait_for(lambda: len(long.metrics) >= 3, 120, "the long job's progress")
    assert queued.status == "queued"  # the session's running limit holds it, as in-process
    # no grace period within this test: only the actor itself can end the job as cancelled (after the grace, the
    # front-end would mark it so whether or not the Cancel reached the actor)
    monkeypatch.setattr(ray_jobs, "CANCEL_GRACE_S", 3600.0)
    r.cancel(long.id)
    # a hang guard that outlasts the job's own 120 s: a Cancel that never reached the actor ends it DONE, not CANCELLED
    r.wait(long, 180)
    assert long.status == CANCELLED and long.result is None, (long.status, long.error)
    r.wait(queued, 120)  # the freed slot runs the held job to its end
    assert queued.status == DONE, queued.error
    assert queued.result["pid"] != os.getpid() and queued.metrics

"""Background jobs: progress, cancel, error, queueing."""
import threading
import time

import pytest

from core.jobs import CANCELLED, DONE, ERROR, JobRunner


def test_progress_and_result():
    r = JobRunner({"cpu": 1})

    def work(ctx):
        for i in range(5):
            ctx.progress((i + 1) / 5, f"step {i + 1}", loss=1.0 / (i + 1))
        return 42

    job = r.wait(r.submit("w", work))
    assert job.status == DONE and job.result == 42 and job.progress == 1.0
    assert [m["loss"] for m in job.metrics] == [1.0, 0.5, 1 / 3, 0.25, 0.2]


def test_cancel_stops_a_running_job():
    r = JobRunner({"cpu": 1})
    started = threading.Event()

    def work(ctx):
        started.set()
        for i in range(10_000):
            time.sleep(0.01)
            ctx.progress(i / 10_000)
        return "finished"

    job = r.submit("long", work)
    assert started.wait(5)
    r.cancel(job.id)
    r.wait(job, timeout=5)
    assert job.status == CANCELLED and job.result is None


def test_error_is_kept_and_runner_goes_on():
    r = JobRunner({"cpu": 1})
    bad = r.wait(r.submit("bad", lambda ctx: 1 / 0))
    assert bad.status == ERROR and "ZeroDivisionError" in bad.error
    good = r.wait(r.submit("good", lambda ctx: "ok"))
    assert good.status == DONE


def test_limit_queues_jobs_in_order():
    r = JobRunner({"cpu": 1, "gpu": 1})
    gate = threading.Event()
    first = r.submit("first", lambda ctx: gate.wait(5), resource="gpu")
    second = r.submit("second", lambda ctx: "two", resource="gpu")
    third = r.submit("third", lambda ctx: "three", resource="gpu")
    other = r.wait(r.submit("cpu job", lambda ctx: "cpu"))  # another resource is not blocked
    assert other.status == DONE
    assert second.status == "queued" and r.queue_position(second) == 1 and r.queue_position(third) == 2
    r.cancel(third.id)
    assert third.status == CANCELLED
    gate.set()
    r.wait(second)
    assert first.status == DONE and second.result == "two"


def test_bad_limits_and_resource():
    with pytest.raises(ValueError, match="at least 1"):
        JobRunner({"cpu": 0})
    with pytest.raises(ValueError, match="Unknown resource"):
        JobRunner({"cpu": 1}).submit("x", lambda ctx: 1, resource="tpu")

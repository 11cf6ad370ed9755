"""Jobs on Ray: each job that runs in a worker process in-process mode runs in its own Ray actor instead.

The runner is core.runtime.jobs.JobRunner, queue, per-session quotas, eviction and run-folder sweeps included; only where a
picklable job runs changes. Its actor asks Ray for the job's resource (``num_gpus`` = ENCODERLAB_RAY_JOB_GPUS for a
"gpu" job, one CPU for a "cpu" job), so Ray places it on a node that has one free and holds it until one is. The
front-end's thread for the job polls the actor (progress, metrics, the result) and forwards Cancel; the actor is
killed when the job ends, which gives its GPU memory back with its process. A node lost mid-job (its actor dies)
ends the job with a message saying so, and the front-end goes on serving.

Jobs that need this process's objects (a cached model: attributions, pair batches) still run on a thread here, and
their model calls go to the model tier (core.runtime.backend).
"""

from __future__ import annotations

import os
import threading
import time
import types
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

from core.base.messages import msg
from core.runtime.backend.base import use
from core.runtime.backend.inprocess import InProcessBackend
from core.runtime.backend.ray_settings import RaySettings
from core.runtime.job_outcome import JobContext, failed, run_job
from core.runtime.job_worker import prepare_worker, worker_threads
from core.runtime.jobs import CANCEL_GRACE_S, CANCELLED, Job, JobRunner

POLL_S = 0.25


class _Box:
    """An actor's job state, kept for the front-end's next poll: the job's JobContext reports here."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cancel = threading.Event()
        self.fraction, self.message = 0.0, ""
        self.metrics: list[dict] = []
        self.final: tuple | None = None

    def report(self, fraction: float, message: str, metrics: list[dict[str, Any]]) -> None:
        with self.lock:
            self.fraction = fraction
            if message:
                self.message = message
            self.metrics.extend(metrics)


@ray.remote(max_concurrency=4)
class JobWorker:
    """One job's process on the cluster: ``start`` runs the job on a thread; ``poll`` and ``cancel`` answer meanwhile
    (a threaded actor)."""

    def __init__(self) -> None:
        use(InProcessBackend())  # the job's model calls run here, in its own process
        self.box = _Box()

    def start(self, payload: bytes, threads: int, name: str, resource: str) -> dict:
        if resource != "gpu":  # Ray hides no GPU from an actor that asked for none: a CPU job must not take one
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
        prepare_worker(threads)  # torch is first imported here, after the GPUs are hidden
        box = self.box

        def run() -> None:
            final = run_job(payload, JobContext(box.cancel, box.report), name)
            with box.lock:
                box.final = final

        threading.Thread(target=run, daemon=True, name=f"job {name}").start()
        ctx = ray.get_runtime_context()
        return {"node": ctx.get_node_id(), "ip": ray.util.get_node_ip_address(), "pid": os.getpid()}

    def poll(self) -> tuple:
        with self.box.lock:
            metrics, self.box.metrics = self.box.metrics, []
            return self.box.fraction, self.box.message, metrics, self.box.final

    def cancel(self) -> None:
        self.box.cancel.set()


class RayJobRunner(JobRunner):
    """core.runtime.jobs.JobRunner whose worker processes are Ray actors placed by the resource each job asks for."""

    def __init__(self, cfg: RaySettings | None = None, limits: dict[str, int] | None = None) -> None:
        super().__init__(limits, workers=True)
        self.cfg = cfg or RaySettings.from_env()

    def gpus_available(self) -> float:
        """A job's ``device`` is judged by the cluster, not by this front-end (core.runtime.jobs.resource_for): "auto"
        asks for a GPU when any node has one (the job then resolves "auto" to the GPU Ray gives it)."""
        return float(ray.cluster_resources().get("GPU", 0.0))

    def _context(self):
        return types.SimpleNamespace(Event=threading.Event)  # Cancel crosses to the actor by a call, not an Event

    def actor_options(self, resource: str) -> dict:
        if resource == "gpu":
            return {"num_gpus": self.cfg.job_gpus, "num_cpus": 1}
        return {"num_cpus": 1}

    def _run_process(self, job: Job, payload: bytes) -> None:
        actor = None
        try:
            # @ray.remote adds .options: mypy does not apply a class decorator's return type (ray is untyped here)
            actor = JobWorker.options(**self.actor_options(job.resource)).remote()  # type: ignore[attr-defined]
            threads = worker_threads(job.resource, self.limits)
            started = actor.start.remote(payload, threads, job.name, job.resource)
            job.message = msg("progress.waiting_for_node", resource=job.resource.upper())
            while True:  # placement: Ray holds the actor until a node has the resource
                if job.cancel_requested:
                    job.status, job.message = CANCELLED, msg("progress.cancelled_before_start")
                    return
                ready, _ = ray.wait([started], timeout=POLL_S)
                if ready:
                    break
            job.placement = ray.get(started)
            job.message = msg("progress.starting")
            cancelled_at = None
            final = None
            while final is None:
                if job.cancel_requested and cancelled_at is None:
                    cancelled_at = time.time()
                    actor.cancel.remote()
                if cancelled_at is not None and time.time() - cancelled_at > CANCEL_GRACE_S:
                    final = ("cancelled",)
                    break
                try:
                    fraction, message, metrics, final = ray.get(actor.poll.remote(), timeout=30)
                except (GetTimeoutError, ActorUnavailableError):
                    continue  # a slow or briefly unreachable node: ask again
                job.report(fraction, message, metrics)
                if final is None:
                    time.sleep(POLL_S)
            job.settle(final)
        except RayActorError as e:  # the node (or the actor's process) died under the job
            why = msg("jobs.node_lost_why.node_left" if "node" in str(e).lower() else "jobs.node_lost_why.process_died")
            job.settle(("error", msg("jobs.node_lost", why=why), str(e)))
        except Exception as e:  # noqa: BLE001 - the actor could not even start
            job.settle(failed(e, job.name))
        finally:
            if actor is not None:
                try:
                    ray.kill(actor)
                except Exception:  # noqa: BLE001 - already dead with its node
                    pass
            self._finish(job, gpu_in_this_process=False)

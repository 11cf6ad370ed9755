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

import pickle
import threading
import time
import traceback
import types
from typing import Any

import ray

from core.runtime import jobs as J
from core.runtime.backend.base import use
from core.runtime.backend.inprocess import InProcessBackend
from core.runtime.backend.ray_settings import RaySettings

POLL_S = 0.25
LOST = ("The cluster node running this job went away ({why}). Nothing on the front-end was lost; start the job "
        "again and Ray places it on a node that is up.")


class _ActorContext:
    """JobContext's interface inside the actor: progress is kept for the front-end's next poll."""

    def __init__(self, box: "_Box") -> None:
        self._box = box

    @property
    def cancelled(self) -> bool:
        return self._box.cancel.is_set()

    def check_cancelled(self) -> None:
        if self.cancelled:
            raise J.JobCancelled()

    def progress(self, fraction: float, message: str = "", **metrics: Any) -> None:
        with self._box.lock:
            self._box.fraction = float(min(max(fraction, 0.0), 1.0))
            if message:
                self._box.message = message
            if metrics:
                self._box.metrics.append(dict(metrics))
        self.check_cancelled()

    def flush(self) -> None:
        """Nothing to send: the front-end polls."""


class _Box:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cancel = threading.Event()
        self.fraction, self.message = 0.0, ""
        self.metrics: list[dict] = []
        self.final: tuple | None = None


@ray.remote(max_concurrency=4)
class JobWorker:
    """One job's process on the cluster: ``start`` runs the job on a thread; ``poll`` and ``cancel`` answer meanwhile
    (a threaded actor)."""

    def __init__(self) -> None:
        use(InProcessBackend())  # the job's model calls run here, in its own process
        self.box = _Box()

    def start(self, payload: bytes, threads: int, name: str, resource: str) -> dict:
        import os

        if resource != "gpu":  # Ray hides no GPU from an actor that asked for none: a CPU job must not take one
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
        import torch

        torch.set_num_threads(threads)
        J._lower_priority()
        box = self.box

        def run() -> None:
            ctx = _ActorContext(box)
            try:
                fn = pickle.loads(payload)
                ctx.check_cancelled()
                final: tuple = ("done", fn(ctx))
            except J.JobCancelled:
                final = ("cancelled",)
            except BaseException as e:  # noqa: BLE001 - every failure must reach the page as a message
                final = ("error", J.describe_error(e, name), traceback.format_exc())
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


class RayJobRunner(J.JobRunner):
    """core.runtime.jobs.JobRunner whose worker processes are Ray actors placed by the resource each job asks for."""

    def __init__(self, cfg: RaySettings | None = None, limits: dict[str, int] | None = None) -> None:
        super().__init__(limits, workers=True)
        self.cfg = cfg or RaySettings.from_env()

    def submit(self, name, fn, resource="cpu", owner=None, device=None):
        """As core.runtime.jobs.JobRunner.submit, but ``device`` is judged by the cluster, not by this front-end: "auto" asks
        for a GPU when any node has one (the job then resolves "auto" to the GPU Ray gives it)."""
        if device is not None:
            resource, device = self.resource_for(device), None
        return super().submit(name, fn, resource=resource, owner=owner, device=device)

    @staticmethod
    def resource_for(device: str) -> str:
        from core.registry import ModelLoadError

        gpus = float(ray.cluster_resources().get("GPU", 0.0))
        if device == "cuda" and not gpus:
            raise ModelLoadError("No node of the Ray cluster has a GPU: pick device auto or cpu, or add a GPU worker.")
        return "gpu" if device in ("cuda", "auto") and gpus else "cpu"

    def _context(self):
        return types.SimpleNamespace(Event=threading.Event)  # Cancel crosses to the actor by a call, not an Event

    def actor_options(self, resource: str) -> dict:
        if resource == "gpu":
            return {"num_gpus": self.cfg.job_gpus, "num_cpus": 1}
        return {"num_cpus": 1}

    def _run_process(self, job: J.Job, payload: bytes) -> None:
        from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

        actor = None
        try:
            actor = JobWorker.options(**self.actor_options(job.resource)).remote()
            threads = J._worker_threads(job.resource, self.limits)
            started = actor.start.remote(payload, threads, job.name, job.resource)
            job.message = f"waiting for a node with a free {job.resource.upper()}"
            while True:  # placement: Ray holds the actor until a node has the resource
                if job._cancel.is_set():
                    job.status, job.message = J.CANCELLED, "cancelled before it started"
                    return
                ready, _ = ray.wait([started], timeout=POLL_S)
                if ready:
                    break
            job.placement = ray.get(started)
            job.message = "starting"
            cancelled_at = None
            final = None
            while final is None:
                if job._cancel.is_set() and cancelled_at is None:
                    cancelled_at = time.time()
                    actor.cancel.remote()
                if cancelled_at is not None and time.time() - cancelled_at > J.CANCEL_GRACE_S:
                    final = ("cancelled",)
                    break
                try:
                    fraction, message, metrics, final = ray.get(actor.poll.remote(), timeout=30)
                except (GetTimeoutError, ActorUnavailableError):
                    continue  # a slow or briefly unreachable node: ask again
                job.progress = fraction
                if message:
                    job.message = message
                job.metrics.extend(metrics)
                if final is None:
                    time.sleep(POLL_S)
            if final[0] == "done":
                job.result = final[1]
                job.status, job.progress, job.message = J.DONE, 1.0, "done"
            elif final[0] == "cancelled":
                job.status, job.message = J.CANCELLED, "cancelled"
            else:
                job.status, job.error, job.message, job.error_detail = J.ERROR, final[1], "failed", final[2]
        except RayActorError as e:  # the node (or the actor's process) died under the job
            why = "its node left the cluster" if "node" in str(e).lower() else "its process died"
            job.status, job.error, job.message = J.ERROR, LOST.format(why=why), "failed"
            job.error_detail = str(e)
        except Exception as e:  # noqa: BLE001 - the actor could not even start
            job.status, job.error, job.message = J.ERROR, J.describe_error(e, job.name), "failed"
            job.error_detail = traceback.format_exc()
        finally:
            if actor is not None:
                try:
                    ray.kill(actor)
                except Exception:  # noqa: BLE001 - already dead with its node
                    pass
            self._finish(job, gpu_in_this_process=False)

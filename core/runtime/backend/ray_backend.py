"""The Ray backend: models on Ray Serve replicas, jobs on Ray actors, rooms on a named actor.

Chosen with ``ENCODERLAB_BACKEND=ray``. Its settings (read once, when the backend starts):

========================================  =======  ===========================================================
``ENCODERLAB_RAY_ADDRESS``                (empty)  the cluster (``ray://`` or ``host:port``); empty starts a local Ray
``ENCODERLAB_RAY_CPUS``                   (all)    CPUs of a local Ray (tests give 2)
``ENCODERLAB_RAY_REPLICAS``               1        replicas per loaded model
``ENCODERLAB_RAY_REPLICA_CPUS``           1        CPUs Ray reserves for a replica
``ENCODERLAB_RAY_REPLICA_THREADS``        = CPUs   torch threads in a replica
``ENCODERLAB_RAY_REPLICA_GPUS``           0        GPUs per replica (0.5 puts two replicas on one GPU)
``ENCODERLAB_RAY_JOB_GPUS``               1        GPUs a "gpu" job asks for (a "cpu" job asks for one CPU)
``ENCODERLAB_RAY_MAX_MODELS``             8        model deployments this front-end keeps; the oldest goes first
``ENCODERLAB_BATCH_WINDOW_MS``, ``..._MAX_BATCH``  the batch window and largest batch, as in-process
========================================  =======  ===========================================================

Every node must import the same ``core`` package: a local Ray gets this checkout on its workers' PYTHONPATH, and a
cluster's nodes run the same image (docker-compose.yml).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import Any

import ray  # here, so a missing Ray is one clear ImportError when the backend is chosen
from ray import serve
from ray.serve.exceptions import DeploymentUnavailableError

from core.base import settings as server_settings
from core.runtime.backend.base import Backend, BackendError, op_name
from core.runtime.backend.model_handles import ModelHandles
from core.runtime.backend.ray_jobs import RayJobRunner
from core.runtime.backend.ray_replica import ModelReplica
from core.runtime.backend.ray_rooms import RayRoomStore
from core.runtime.backend.ray_settings import RaySettings, worker_env

NAMESPACE = "encoderlab"


def connect(cfg: RaySettings) -> None:
    """Join the cluster at ``cfg.address`` (or start a local Ray) and start Serve without an HTTP proxy (the
    front-ends call deployments through handles). Raises BackendError saying what to check."""
    if not ray.is_initialized():
        env = worker_env()
        try:
            if cfg.address:
                ray.init(address=cfg.address, namespace=NAMESPACE, runtime_env={"env_vars": env}, log_to_driver=False)
            else:
                # "local": a Ray of our own, never a cluster another process started on this machine
                ray.init(
                    address="local",
                    num_cpus=cfg.cpus,
                    include_dashboard=False,
                    namespace=NAMESPACE,
                    runtime_env={"env_vars": env},
                    log_to_driver=False,
                )
        except Exception as e:  # noqa: BLE001 - ConnectionError, RuntimeError, ...: the operator needs the text
            where = cfg.address or "a local Ray"
            raise BackendError(
                f"Could not start or join Ray at {where} ({type(e).__name__}: {e}). Check "
                "ENCODERLAB_RAY_ADDRESS and that the head node is up (`ray status`)."
            ) from None
    serve.start(proxy_location="Disabled")


def app_name(recipe: tuple) -> str:
    """The Serve application of one model: the same recipe gives the same name on every front-end."""
    return "m-" + hashlib.sha1(repr(recipe).encode()).hexdigest()[:16]


class RayBackend(Backend):
    name = "ray"

    def __init__(self, cfg: RaySettings | None = None) -> None:
        self.cfg = cfg or RaySettings.from_env()
        connect(self.cfg)
        self._lock = threading.Lock()
        self._models = ModelHandles(self.cfg.max_models)  # bounded by cfg.max_models, oldest deleted first
        self._runner = None
        self._store = None

    @classmethod
    def from_settings(cls) -> RayBackend:
        return cls(RaySettings.from_env())

    @property
    def recipes(self) -> dict[str, tuple]:
        """Application name -> recipe of the models this front-end keeps a handle of."""
        return self._models.recipes

    @property
    def address(self) -> str:
        """The cluster's address, for another process to join (``ENCODERLAB_RAY_ADDRESS``)."""
        return ray.get_runtime_context().gcs_address

    # ------------------------------------------------------------------------------------------- model tier
    def handle(self, recipe: tuple):
        """The deployment handle of ``recipe``'s model, deploying it first when no front-end has yet."""
        name = app_name(recipe)
        h = self._models.get(name)
        if h is not None:
            return h
        with self._models.deploying(name):  # one deployment per model even when several sessions ask at once
            h = self._models.get(name)
            if h is not None:
                return h
            h = self._existing(name)
            if h is None:
                s = server_settings.current()
                opts: dict[str, Any] = {"num_cpus": self.cfg.replica_cpus}
                if self.cfg.replica_gpus:
                    opts["num_gpus"] = self.cfg.replica_gpus
                # @serve.deployment adds .options: mypy does not apply a class decorator's return type
                app = ModelReplica.options(  # type: ignore[attr-defined]
                    num_replicas=self.cfg.replicas,
                    ray_actor_options=opts,
                    max_ongoing_requests=max(16, 2 * s.max_batch),
                ).bind(recipe, self.cfg.replica_threads, s.max_batch, s.batch_window_ms / 1000.0)
                try:
                    h = serve.run(app, name=name, route_prefix=None)
                except Exception as e:  # noqa: BLE001 - a replica that cannot load its model says why
                    raise BackendError(
                        f"The model tier could not start {recipe[1]!r}: {type(e).__name__}: {e}"
                    ) from None
            for old in self._models.put(name, h, recipe):
                try:
                    serve.delete(old, _blocking=False)
                except Exception:  # noqa: BLE001 - already gone (another front-end deleted it)
                    pass
            return h

    @staticmethod
    def _existing(name: str):
        try:
            apps = serve.status().applications
        except Exception:  # noqa: BLE001
            return None
        if name in apps and str(apps[name].status).endswith("RUNNING"):
            return serve.get_app_handle(name)
        return None

    def forget(self, recipe: tuple) -> None:
        """Drop the cached handle (its application was deleted elsewhere): the next call deploys again."""
        self._models.forget(app_name(recipe))

    def _remote(self, recipe: tuple, send: Callable[[Any], Any]) -> Any:
        h = self.handle(recipe)
        try:
            status, value = send(h)
        except DeploymentUnavailableError:  # its application was deleted (by another front-end): deploy it once more
            self.forget(recipe)
            status, value = send(self.handle(recipe))
        if status == "err":
            raise value
        return value

    def batched(self, obj, op, fn, item):
        recipe = getattr(obj, "recipe", None)
        if recipe is None:  # made here: nothing elsewhere can rebuild it
            return fn(obj, [item])[0]
        name = op_name(fn)
        return self._remote(recipe, lambda h: h.batched.remote(op, name, item).result())

    def call(self, obj, fn, args, kwargs, progress=None):
        recipe = getattr(obj, "recipe", None)
        if recipe is None:
            if progress is not None:
                kwargs = {**kwargs, "progress": progress}
            return fn(obj, *args, **kwargs)
        name = op_name(fn)
        if progress is None:
            return self._remote(recipe, lambda h: h.call.remote(name, args, kwargs).result())
        return self._remote(
            recipe, lambda h: _follow(h.options(stream=True).stream.remote(name, args, kwargs), progress)
        )

    def prepare(self, obj) -> None:
        """Deploy ``obj``'s model now, in the background (about 14 s here), so the page's first prediction does not
        wait for it from the start; a failure is left for that prediction to report."""
        recipe = getattr(obj, "recipe", None)
        if recipe is None or app_name(recipe) in self._models:
            return

        def deploy() -> None:
            try:
                self.handle(recipe)
            except Exception:  # noqa: BLE001 - the first call on the model raises it with its message
                pass

        threading.Thread(target=deploy, daemon=True, name=f"deploy {app_name(recipe)}").start()

    def runs_on(self, obj) -> str:
        if getattr(obj, "recipe", None) is None:
            return super().runs_on(obj)
        n = self.cfg.replicas
        share = f" × {self.cfg.replica_gpus:g} GPU" if self.cfg.replica_gpus else " (CPU)"
        return f"Ray Serve, {n} replica{'s' if n != 1 else ''}{share}"

    def where(self, obj) -> list[dict]:
        """Which node, process and device each replica of ``obj``'s model runs on (tests and the benchmark)."""
        h = self.handle(obj.recipe)
        return [h.where.remote().result() for _ in range(2 * self.cfg.replicas)]

    # ------------------------------------------------------------------------------------------- jobs, rooms
    def job_runner(self):
        with self._lock:
            if self._runner is None:
                self._runner = RayJobRunner(self.cfg)
            return self._runner

    def room_store(self):
        with self._lock:
            if self._store is None:
                self._store = RayRoomStore()
            return self._store


def _follow(gen, progress: Callable[..., Any]) -> tuple[str, Any]:
    """Read a replica's stream: hand each progress call to ``progress`` and return the final outcome. When
    ``progress`` raises (the user pressed Cancel), the stream is cancelled, which stops the replica's op."""
    for kind, *rest in gen:
        if kind == "progress":
            a, kw = rest
            try:
                progress(*a, **kw)
            except BaseException:
                gen.cancel()
                raise
            continue
        if kind == "stopped":
            return "err", BackendError("The replica stopped this run.")
        return kind, rest[0]
    return "err", BackendError("The model replica ended the run without a result.")

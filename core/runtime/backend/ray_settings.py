"""The Ray backend's settings (read from the environment when the backend starts; the table is in
core.runtime.backend.ray_backend's docstring), and the environment its replicas and job actors get."""

from __future__ import annotations

import os
from dataclasses import dataclass

from core.base.paths import REPO_ROOT
from core.base.settings import env_float, env_int


@dataclass(frozen=True)
class RaySettings:
    address: str = ""
    cpus: int | None = None
    replicas: int = 1
    replica_cpus: float = 1.0
    replica_threads: int = 1
    replica_gpus: float = 0.0
    job_gpus: float = 1.0
    max_models: int = 8

    @classmethod
    def from_env(cls) -> RaySettings:
        cpus_raw = os.environ.get("ENCODERLAB_RAY_CPUS", "").strip()
        replica_cpus = env_float("ENCODERLAB_RAY_REPLICA_CPUS", 1.0)
        return cls(
            address=os.environ.get("ENCODERLAB_RAY_ADDRESS", "").strip(),
            cpus=env_int("ENCODERLAB_RAY_CPUS", 1, lo=1) if cpus_raw else None,
            replicas=env_int("ENCODERLAB_RAY_REPLICAS", 1, lo=1),
            replica_cpus=replica_cpus,
            replica_threads=env_int("ENCODERLAB_RAY_REPLICA_THREADS", max(1, int(replica_cpus)), lo=1),
            replica_gpus=env_float("ENCODERLAB_RAY_REPLICA_GPUS", 0.0),
            job_gpus=env_float("ENCODERLAB_RAY_JOB_GPUS", 1.0),
            max_models=env_int("ENCODERLAB_RAY_MAX_MODELS", 8, lo=1),
        )


def worker_env() -> dict[str, str]:
    """What this front-end's replicas and job actors must see as it does: this checkout on the import path, and its
    EncoderLab and Hugging Face settings (the bundled zoo, the runs folder, offline mode, hosted limits), so a recipe
    loads the same model there as here."""
    env = {k: v for k, v in os.environ.items() if k.startswith(("ENCODERLAB_", "HF_")) and k != "ENCODERLAB_BACKEND"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env["TOKENIZERS_PARALLELISM"] = "false"
    return env

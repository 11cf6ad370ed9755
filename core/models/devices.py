"""Why a GPU that the machine has is not used: nvidia-smi sees it, torch does not.

On Linux x86-64, PyPI's torch 2.13.0 wheel is the CUDA 13.0 build. On a host whose NVIDIA driver is older than
CUDA 13.0 needs (driver 580), ``torch.cuda.is_available()`` is simply False and everything runs on the CPU with
no word said. A CPU-only wheel, or a container started without ``--gpus``, looks the same from inside torch.
``diagnose`` compares what nvidia-smi reports (driver version, the highest CUDA version that driver supports,
the GPUs) with torch's own build, and says what is wrong and what fixes it. The pure functions take nvidia-smi's
text and torch's state as arguments, so every case can be checked on a machine without a GPU.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from core.base.messages import msg
from core.registry import ModelLoadError

# The oldest driver each CUDA major release runs on (NVIDIA's CUDA compatibility tables; within a major release,
# minor-version compatibility lets an older driver of the same major run newer toolkits).
MIN_DRIVER = {"13": "580.65.06", "12": "525.60.13", "11": "450.80.02"}
TORCH_VERSION_PIN = "2.13.0"
# torch 2.13's CUDA builds (PyTorch's support matrix) and the wheel index of each.
TORCH_CUDA_BUILDS = {"12.6": "cu126", "13.0": "cu130", "13.2": "cu132"}


@dataclass(frozen=True)
class NvidiaSmi:
    """What ``nvidia-smi`` printed: the driver, the highest CUDA version it supports, and the GPUs."""

    driver: str | None
    cuda: str | None
    gpus: tuple[str, ...]


@dataclass(frozen=True)
class GpuDiagnosis:
    """A GPU is there but torch cannot use it.

    ``problem``: "cpu_build" (torch has no CUDA), "driver_too_old" (torch's CUDA is newer than the driver
    supports) or "not_visible" (torch's CUDA fits the driver, yet it finds no device: CUDA_VISIBLE_DEVICES, a
    container started without --gpus, or a broken driver install). ``fix``: "install" (torch's CUDA ``build``
    with ``command``), "driver_or_install", "driver", "driver_then_install", "visible_devices" (the variable's
    ``value`` hides the GPUs) or "check_access" (``command`` prints torch's reason).
    """

    problem: str
    gpus: tuple[str, ...]
    driver: str
    driver_cuda: str
    torch_version: str
    torch_cuda: str | None
    fix: str
    min_driver: str = ""
    build: str = ""
    command: str = ""
    value: str = ""

    @property
    def gpu_summary(self) -> str:
        """The GPUs, counted: "2 x NVIDIA A100-SXM4-80GB, NVIDIA T4"."""
        counts: dict[str, int] = {}
        for g in self.gpus:
            counts[g] = counts.get(g, 0) + 1
        return ", ".join(f"{n} x {g}" if n > 1 else g for g, n in counts.items())

    def message(self) -> str:
        """The diagnosis in English (the app shows its translations of the same fields)."""
        seen = (
            f"nvidia-smi sees {self.gpu_summary} (driver {self.driver}, CUDA up to {self.driver_cuda}), "
            "but torch cannot use it, so EncoderLab runs on the CPU."
        )
        why = {
            "cpu_build": f"torch {self.torch_version} is a CPU-only build.",
            "driver_too_old": (
                f"torch {self.torch_version} is built for CUDA {self.torch_cuda}, which needs NVIDIA "
                f"driver >= {self.min_driver}."
            ),
            "not_visible": (
                f"torch {self.torch_version} (CUDA {self.torch_cuda}) fits this driver but finds no device."
            ),
        }[self.problem]
        fix = {
            "install": f"install torch's CUDA {self.build} build: {self.command}",
            "driver_or_install": (
                f"update the NVIDIA driver to >= {self.min_driver}, or install torch's CUDA "
                f"{self.build} build, which this driver runs: {self.command}"
            ),
            "driver": f"update the NVIDIA driver to >= {self.min_driver}",
            "driver_then_install": (
                f"update the NVIDIA driver to >= {self.min_driver}, then install torch's CUDA "
                f"{self.build} build: {self.command}"
            ),
            "visible_devices": f"CUDA_VISIBLE_DEVICES={self.value!r} hides every GPU: unset it or set it to 0",
            "check_access": (
                "check that this process can open the GPU (in Docker: --gpus all with the NVIDIA "
                f"Container Toolkit); `{self.command}` prints torch's reason"
            ),
        }[self.fix]
        return f"{seen} {why} Fix: {fix}."


_HEADER = re.compile(r"Driver Version:\s*([\d.]+).*?CUDA Version:\s*([\d.]+)", re.S)
# a GPU row of the default table: "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:19:00.0 Off |"
_GPU_ROW = re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off)\s+\|\s+[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:", re.M)


def parse_nvidia_smi(text: str) -> NvidiaSmi | None:
    """Parse the default output of ``nvidia-smi`` (its table). None when it lists no GPU."""
    gpus = tuple(f"{m.group(2).strip()}" for m in _GPU_ROW.finditer(text or ""))
    if not gpus:
        return None
    h = _HEADER.search(text)
    return NvidiaSmi(driver=h.group(1) if h else None, cuda=h.group(2) if h else None, gpus=gpus)


def _major(v: str | None) -> int | None:
    try:
        return int(str(v).split(".")[0])
    except (TypeError, ValueError):
        return None


def _key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _pip(build: str) -> str:
    # uninstall first: pip counts an installed 2.13.0 of another build as already satisfying torch==2.13.0
    return (
        f".venv/bin/pip uninstall -y torch && .venv/bin/pip install torch=={TORCH_VERSION_PIN} "
        f"--index-url https://download.pytorch.org/whl/{TORCH_CUDA_BUILDS[build]}"
    )


class _Seen(TypedDict):
    """The GpuDiagnosis fields every diagnosis shares (what nvidia-smi and torch report)."""

    gpus: tuple[str, ...]
    driver: str
    driver_cuda: str
    torch_version: str
    torch_cuda: str | None


def diagnose(
    smi: str | None,
    cuda_available: bool,
    torch_version: str,
    torch_cuda: str | None,
    visible_devices: str | None = None,
) -> GpuDiagnosis | None:
    """What is wrong when nvidia-smi (its text ``smi``) shows a GPU and torch (``cuda_available``, built with
    CUDA ``torch_cuda``, None for a CPU build) cannot use it; None when there is nothing to say (no GPU seen, or
    torch uses it)."""
    seen = parse_nvidia_smi(smi or "")
    if seen is None or cuda_available:
        return None
    base = _Seen(
        gpus=seen.gpus,
        driver=seen.driver or "?",
        driver_cuda=seen.cuda or "?",
        torch_version=torch_version,
        torch_cuda=torch_cuda,
    )
    dmajor, tmajor = _major(seen.cuda), _major(torch_cuda)
    # The torch 2.13 CUDA builds this driver runs: those up to its CUDA version first, then (minor-version
    # compatibility) a newer one of the same major release; the last in the list is the one to suggest.
    builds = sorted(TORCH_CUDA_BUILDS, key=_key)
    fits = [c for c in builds if seen.cuda and _key(c) <= _key(seen.cuda)] or [
        c for c in builds if dmajor is not None and _major(c) == dmajor
    ][:1]
    if torch_cuda is None:
        if fits:
            return GpuDiagnosis("cpu_build", fix="install", build=fits[-1], command=_pip(fits[-1]), **base)
        return GpuDiagnosis(
            "cpu_build",
            fix="driver_then_install",
            min_driver=MIN_DRIVER["12"],
            build="12.6",
            command=_pip("12.6"),
            **base,
        )
    need = MIN_DRIVER.get(str(tmajor), "")
    if dmajor is not None and tmajor is not None and dmajor < tmajor:
        if fits:
            return GpuDiagnosis(
                "driver_too_old",
                fix="driver_or_install",
                min_driver=need,
                build=fits[-1],
                command=_pip(fits[-1]),
                **base,
            )
        return GpuDiagnosis("driver_too_old", fix="driver", min_driver=need, **base)
    if visible_devices is not None and visible_devices.strip() in ("", "-1", "none", "void", "NoDevFiles"):
        return GpuDiagnosis("not_visible", fix="visible_devices", value=visible_devices, min_driver=need, **base)
    return GpuDiagnosis(
        "not_visible",
        fix="check_access",
        min_driver=need,
        command='.venv/bin/python -c "import torch; torch.cuda.init()"',
        **base,
    )


def run_nvidia_smi(timeout: float = 10.0) -> str | None:
    """nvidia-smi's default output, or None where it is not installed or fails (no driver, no GPU)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        p = subprocess.run([exe], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout if p.returncode == 0 else None


def gpu_diagnosis() -> GpuDiagnosis | None:
    """The diagnosis for this machine and this process's torch (runs nvidia-smi once; callers cache it)."""
    import torch

    smi = run_nvidia_smi()
    if smi is None:
        return None
    return diagnose(
        smi,
        torch.cuda.is_available(),
        torch.__version__.split("+")[0],
        torch.version.cuda,
        os.environ.get("CUDA_VISIBLE_DEVICES"),
    )


if __name__ == "__main__":  # python -m core.models.devices: the same check from the command line
    d = gpu_diagnosis()
    print(d.message() if d else "nothing to report: no GPU seen by nvidia-smi, or torch uses it")


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cpu" or "cuda"
    name: str
    memory_gb: float | None
    torch_device: str


def resolve_device(choice: str = "auto") -> DeviceInfo:
    """auto -> cuda when present, else cpu. Raises ModelLoadError when cuda is asked for and there is none."""
    import torch

    if choice not in ("auto", "cpu", "cuda"):
        raise ModelLoadError(msg("devices.unknown_choice", choice=choice))
    has_cuda = torch.cuda.is_available()
    if choice == "cuda" and not has_cuda:
        raise ModelLoadError(msg("devices.no_gpu_here"))
    if choice == "cuda" or (choice == "auto" and has_cuda):
        props = torch.cuda.get_device_properties(0)
        return DeviceInfo("cuda", props.name, round(props.total_memory / 2**30, 1), "cuda")
    return DeviceInfo("cpu", _cpu_name(), None, "cpu")


def check_int8(quant: str, choice: str) -> None:
    """The int8 rule: dynamic int8 linears (core.models.int8) run on the CPU only, so int8 with a device choice that
    resolves to a GPU ("auto" on a GPU server, or "cuda") is refused here, with what to change. Raises
    ModelLoadError."""
    if quant == "int8" and resolve_device(choice).kind != "cpu":
        raise ModelLoadError(msg("devices.int8_cpu_only"))


def device_for_trained(trained_on: str) -> str:
    """The device choice for using a model fine-tuned on ``trained_on`` ("cpu", "cuda", ...): a model trained on the
    CPU is tried on the CPU; one trained on a GPU goes back to a GPU when this machine has one ("auto")."""
    return "cpu" if trained_on == "cpu" else "auto"


def _cpu_name() -> str:
    name = platform.processor() or platform.machine() or "CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} cores"


def is_oom(e: BaseException) -> bool:
    """True when ``e`` is an out-of-memory error: torch's (CUDA), Python's MemoryError, or a RuntimeError that
    says so (the CPU allocator's "can't allocate memory", CUDA's "out of memory" from older code paths)."""
    import torch  # lazy: as in resolve_device, this module is read by pages that never touch torch

    if isinstance(e, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(e).lower()
    return isinstance(e, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)

"""The warning for a GPU that torch cannot use (core.models.devices): in full on Home, one line in the sidebar."""

from __future__ import annotations

import shutil

import streamlit as st

from app.kit.i18n import t
from core.models.devices import GpuDiagnosis, gpu_diagnosis


@st.cache_resource(ttl=600, show_spinner=False)
def _diagnosis(nvidia_smi: str | None) -> GpuDiagnosis | None:
    # nvidia-smi takes ~0.1-1 s: once per process and per nvidia-smi found on PATH, refreshed every 10 minutes.
    return gpu_diagnosis() if nvidia_smi else None


def diagnosis() -> GpuDiagnosis | None:
    return _diagnosis(shutil.which("nvidia-smi"))


def _fields(d: GpuDiagnosis) -> dict:
    return dict(
        gpus=d.gpu_summary,
        driver=d.driver,
        cuda=d.driver_cuda,
        torch=d.torch_version,
        torch_cuda=d.torch_cuda or "-",
        min_driver=d.min_driver,
        build=d.build,
        command=d.command,
        value=d.value,
    )


def gpu_warning() -> None:
    """Home: what nvidia-smi sees, why torch cannot use it, and the fix."""
    d = diagnosis()
    if d is None:
        return
    f = _fields(d)
    st.warning(
        "\n\n".join(
            [
                t("home.gpu_unusable.seen", **f),
                t(f"home.gpu_unusable.{d.problem}", **f),
                t(f"home.gpu_unusable.fix.{d.fix}", **f),
            ]
        ),
        icon=":material/memory:",
    )


def sidebar_gpu_line(sb) -> None:
    """Sidebar: one line saying the GPU goes unused, pointing to Home for the fix."""
    d = diagnosis()
    if d is not None:
        sb.warning(t("home.gpu_unusable.sidebar", **_fields(d)), icon=":material/memory:")

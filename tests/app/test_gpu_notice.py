"""Home and the sidebar say so when nvidia-smi sees a GPU that torch cannot use (issue 22).

The nvidia-smi here is a script on PATH that prints a real driver-535 table (this machine has no GPU); torch's
state is this machine's own, so the test runs where torch cannot use a GPU, i.e. without CUDA.
"""

from __future__ import annotations

import os

import pytest
import torch

from tests.app.conftest import new_app
from tests.core.test_devices import SMI_535

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="torch uses the GPU here: nothing to warn about")


@pytest.fixture()
def nvidia_smi_with_a_gpu(tmp_path, monkeypatch):
    exe = tmp_path / "bin" / "nvidia-smi"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\ncat <<'SMI'\n" + SMI_535 + "SMI\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    return exe


def test_home_and_sidebar_say_the_gpu_is_unused_and_how_to_fix_it(use_tiny_zoo, nvidia_smi_with_a_gpu):
    at = new_app()
    assert not at.exception
    home = " ".join(w.value for w in at.main.warning)
    assert "GPU that torch cannot use" in home and "NVIDIA A100-SXM4-80GB" in home
    assert "535.161.08" in home and "CUDA up to 12.2" in home
    expected = "CPU-only build" if torch.version.cuda is None else "needs NVIDIA driver 580.65.06"
    assert expected in home
    assert "whl/cu126" in home  # the build this driver runs, as a command to paste
    side = " ".join(w.value for w in at.sidebar.warning)
    assert "GPU not used" in side and "535.161.08" in side
    at.sidebar.selectbox(key="ui.lang").set_value("zh").run()
    assert any("torch 无法使用它" in w.value for w in at.main.warning)


def test_no_warning_without_a_gpu(use_tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi anywhere
    at = new_app()
    assert not at.exception
    assert not any("GPU" in w.value for w in list(at.main.warning) + list(at.sidebar.warning))

"""core.models.devices: nvidia-smi's real table formats, and the diagnosis of a GPU that torch cannot use, for each
state torch can be in (passed as arguments, so every case runs on a machine without a GPU)."""

from __future__ import annotations

import pytest

from core.models.devices import diagnose, parse_nvidia_smi

# nvidia-smi's default table as drivers 525, 535 and 580 print it (the column layout changed in 535).
SMI_525 = """\
Tue Mar 14 10:02:11 2023
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 525.85.12    Driver Version: 525.85.12    CUDA Version: 12.0     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  Tesla T4            Off  | 00000000:00:1E.0 Off |                    0 |
| N/A   34C    P8     9W /  70W |      2MiB / 15360MiB |      0%      Default |
|                               |                      |                  N/A |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|        ID   ID                                                   Usage      |
|=============================================================================|
|  No running processes found                                                 |
+-----------------------------------------------------------------------------+
"""
SMI_535 = """\
Mon Jun  3 09:12:45 2024
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.161.08             Driver Version: 535.161.08   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |                    0 |
| N/A   33C    P0              62W / 400W |      4MiB / 81920MiB |      0%      Default |
|                                         |                      |             Disabled |
+-----------------------------------------+----------------------+----------------------+
|   1  NVIDIA A100-SXM4-80GB          On  | 00000000:0F:00.0 Off |                    0 |
| N/A   31C    P0              60W / 400W |      4MiB / 81920MiB |      0%      Default |
|                                         |                      |             Disabled |
+-----------------------------------------+----------------------+----------------------+
"""
SMI_580 = """\
Tue Dec  1 09:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.65.06              Driver Version: 580.65.06      CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA H200                    On  |   00000000:19:00.0 Off |                    0 |
| N/A   29C    P0             76W /  700W |       0MiB / 143771MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
"""


def test_parses_the_driver_the_cuda_it_supports_and_the_gpus():
    assert parse_nvidia_smi(SMI_525).__dict__ == dict(driver="525.85.12", cuda="12.0", gpus=("Tesla T4",))
    s = parse_nvidia_smi(SMI_535)
    assert (s.driver, s.cuda, s.gpus) == ("535.161.08", "12.2", ("NVIDIA A100-SXM4-80GB",) * 2)
    s = parse_nvidia_smi(SMI_580)
    assert (s.driver, s.cuda, s.gpus) == ("580.65.06", "13.0", ("NVIDIA H200",))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "No devices were found\n",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n",
    ],
)
def test_no_gpu_rows_means_nothing_to_say(text):
    assert parse_nvidia_smi(text) is None
    assert diagnose(text, False, "2.13.0", "13.0") is None


def test_nothing_to_say_when_torch_uses_the_gpu_or_there_is_none():
    assert diagnose(SMI_580, True, "2.13.0", "13.0") is None
    assert diagnose(None, False, "2.13.0", None) is None


def test_pypi_cuda13_wheel_on_a_driver_too_old_for_it():
    """The case the issue names: `make run` on a host with driver 535, torch 2.13.0 from PyPI (CUDA 13.0)."""
    d = diagnose(SMI_535, False, "2.13.0", "13.0")
    assert d.problem == "driver_too_old" and d.fix == "driver_or_install"
    assert d.min_driver == "580.65.06" and d.build == "12.6" and d.command.endswith("/whl/cu126")
    assert (d.driver, d.driver_cuda, d.torch_cuda) == ("535.161.08", "12.2", "13.0")
    msg = d.message()
    assert "sees 2 x NVIDIA A100-SXM4-80GB (" in msg and "driver 535.161.08" in msg and "CUDA up to 12.2" in msg
    assert ">= 580.65.06" in msg and "cu126" in msg


def test_a_driver_too_old_for_every_torch_build_only_needs_a_new_driver():
    old = SMI_525.replace(
        "Driver Version: 525.85.12    CUDA Version: 12.0", "Driver Version: 470.82.01    CUDA Version: 11.4"
    )
    d = diagnose(old, False, "2.13.0", "13.0")
    assert d.problem == "driver_too_old" and d.fix == "driver" and d.command == ""


@pytest.mark.parametrize("smi, build", [(SMI_535, "12.6"), (SMI_580, "13.0")])
def test_cpu_only_build_on_a_gpu_host_gets_the_cuda_build_its_driver_runs(smi, build):
    d = diagnose(smi, False, "2.13.0", None)
    assert d.problem == "cpu_build" and d.fix == "install" and d.build == build
    assert d.command.startswith(".venv/bin/pip uninstall -y torch && .venv/bin/pip install torch==2.13.0")
    assert d.command.endswith("/whl/cu" + build.replace(".", ""))


def test_a_fitting_build_that_sees_no_device():
    assert diagnose(SMI_580, False, "2.13.0", "13.0").fix == "check_access"
    hidden = diagnose(SMI_580, False, "2.13.0", "13.0", visible_devices="")
    assert hidden.problem == "not_visible" and hidden.fix == "visible_devices" and hidden.value == ""
    assert "CUDA_VISIBLE_DEVICES=''" in hidden.message()

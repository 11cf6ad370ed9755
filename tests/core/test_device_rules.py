"""The device rules live once, in core.models.devices (#46 §3): which device a fine-tuned model is used on, and the
int8-on-CPU rule that the sidebar applied by itself; their messages are catalogue kinds (中文 too)."""

from __future__ import annotations

import pytest

from core.base.messages import templates
from core.models import devices
from core.registry import ModelLoadError


def test_a_model_trained_on_the_cpu_is_used_on_the_cpu_one_trained_on_a_gpu_goes_back_to_one():
    assert devices.device_for_trained("cpu") == "cpu"
    assert devices.device_for_trained("cuda") == "auto" and devices.device_for_trained("cuda:0") == "auto"


def test_int8_is_refused_where_the_device_choice_resolves_to_a_gpu(monkeypatch):
    devices.check_int8("int8", "cpu")  # the CPU: allowed
    devices.check_int8("", "auto")  # no int8: nothing to check
    gpu = devices.DeviceInfo("cuda", "a GPU", 80.0, "cuda")
    monkeypatch.setattr(devices, "resolve_device", lambda choice="auto": gpu if choice != "cpu" else None)
    with pytest.raises(ModelLoadError) as e:
        devices.check_int8("int8", "auto")  # "auto" on a GPU server
    assert e.value.kind == "devices.int8_cpu_only"


def test_cuda_without_a_gpu_and_an_unknown_choice_are_catalogue_messages(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for choice, kind in (("cuda", "devices.no_gpu_here"), ("tpu", "devices.unknown_choice")):
        with pytest.raises(ModelLoadError) as e:
            devices.resolve_device(choice)
        assert e.value.kind == kind and templates()[kind]["zh"]

"""The process-wide model cache (app/kit/loaders.py) is keyed on the device a choice resolves to (issue 22, item 10):
on a GPU host "auto" and "cuda" are one model on the GPU, not two copies; here, "auto" and "cpu" are one."""

from __future__ import annotations

from app.kit.loaders import get_model
from core.models.devices import resolve_device
from core.models.loading import ModelSpec


def test_auto_and_the_device_it_resolves_to_share_one_cached_model(tiny_models):
    resolved = resolve_device("auto").kind  # "cpu" on this machine, "cuda" on a GPU host
    folder = str(tiny_models["bert"])
    a = get_model(ModelSpec("bert", folder, "auto"), "mlm")
    b = get_model(ModelSpec("bert", folder, resolved), "mlm")
    assert a is b
    assert a.device == resolved
    other = "cpu" if resolved == "cuda" else None
    if other:  # on a GPU host the CPU copy is a separate entry
        assert get_model(ModelSpec("bert", folder, other), "mlm") is not a

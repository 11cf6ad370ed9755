"""core.runtime.backend without Ray: the choice, its errors, the seams in this process, and that no page or app module asks
which backend is in use."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import core.runtime.backend as backend
from core.runtime.backend import BackendError, model_op
from core.runtime.backend.base import op_name, resolve_op
from core.runtime.backend.inprocess import InProcessBackend

ROOT = Path(__file__).resolve().parents[2]


def test_the_environment_chooses_once_and_bad_values_are_named(monkeypatch):
    monkeypatch.delenv("ENCODERLAB_BACKEND", raising=False)
    assert backend.chosen() == "inprocess"
    monkeypatch.setenv("ENCODERLAB_BACKEND", "Ray")
    assert backend.chosen() == "ray"
    monkeypatch.setenv("ENCODERLAB_BACKEND", "dask")
    with pytest.raises(ValueError, match="ENCODERLAB_BACKEND='dask'.*inprocess, ray"):
        backend.chosen()


def test_ray_missing_says_what_to_install(monkeypatch):
    monkeypatch.setenv("ENCODERLAB_BACKEND", "ray")
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    monkeypatch.delitem(sys.modules, "core.runtime.backend.ray_backend", raising=False)
    old = backend.use(None)
    try:
        with pytest.raises(BackendError, match=r"pip install -r requirements-ray.txt"):
            backend.current()
    finally:
        backend.use(old)


def test_model_op_keeps_progress_live_and_resolves_to_its_body():
    from core.inspect.attribution import attribute

    assert op_name(attribute) == "core.inspect.attribution:attribute"
    body = resolve_op("core.inspect.attribution:attribute")
    assert body is attribute.__wrapped__  # a replica runs the body, never the wrapper again
    seen = []

    class Fake:
        recipe = None

    @model_op
    def op(obj, x, progress=None):
        progress(0.5, "half")
        return x * 2

    assert op(Fake(), 21, progress=lambda f, m: seen.append((f, m))) == 42
    assert seen == [(0.5, "half")]


def test_in_process_batched_coalesces_under_its_op(tiny_models):
    from core.models.loading import ModelSpec, load
    from core.predict.fill_mask import FillMaskConfig, fill_mask, fill_mask_batch
    from core.runtime.serving import stats

    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="pretraining")
    assert lm.recipe == ("core.models.loading:load", (lm.spec,), {"task": "pretraining", "attentions": False})
    old = backend.use(InProcessBackend())
    try:
        before = stats(lm, "fill_mask").calls
        cfg = FillMaskConfig("the cat [MASK] .")
        one = fill_mask(lm, cfg)
        assert stats(lm, "fill_mask").calls == before + 1
        assert one.masks == fill_mask_batch(lm, [cfg])[0].masks
    finally:
        backend.use(old)


def test_no_page_or_app_module_asks_which_backend_is_in_use():
    pattern = re.compile(
        r"ENCODERLAB_BACKEND|core\.backend|\bimport ray\b|from ray\b|RayBackend|backend\.name|"
        r"InProcessBackend"
    )
    hits = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
        for folder in ("pages", "app")
        for p in sorted((ROOT / folder).rglob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not hits, "\n".join(hits)


def test_a_ray_models_deploy_lock_goes_with_its_handle():
    """The Ray backend keeps at most ``limit`` model handles (core.runtime.backend.model_handles): an evicted or
    forgotten model leaves no deploy lock behind, and neither does a deploy that failed, so the lock table cannot
    grow with every model ever asked for."""
    from core.runtime.backend.model_handles import ModelHandles

    models = ModelHandles(limit=2)
    for i in range(50):
        name = f"m-{i}"
        with models.deploying(name):
            assert models.get(name) is None and name in models.deploy_locks()
            gone = models.put(name, object(), ("recipe", name))
        assert gone == ([f"m-{i - 2}"] if i >= 2 else [])
    assert len(models) == 2 and set(models.recipes) == {"m-48", "m-49"}
    assert models.deploy_locks() == [], "a deploy lock outlived its model's handle"
    with pytest.raises(RuntimeError):
        with models.deploying("broken"):
            raise RuntimeError("the replica could not load its model")
    models.forget("m-49")
    assert "m-49" not in models and models.deploy_locks() == []


def test_concurrent_deploys_of_one_model_wait_for_each_other():
    import threading
    import time

    from core.runtime.backend.model_handles import ModelHandles

    models, deployed = ModelHandles(limit=4), []

    def ask() -> None:
        if models.get("m") is not None:
            return
        with models.deploying("m"):
            if models.get("m") is None:
                time.sleep(0.05)
                deployed.append(1)
                models.put("m", object(), ("recipe",))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert deployed == [1] and models.deploy_locks() == []

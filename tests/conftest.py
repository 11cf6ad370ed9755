"""Shared fixtures: tiny random models of every family, saved as real folders (real from_pretrained path)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from app.kit import i18n  # noqa: E402
from core.registry import FAMILIES as _REGISTRY  # noqa: E402
from core.registry import GENERIC, bundled_families  # noqa: E402

# Every registered family, read from the registry: a family added there is tested here with no edit.
FAMILIES = tuple(_REGISTRY)
GENERIC_KEY = GENERIC.key  # the generic family (any other masked-LM encoder): its tiny model is a DeBERTa-v2
BUNDLED_NAMES = {f.key: f.bundled for f in bundled_families()}


class TinyModels(Mapping):
    """family -> folder of a tiny random pretraining model (BERT/ALBERT with NSP/SOP heads) and its tokenizer,
    built on first use (a session that needs two families builds two). Iterating gives every registered family;
    the generic family's is there by key."""

    def __init__(self, base: Path):
        self.base, self.built = base, {}

    def __getitem__(self, fam: str) -> Path:
        if fam not in self.built:
            from core.models.tiny import make_tiny

            if fam not in FAMILIES and fam != GENERIC_KEY:
                raise KeyError(fam)
            self.built[fam] = make_tiny(fam, self.base / fam, seed=0)
        return self.built[fam]

    def __iter__(self):
        return iter(FAMILIES)

    def __len__(self) -> int:
        return len(FAMILIES)


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread_per_xdist_worker():
    """make test runs the non-browser tests on two pytest-xdist workers of a 2-core machine: with torch's default
    of one thread per core, each worker's two threads spin-wait for the other worker's and the same steps take
    several times the CPU. One thread each (a test that needs more sets it itself, and job workers set their own)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)


@pytest.fixture
def ui_lang():
    """Set the language of text built outside a script run (app.kit.i18n.language, a ContextVar): ``ui_lang("zh")``;
    each call holds until the test ends, and the test after starts from the default again."""
    with ExitStack() as stack:
        yield lambda code: stack.enter_context(i18n.language(code))


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> TinyModels:
    return TinyModels(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def tiny_zoo(tiny_models, tmp_path_factory) -> Path:
    """A zoo folder laid out like assets/models, holding the tiny models under the bundled names (the families
    EncoderLab ships a model of)."""
    zoo = tmp_path_factory.mktemp("zoo")
    for fam, name in BUNDLED_NAMES.items():
        (zoo / name).symlink_to(tiny_models[fam], target_is_directory=True)
    return zoo


@pytest.fixture()
def use_tiny_zoo(tiny_zoo, monkeypatch) -> Path:
    """Point the app's bundled ids (encoderlab/*) at the tiny zoo for this test."""
    monkeypatch.setenv("ENCODERLAB_ZOO", str(tiny_zoo))
    return tiny_zoo


@pytest.fixture(scope="session")
def planted():
    """The classifier trained so that one planted word decides its label (tests/planted.py), trained once per
    worker process for the attribution, faithfulness and counterfactual tests (none of them changes it)."""
    from tests.planted import planted_classifier

    return planted_classifier()


@pytest.fixture(params=FAMILIES)
def family(request) -> str:
    return request.param


E2E_TIMEOUT = 300  # s: a browser test starts a real server and Chromium, so it gets more than the default 120 s


def pytest_collection_modifyitems(config, items):
    """Every browser test is slow and gets E2E_TIMEOUT (unless it sets its own); a test marked gpu skips where torch
    sees no CUDA device."""
    import torch

    no_cuda = pytest.mark.skip(reason="needs a CUDA GPU (scripts/gpu_check.sh runs these on one)")
    for item in items:
        if "tests/e2e/" in item.nodeid.replace("\\", "/") or item.nodeid.startswith("e2e/"):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT))  # a test's own timeout marker is closer and wins
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(no_cuda)

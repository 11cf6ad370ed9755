"""Shared fixtures: tiny random models of every family, saved as real folders (real from_pretrained path)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FAMILIES = ("bert", "roberta", "albert", "distilbert")
BUNDLED_NAMES = {"bert": "bert-mini", "roberta": "roberta-mini", "albert": "albert-mini", "distilbert": "distilbert-mini"}


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    """family -> folder of a tiny random pretraining model (BERT/ALBERT with NSP/SOP heads) and its tokenizer."""
    from core.tiny import make_tiny

    base = tmp_path_factory.mktemp("tiny")
    return {f: make_tiny(f, base / f, seed=0) for f in FAMILIES}


@pytest.fixture(scope="session")
def tiny_zoo(tiny_models, tmp_path_factory) -> Path:
    """A zoo folder laid out like assets/models, holding the tiny models under the bundled names."""
    zoo = tmp_path_factory.mktemp("zoo")
    for fam, folder in tiny_models.items():
        (zoo / BUNDLED_NAMES[fam]).symlink_to(folder, target_is_directory=True)
    return zoo


@pytest.fixture()
def use_tiny_zoo(tiny_zoo, monkeypatch) -> Path:
    """Point the app's bundled ids (encoderlab/*) at the tiny zoo for this test."""
    monkeypatch.setenv("ENCODERLAB_ZOO", str(tiny_zoo))
    return tiny_zoo


@pytest.fixture(params=FAMILIES)
def family(request) -> str:
    return request.param


def pytest_collection_modifyitems(config, items):
    """Every browser test is slow; a test marked gpu skips where torch sees no CUDA device."""
    import torch

    no_cuda = pytest.mark.skip(reason="needs a CUDA GPU (scripts/gpu_check.sh runs these on one)")
    for item in items:
        if "tests/e2e/" in item.nodeid.replace("\\", "/") or item.nodeid.startswith("e2e/"):
            item.add_marker(pytest.mark.slow)
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(no_cuda)

"""Run estimates: head importance's exhaustive-check estimate scales with the work; the attributions estimate says
when a run is the first on a model (captum to load, nothing warm yet)."""

from __future__ import annotations

import sys

import pytest

from core.inspect import attribution_estimate as AE
from core.inspect.head_importance import exhaustive_seconds


def test_exhaustive_estimate_scales_with_the_work():
    bert_mini = exhaustive_seconds(6, 12, 384, 64)
    assert bert_mini == pytest.approx(33.0)  # what it is calibrated on: the bundled mini's measured run
    assert exhaustive_seconds(6, 12, 384, 16) == pytest.approx(bert_mini / 4)
    assert exhaustive_seconds(6, 12, 384, 64, "cuda") < bert_mini


def test_attribution_estimate_says_when_a_run_is_the_first(monkeypatch):
    import torch

    model = torch.nn.Linear(2, 2)
    monkeypatch.delitem(sys.modules, "captum.attr", raising=False)
    assert AE.first_run() and AE.first_run(model)  # captum not loaded yet: it will be
    monkeypatch.setitem(sys.modules, "captum.attr", object())
    assert not AE.first_run() and AE.first_run(model)  # loaded, but no run has finished on this model
    AE.mark_warm(model)
    assert not AE.first_run(model)

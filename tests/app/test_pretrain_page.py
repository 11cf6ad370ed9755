"""Pretraining lab page: the form adapts to the family's own pair head, a tiny run finishes as a background
job with curves and registers its model for the session picker, and bad requests give a message, not a crash."""
from __future__ import annotations

import pytest

from app import state
from core.jobs import runner
from core.pretrain.corpus import CorpusError
from core.pretrain.lab import LabLimits, LabRequest, prepare
from core.pretrain.train import PretrainError
from tests.app.conftest import new_app, page_path


@pytest.fixture()
def lab_env(monkeypatch, use_tiny_zoo):
    monkeypatch.setenv("ENCODERLAB_PRETRAIN_MAX_STEPS", "50")
    monkeypatch.setenv("ENCODERLAB_PRETRAIN_MAX_DOCS", "40")


def _page():
    at = new_app()
    at.switch_page(page_path("pretrain")).run()
    assert not at.exception, at.exception
    return at


def test_form_follows_the_family(lab_env):
    at = _page()
    assert any("NSP" in c.label for c in at.checkbox)
    at.selectbox(key="pretrain.family").set_value("albert").run()
    assert any("SOP" in c.label for c in at.checkbox)
    at.selectbox(key="pretrain.family").set_value("roberta").run()
    pair = [c for c in at.checkbox if c.key == "pretrain.pair.roberta"][0]
    assert pair.disabled and not pair.value


def test_a_tiny_run_finishes_and_is_registered(lab_env):
    at = _page()
    at.selectbox(key="pretrain.family").set_value("bert").run()
    at.number_input(key="pretrain.steps").set_value(3)
    at.button[0].click().run()
    assert not at.exception, at.exception
    jobs = [j for j in runner().jobs() if j.name.startswith("run 1: BERT")]
    assert jobs, "no job was submitted"
    runner().wait(jobs[-1], timeout=300)
    assert jobs[-1].status == "done", jobs[-1].error
    at.run()
    assert not at.exception, at.exception
    assert any("held-out top-1" in s.value for s in at.success)
    models = at.session_state[state.SESSION_MODELS]
    assert any(m.kind == "pretrained" and m.family == "bert" for m in models.values())


def test_bad_requests_give_messages(tmp_path):
    lim = LabLimits(max_steps=10, max_size="tiny")
    with pytest.raises(PretrainError, match="Steps must be"):
        prepare(LabRequest(family="bert", steps=11), tmp_path / "a", lim)
    with pytest.raises(PretrainError, match="over the limit"):
        prepare(LabRequest(family="bert", steps=5, size="mini"), tmp_path / "b", lim)
    with pytest.raises(CorpusError, match="binary"):
        prepare(LabRequest(family="bert", steps=5, upload=b"\x00\x01\x02" * 100), tmp_path / "c", lim)
    with pytest.raises(CorpusError, match="document boundaries"):
        prepare(LabRequest(family="albert", steps=5, upload=(" ".join(["word"] * 300)).encode()), tmp_path / "d", lim)
    with pytest.raises(CorpusError, match="empty"):
        prepare(LabRequest(family="roberta", steps=5, upload=b"\n\n"), tmp_path / "e", lim)


def test_cancel_stops_after_a_checkpoint(lab_env, tmp_path):
    import time

    from core.pretrain.lab import job, limits

    cfg = prepare(LabRequest(family="roberta", steps=50), tmp_path, limits())
    j = runner().submit("cancel-me", job(cfg), owner="test")
    deadline = time.time() + 120
    while not j.metrics and time.time() < deadline and not j.done:
        time.sleep(0.05)
    j.cancel()
    runner().wait(j, timeout=120)
    assert j.status == "cancelled", j.error
    assert (tmp_path / "model" / "checkpoint" / "state.pt").exists()
    assert j.metrics and j.metrics[-1]["step"] < 50

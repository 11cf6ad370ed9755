"""Pretraining lab page: the form adapts to the family's own pair head, a tiny run finishes as a background
job with curves and registers its model for the session picker, and bad requests give a message, not a crash."""

from __future__ import annotations

import pytest

from app.kit import state
from core.data.corpus import CorpusError
from core.runtime.backend import runner
from core.train.pretrain.lab import LabLimits, LabRequest, prepare
from core.train.pretrain.train import PretrainError
from tests.app.conftest import new_app, open_page, page_path


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
    # The finished run is in the session report once, keyed by its job id: config, held-out metrics, curves.
    entry = at.session_state["report.entries"][f"pretrain:{jobs[-1].id}"]
    assert entry.inputs["Family"] == "BERT" and entry.inputs["Steps"] == "3 / 3"
    assert entry.inputs["Corpus"] == "bundled corpus" and entry.inputs["Sentence-pair objective"] == "NSP"
    assert {r["held-out metric"] for r in entry.rows} >= {"MLM top-1", "MLM top-5", "sentence-pair accuracy"}
    assert len(entry.figures) == 3  # MLM loss, held-out top-5, NSP accuracy
    at.session_state["report.entries"] = {}  # what the sidebar's "Clear the report" does
    at.run()
    assert not at.session_state["report.entries"]  # a cleared report stays cleared


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

    from core.train.pretrain.lab import job, limits

    cfg = prepare(LabRequest(family="roberta", steps=50), tmp_path, limits())
    j = runner().submit("cancel-me", job(cfg), owner="test")
    deadline = time.time() + 120
    while not j.metrics and time.time() < deadline and not j.done:
        time.sleep(0.05)
    j.cancel()
    runner().wait(j, timeout=120)
    assert j.status == "cancelled", j.error
    from core.train.common import has_checkpoint

    assert has_checkpoint(tmp_path / "model" / "checkpoint")
    assert j.metrics and j.metrics[-1]["step"] < 50


# ---------------------------------------------------------------------------------------------- workshop mode
def _open(params: dict[str, str]):
    return open_page("pretrain", params)


def test_the_page_in_chinese(lab_env):
    from app.kit.i18n import catalog

    at = _open({"lang": "zh", "pretrain.family": "albert"})
    zh = catalog()
    assert at.title[0].value == zh["pretrain.title"]["zh"]
    assert any(zh["pretrain.pair_label.sop"]["zh"] in c.label for c in at.checkbox)
    assert zh["pretrain.no_runs"]["zh"] in " ".join(i.value for i in at.info)
    assert at.radio(key="pretrain.masking").value == "dynamic"  # values stay language-independent


def test_a_link_restores_the_options_but_starts_nothing(lab_env):
    before = len(runner().jobs())
    at = _open(
        {
            "pretrain.family": "albert",
            "pretrain.pair": "0",
            "pretrain.masking": "static",
            "pretrain.wwm": "1",
            "pretrain.size": "tiny",
            "pretrain.steps": "7",
            "pretrain.seed": "3",
            "pretrain.corpus": "upload",
        }
    )
    assert at.selectbox(key="pretrain.family").value == "albert"
    assert at.checkbox(key="pretrain.pair.albert").value is False
    assert at.radio(key="pretrain.masking").value == "static" and at.checkbox(key="pretrain.wwm").value is True
    assert at.selectbox(key="pretrain.size").value == "tiny"
    assert at.number_input(key="pretrain.steps").value == 7 and at.number_input(key="pretrain.seed").value == 3
    assert at.radio(key="pretrain.corpus").value == "upload" and at.get("file_uploader")
    assert any("Nothing runs until" in i.value for i in at.info)
    assert len(runner().jobs()) == before and not at.session_state["jobs.pretrain"]
    # Pressing Pretrain with "my own text file" and no file says so; still no job.
    at.button[0].click().run()
    assert any("Upload a .txt corpus first" in e.value for e in at.error)
    assert len(runner().jobs()) == before


def test_a_bad_link_value_falls_back_with_a_notice(lab_env):
    at = _open(
        {
            "pretrain.family": "roberta",
            "pretrain.pair": "1",
            "pretrain.steps": "999",
            "pretrain.size": "huge",
            "pretrain.masking": "dynamic",
        }
    )
    warning = " ".join(w.value for w in at.warning)
    assert "`pretrain.pair`" in warning and "`pretrain.steps`" in warning and "`pretrain.size`" in warning
    assert at.selectbox(key="pretrain.family").value == "roberta"
    pair = at.checkbox(key="pretrain.pair.roberta")
    assert pair.disabled and pair.value is False  # RoBERTa has no pair head, whatever the link says
    assert at.number_input(key="pretrain.steps").value == 50  # the default under this server's limit


def test_presenter_view_folds_size_steps_and_seed(lab_env):
    from app.kit.i18n import catalog

    at = _open({"present": "1"})
    settings = [e for e in at.expander if e.label == catalog()["presenter.settings"]["en"]]
    assert settings, [e.label for e in at.expander]
    assert {w.key for w in settings[0].number_input} == {"pretrain.steps", "pretrain.seed"}
    assert [w.key for w in settings[0].selectbox] == ["pretrain.size"]
    assert at.checkbox(key="pretrain.pair.bert") and at.button[0].label == "Pretrain"  # objectives and button stay

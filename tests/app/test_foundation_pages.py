"""AppTest drives the foundation pages headlessly: Home, Models, Speed, and the shared sidebar."""
from __future__ import annotations

import time

import pytest
from core.jobs import runner
from tests.app.conftest import new_app as _app, page_path


def test_home_lists_families_and_device(use_tiny_zoo):
    at = _app()
    text = " ".join(m.value for m in at.markdown)
    assert "EncoderLab" in at.title[0].value
    df = at.dataframe[0].value
    assert list(df["family"]) == ["BERT", "RoBERTa", "ALBERT", "DistilBERT"]
    assert any("CPU" in i.value or "GPU" in i.value for i in list(at.info) + list(at.success))
    assert "BERT" in text


def test_sidebar_family_changes_checkpoints_and_source(use_tiny_zoo):
    at = _app()
    assert at.sidebar.selectbox(key="sidebar.checkpoint").value == "encoderlab/bert-mini"
    at.sidebar.selectbox(key="sidebar.family").set_value("albert").run()
    cb = at.sidebar.selectbox(key="sidebar.checkpoint")
    assert cb.value == "encoderlab/albert-mini" and "albert-base-v2" in cb.options
    assert any("bundled" in c.value for c in at.sidebar.caption)


def test_sidebar_bad_inputs_show_messages(use_tiny_zoo, tmp_path):
    at = _app()
    at.sidebar.selectbox(key="sidebar.checkpoint").set_value("custom (Hub id or local folder)…").run()
    at.sidebar.text_input(key="sidebar.custom").set_value(str(tmp_path / "nope")).run()
    assert any("Not available" in w.value for w in at.sidebar.warning)
    at.sidebar.radio(key="sidebar.device").set_value("cuda").run()
    import torch
    if not torch.cuda.is_available():
        assert any("no usable GPU" in e.value for e in at.sidebar.error)
    assert not at.exception


def test_models_page_breakdown_and_calculator(use_tiny_zoo):
    at = _app()
    at.switch_page(page_path("models")).run()
    assert not at.exception
    claims = at.dataframe[0].value
    assert len(claims) == 10
    row = claims[claims["checkpoint"] == "bert-base-uncased"].iloc[0]
    assert row["backbone (M)"] == pytest.approx(109.48, abs=0.01) and row["seeds claim (M)"] == 110
    assert [m.value for m in at.metric][:2] == ["23.04M", "3.94M"]
    at.number_input(key="models.E").set_value(1024)
    at.button[0].click().run()  # the form's submit button
    assert any("larger than H" in e.value for e in at.error)


def test_speed_page_runs_a_background_job(use_tiny_zoo):
    at = _app()
    at.switch_page(page_path("speed")).run()
    assert not at.exception
    at.select_slider(key="speed.seq").set_value(16)
    at.select_slider(key="speed.batch").set_value(1)
    at.number_input(key="speed.reps").set_value(1)
    at.multiselect(key="speed.families").set_value(["bert", "distilbert"])
    at.button[0].click().run()
    assert not at.exception
    jobs = [j for j in runner().jobs() if j.name == "Speed"]
    assert jobs, "no job was submitted"
    runner().wait(jobs[-1], timeout=300)
    at.run()
    assert not at.exception
    assert any("Measured on" in s.value for s in at.success)
    cmp = at.dataframe[0].value
    assert "DistilBERT vs BERT" in list(cmp["comparison"])

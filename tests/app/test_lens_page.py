"""The Layer lens page (AppTest, tiny models): table + plots, bad input, stale results, tuned lens via a job."""

from __future__ import annotations

import json

import pytest

from core.predict.fill_mask import examples
from tests.app.conftest import click, page_for

SHOW = "Look through the layers"


@pytest.fixture()
def lens_env(use_tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_LENS_DIR", str(tmp_path / "lens"))
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    return tmp_path


def _charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _table_rows(at) -> list[str]:
    """The depth labels of the layers x top-k table (the heatmap's y)."""
    return next((list(d["y"]) for c in _charts(at) for d in c["data"] if d.get("type") == "heatmap"), [])


def test_page_shows_table_and_answer_plot(lens_env):
    at = page_for("lens")
    assert not at.get("plotly_chart")  # nothing before the button
    at.text_area(key="lens.text").set_value("The cat sat on the [MASK] and the [MASK] barked.")
    click(at, SHOW)
    assert not at.error
    rows = _table_rows(at)
    assert rows[0] == "embeddings" and rows[1:] == ["layer 1", "layer 2"]  # tiny models: 2 layers
    charts = _charts(at)
    assert len(charts) == 2  # the table and the answer across depth
    answer = charts[1]
    assert [d["type"] for d in answer["data"]] == ["scatter", "scatter"] and answer["layout"]["yaxis"]["type"] == "log"
    assert any("first becomes the lens's first choice" in m.value for m in at.markdown)
    at.selectbox(key="lens.mask").set_value(1).run()  # the second mask
    assert not at.exception and len(at.get("plotly_chart")) == 2


@pytest.mark.parametrize("text, message", [("No mask in this one.", "has no [MASK]"), ("  ", "empty")])
def test_bad_input_message(lens_env, text, message):
    at = page_for("lens")
    at.text_area(key="lens.text").set_value(text)
    click(at, SHOW)
    assert any(message in e.value for e in at.error) and not at.get("plotly_chart")
    at.radio(key="lens.mode").set_value("tuned").run()  # the message stays across reruns
    assert any(message in e.value for e in at.error)


def test_result_never_outlives_its_text_or_model(lens_env):
    at = page_for("lens")
    click(at, SHOW)
    assert _table_rows(at)
    other = examples("en")[1]
    at.selectbox(key="lens.example").set_value(other).run()  # the text changes outside the form
    assert at.text_area(key="lens.text").value == other
    assert not at.get("plotly_chart")
    click(at, SHOW)
    assert _table_rows(at)
    at.sidebar.selectbox(key="sidebar.family").set_value("distilbert").run()  # another model
    assert not at.get("plotly_chart")
    at.sidebar.selectbox(key="sidebar.family").set_value("bert").run()  # the same model and text again
    assert _table_rows(at)
    at.text_area(key="lens.text").set_value("no mask")
    click(at, SHOW)
    assert at.error and not at.get("plotly_chart")


def test_train_tuned_lens_then_switch(lens_env, monkeypatch):
    from app.kit import jobs_panel as jobs_ui
    from core.runtime.jobs import JobRunner

    threads = JobRunner(workers=False)  # the job on a thread here: a worker process costs seconds to start
    monkeypatch.setattr(jobs_ui, "runner", lambda: threads)
    runner = jobs_ui.runner
    at = page_for("lens", family="albert")
    click(at, SHOW)
    at.radio(key="lens.mode").set_value("tuned").run()
    assert any("no tuned lens" in i.value for i in at.info) and not at.get("plotly_chart")
    at.number_input(key="lens.steps").set_value(3)
    click(at, "Train tuned lens")
    job = runner().get(at.session_state["jobs.lens"][-1])
    runner().wait(job, timeout=180)
    assert job.status == "done", job.error
    at.run()
    assert not at.exception and not at.error
    charts = _charts(at)
    assert len(charts) == 3  # the tuned table, the answer plot, the KL per depth
    assert "tuned lens" in charts[0]["layout"]["title"]["text"]
    kl = charts[2]
    assert [d["name"] for d in kl["data"]] == ["raw lens", "tuned lens"] and list(kl["data"][0]["x"]) == [
        "embeddings",
        "layer 1",
    ]
    assert not any(b.label == "Train tuned lens" for b in at.button)
    at.radio(key="lens.mode").set_value("raw").run()  # the raw lens again, the KL plot stays
    charts = _charts(at)
    assert "raw lens" in charts[0]["layout"]["title"]["text"] and len(charts) == 3

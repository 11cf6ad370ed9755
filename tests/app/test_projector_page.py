"""The Projector page (AppTest, tiny models): word mode on pasted text, the depth slider redraws without a job,
bad input gets a message."""

from __future__ import annotations

import json
import re

import pytest

from tests.app.conftest import click, page_for

SHOW = "Project"
TEXT = "\n".join(
    [
        "The bank of the river was muddy after the rain.",
        "She paid the cheque into the bank on Monday.",
        "They sat on the bank and watched the boats.",
        "The bank raised its interest rates again.",
        "A heron stood on the far bank of the stream.",
        "He robbed a <b>bank</b> & ran.",
        "Bank holidays fall in May; banks close.",
    ]
)
OCCURRENCES = len(re.findall(r"\bbank\b", TEXT.lower()))  # 7: "Bank" counts, "banks" does not


@pytest.fixture()
def env(use_tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    return tmp_path


def _charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _fill(at, word="bank", text=TEXT):
    at.radio(key="projector.corpus").set_value("text")
    at.text_input(key="projector.word").set_value(word)
    at.text_area(key="projector.text").set_value(text)
    return click(at, SHOW)


def test_word_on_pasted_text_and_the_depth_slider(env):
    at = page_for("projector")
    assert not at.get("plotly_chart")
    _fill(at)
    assert not at.error, [e.value for e in at.error]
    charts = _charts(at)
    assert len(charts) == 2  # the map and the separation per depth
    traces = charts[0]["data"]
    assert {d["type"] for d in traces} == {"scattergl"}
    assert sum(len(d["text"]) for d in traces) == OCCURRENCES  # one point per occurrence of "bank"
    hovers = [h for d in traces for h in d["text"]]
    assert any("&lt;b&gt;<b>bank</b>&lt;/b&gt;" in h and "&amp;" in h for h in hovers)  # user text stays text
    assert "layer 2" in charts[0]["layout"]["title"]["text"]  # the last depth first (tiny models: 2 layers)
    assert [len(d["x"]) for d in charts[1]["data"]][0] == 3  # embeddings, layer 1, layer 2
    jobs = list(at.session_state["jobs.projector"]) if "jobs.projector" in at.session_state else []
    before = traces
    result = at.session_state["projector.result"]
    at.select_slider(key="projector.depth").set_value(0).run()  # the embeddings
    assert not at.exception
    after = _charts(at)[0]
    assert "embeddings" in after["layout"]["title"]["text"]
    assert [d["x"] for d in after["data"]] != [d["x"] for d in before]  # other coordinates ...
    assert (list(at.session_state["jobs.projector"]) if "jobs.projector" in at.session_state else []) == jobs
    assert at.session_state["projector.result"] is result  # ... from the same projection, not a new one
    at.radio(key="projector.color").set_value("layer").run()  # every depth in one map, the shown one in full
    names = [d["name"] for d in _charts(at)[0]["data"]]
    assert names == ["embeddings", "layer 1", "layer 2"]


BAD = [
    ("bnak", TEXT, "does not occur in your text. Near spellings that do: bank"),
    ("river bank", TEXT, "is not one word"),
    ("bank", "   ", "The text is empty"),
]


def test_bad_input_message(env):
    at = page_for("projector")
    for word, text, message in BAD:
        _fill(at, word, text)
        assert any(message in e.value for e in at.error), [e.value for e in at.error]
        assert not at.get("plotly_chart")
        at.run()
        assert any(message in e.value for e in at.error)  # the message stays across reruns


def test_more_points_than_the_page_waits_for_run_as_a_job(env):
    """PCA over more than INLINE_POINTS points reads that many contexts (minutes at 50k): a job with progress."""
    from core.represent.projector import INLINE_POINTS
    from core.runtime.backend import runner

    at = page_for("projector")
    at.number_input(key="projector.max_points").set_value(INLINE_POINTS + 1000)
    _fill(at)
    jobs = at.session_state["jobs.projector"]
    assert len(jobs) == 1 and not at.get("plotly_chart")
    job = runner().get(jobs[-1])
    runner().wait(job, timeout=120)
    assert job.status == "done", (job.status, job.error)
    at.run()
    assert sum(len(d["text"]) for d in _charts(at)[0]["data"]) == OCCURRENCES


def test_projector_scatter_names_the_methods_components(env):
    at = page_for("projector")
    _fill(at)
    layout = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]
    assert layout["xaxis"]["title"]["text"] == "PC 1" and layout["yaxis"]["title"]["text"] == "PC 2"

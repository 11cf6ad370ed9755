"""The Layer probes page (AppTest, tiny models): a small probe as a job -> charts, table and exports; bad input;
a result never shown for another model."""

from __future__ import annotations

import json

import pytest

from core.represent.bundled_corpus import corpus_sentences
from tests.app.conftest import click, page_for

RUN = "Run the probes"


@pytest.fixture()
def probes_env(use_tiny_zoo, tmp_path, monkeypatch):
    from app.kit import jobs_panel as jobs_ui
    from core.runtime.jobs import JobRunner

    monkeypatch.setenv("ENCODERLAB_PROBES_DIR", str(tmp_path / "probes"))
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    threads = JobRunner(workers=False)  # the job on a thread here: a worker process costs seconds to start
    monkeypatch.setattr(jobs_ui, "runner", lambda: threads)
    return threads


def _charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _fill(at, text: str, tasks: list[str], per_task: int = 40):
    at.radio(key="probes.source").set_value("paste")
    at.text_area(key="probes.text").set_value(text)
    at.multiselect(key="probes.tasks").set_value(tasks)
    at.number_input(key="probes.per_task").set_value(per_task)
    return click(at, RUN)


def test_small_probe_shows_charts_table_and_exports(probes_env):
    at = page_for("probes")
    assert not at.get("plotly_chart") and not at.error
    _fill(at, "\n".join(corpus_sentences("heldout")[:600]), ["length", "suffix"])
    assert not at.error, [e.value for e in at.error]
    job = probes_env.get(at.session_state["jobs.probes"][-1])
    probes_env.wait(job, timeout=120)
    assert job.status == "done", job.error
    at.run()
    assert not at.exception and not at.error
    acc, sel = _charts(at)
    names = [d["name"] for d in acc["data"]]
    assert names == [
        "Sentence length",
        "majority: Sentence length",
        "Suffix class (word)",
        "majority: Suffix class (word)",
    ]
    assert acc["data"][1]["line"]["dash"] == "dash" and list(acc["data"][0]["x"]) == [
        "embeddings",
        "layer 1",
        "layer 2",
    ]
    assert [d["type"] for d in sel["data"]] == ["bar", "scatter", "scatter"]  # selectivity, real, control
    assert any("Best depth per task" in m.value for m in at.markdown)
    assert any("not necessarily the best" in c.value for c in at.caption)
    table = at.dataframe[0].value
    assert list(table["Task"]) == [
        "Sentence length",
        "Suffix class (word)",
        "Suffix class (word): control",
        "Suffix class (word): selectivity",
    ]
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Download the table (CSV)", "Download the charts (HTML)"]
    at.sidebar.selectbox(key="sidebar.family").set_value("distilbert").run()  # another model: no stale result
    assert not at.get("plotly_chart")
    at.sidebar.selectbox(key="sidebar.family").set_value("bert").run()
    assert len(at.get("plotly_chart")) == 2
    click(at, RUN)  # the same model and inputs again: the saved result, no second job
    assert len(at.session_state["jobs.probes"]) == 1 and len(at.get("plotly_chart")) == 2
    assert any("saved result" in c.value for c in at.caption)


def test_bad_input_gets_a_message(probes_env):
    at = page_for("probes")
    _fill(at, "   ", ["length"])
    assert any("corpus is empty" in e.value for e in at.error) and not at.get("plotly_chart")
    at.run()  # the message stays across reruns
    assert any("corpus is empty" in e.value for e in at.error)
    _fill(at, "\n".join(corpus_sentences("heldout")[:300]), ["coord_inversion"])
    assert any('of the form "X, and Y."' in e.value and "at least 20" in e.value for e in at.error)
    _fill(at, "Some words here to read.", [])
    assert any("Pick at least one task" in e.value for e in at.error)
    at.radio(key="probes.source").set_value("upload")
    click(at, RUN)
    assert any("No file uploaded" in e.value for e in at.error)
    assert not at.session_state["jobs.probes"] if "jobs.probes" in at.session_state else True


def test_pasted_chinese_lines_are_probed_in_chinese(probes_env):
    """#46 §5, 10: pasted Chinese lines were refused ('no sentence of 4 to 60 words', words counted by spaces).
    Words are jieba's 词 now; the two tasks made of English grammar say so plainly, in 中文."""
    from app.kit import i18n
    from core.base.messages import templates
    from tests.app.conftest import open_page

    at = open_page("probes", state={i18n.LANG_KEY: "zh"})
    at.radio(key="probes.source").set_value("paste")
    at.text_area(key="probes.text").set_value("\n".join(corpus_sentences("heldout", "zh")[:300]))
    at.number_input(key="probes.per_task").set_value(40)
    at.button(key="probes.run").click().run()  # every task: two cannot read Chinese
    assert [e.value for e in at.error] == [templates()["probes.english_only"]["zh"]]
    at.multiselect(key="probes.tasks").set_value(["length", "bigram_shift", "odd_word"])
    at.button(key="probes.run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    job = probes_env.get(at.session_state["jobs.probes"][-1])
    probes_env.wait(job, timeout=120)
    assert job.status == "done", job.error
    assert [s.task for s in job.result.scores] == ["length", "bigram_shift", "odd_word"]


def test_after_a_run_the_estimate_is_about_what_runs_take_here(probes_env):
    """#46 §5, 10: the estimate said '9 s or more' for a 40 s run (the job's start, its model load and building the
    tasks are not timed). After a run on this model it is scaled by what that run took: 'About N s'."""
    at = page_for("probes")

    def estimate() -> str:
        return next(c.value for c in at.caption if "probe fits" in c.value)

    at.multiselect(key="probes.tasks").set_value(["length"])
    at.number_input(key="probes.per_task").set_value(40).run()
    assert " or more: " in estimate()
    click(at, RUN)
    job = probes_env.get(at.session_state["jobs.probes"][-1])
    probes_env.wait(job, timeout=120)
    assert job.status == "done", job.error
    at.run()
    assert estimate().startswith("About ") and " or more" not in estimate(), estimate()
    scale = next(iter(at.session_state["probes.estimate.scales"].values()))
    assert scale >= 1.0

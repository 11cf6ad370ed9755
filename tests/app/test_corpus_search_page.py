"""The Corpus search page (AppTest, tiny models): index a pasted corpus in a job, click a word, see the neighbours
and the histogram; a result never outlives its depth; bad input shows a message."""

from __future__ import annotations

import json

import pytest

from tests.app.conftest import page_for

CORPUS = "\n".join(
    [
        "The bank of the river was muddy.",
        "I put money in the bank.",
        "A cat sat on the mat.",
        "Dogs bark at night, loudly!",
        "The river <b>flows</b> past the old mill.",
    ]
)
BUILD = "FormSubmitter:corpus_search.form-Build index"


@pytest.fixture()
def cs_env(use_tiny_zoo, tmp_path, monkeypatch):
    from app.kit import jobs_panel as jobs_ui
    from core.base.caches import reset_caches
    from core.runtime.jobs import JobRunner

    monkeypatch.setenv("ENCODERLAB_CORPUS_INDEX_DIR", str(tmp_path / "index"))
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    reset_caches()  # no index loaded by an earlier test
    threads = JobRunner(workers=False)  # the job on a thread here: a worker process costs seconds to start
    monkeypatch.setattr(jobs_ui, "runner", lambda: threads)
    return threads


def _build(at, runner, button=BUILD):
    at.button(key=button).click().run()
    assert not at.exception, at.exception
    job = runner.get(at.session_state["jobs.corpus_search"][-1])
    runner.wait(job, timeout=120)
    assert job.status == "done", job.error
    at.run()
    assert not at.exception, at.exception
    return job


def _neighbours(at) -> list[str]:
    """The neighbour rows of the list on screen (each row's HTML)."""
    marker = '<div class="cs-row" data-testid="cs-neighbour">'
    return [row for h in at.get("html") for row in h.proto.body.split(marker)[1:]]


def _hist(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_index_click_a_word_and_a_new_depth(cs_env):
    at = page_for("corpus_search")
    assert any("Build index" in i.value for i in at.info)
    at.radio(key="corpus_search.source").set_value("paste").run()
    at.text_area(key="corpus_search.text").set_value(CORPUS)
    job = _build(at, cs_env)
    assert job.result.sentences == 5 and job.result.depth == 1 and job.result.kind == "exact"
    assert any("5 sentences" in s.value and "layer 1" in s.value for s in at.success)
    at.text_input(key="corpus_search.query").set_value("The river <b>flows</b> past the old mill.").run()
    pills = at.pills[0]
    assert "river" in pills.options and not _neighbours(at)  # nothing before a word is clicked
    pills.set_value(pills.options.index("river")).run()
    assert not at.exception and not at.error
    rows = _neighbours(at)
    assert len(rows) == 10 and "the query itself" in rows[0] and "<mark>river</mark>" in rows[0]
    assert "&lt;b&gt;flows&lt;/b&gt;" in rows[0] and "<b>flows" not in rows[0]  # user text stays text
    (hist,) = _hist(at)
    assert hist["data"][0]["type"] == "bar" and "river" in hist["data"][0]["x"]
    assert sum(hist["data"][0]["y"]) == 10 and "layer 1" in hist["layout"]["title"]["text"]
    # another depth: the layer-1 neighbours go, that depth's index is asked for
    at.select_slider(key="corpus_search.depth").set_value(2).run()
    assert not _neighbours(at) and not _hist(at)
    assert any("no index of this corpus at layer 2" in i.value for i in at.info)
    _build(at, cs_env, button="corpus_search.build_depth")
    at.pills[0].set_value(at.pills[0].options.index("river")).run()
    assert len(_neighbours(at)) == 10 and "layer 2" in _hist(at)[0]["layout"]["title"]["text"]
    # back to layer 1: the saved index loads at once, no job
    n_jobs = len(at.session_state["jobs.corpus_search"])
    at.select_slider(key="corpus_search.depth").set_value(1).run()
    assert any("layer 1" in s.value for s in at.success) and len(at.session_state["jobs.corpus_search"]) == n_jobs


def test_find_a_word_and_bad_input(cs_env):
    at = page_for("corpus_search")
    at.radio(key="corpus_search.source").set_value("paste").run()
    at.text_area(key="corpus_search.text").set_value("  \n\n ")
    at.button(key=BUILD).click().run()
    assert any("corpus is empty" in e.value for e in at.error) and "jobs.corpus_search" not in at.session_state
    at.text_area(key="corpus_search.text").set_value(CORPUS)
    _build(at, cs_env)
    at.text_input(key="corpus_search.find").set_value("zebra").run()
    assert any("'zebra' does not occur in the indexed corpus" in e.value for e in at.error)
    at.text_input(key="corpus_search.find").set_value("bank").run()
    assert at.text_input(key="corpus_search.query").value == "The bank of the river was muddy."
    assert len(_neighbours(at)) == 10  # the looked-up word is picked: its neighbours at once
    at.selectbox(
        key="corpus_search.found.{}.bank".format(at.session_state["corpus_search.result"].index_key)
    ).set_value(1).run()
    assert at.text_input(key="corpus_search.query").value == "I put money in the bank."
    assert "<mark>bank</mark>" in _neighbours(at)[0]


def test_only_words_with_a_token_of_their_own_are_offered(cs_env):
    """#46 §5, 11: the page offered words it then refused ('has no token of its own'); now it offers the words
    search accepts and names the others (here: the words past the 128-token cut of a long query)."""
    at = page_for("corpus_search")
    at.radio(key="corpus_search.source").set_value("paste").run()
    at.text_area(key="corpus_search.text").set_value(CORPUS)
    _build(at, cs_env)
    query = " ".join(["river"] * 150 + ["zebra"])
    at.text_input(key="corpus_search.query").set_value(query).run()
    pills = at.pills[0]
    assert 100 < len(pills.options) < 151 and "zebra" not in pills.options
    assert any("Not offered: river, zebra." in c.value for c in at.caption), [c.value for c in at.caption]
    pills.set_value(len(pills.options) - 1).run()  # the last word offered is accepted
    assert not at.exception and not at.error and _neighbours(at)

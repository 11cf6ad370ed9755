"""The fine-tune views (app/views/train/finetune*, walkthrough step 6): step 6 says what its runs measured, a
held-out chart with one evaluation is readable, the worst errors wrap, token runs have no pooling choice, and
Compare runs keeps sequence and token runs apart."""

from __future__ import annotations

import time
from types import SimpleNamespace as NS

import pytest
from streamlit.testing.v1 import AppTest

from app.kit.i18n import catalog, t
from app.kit.state import SESSION_ID
from app.views.start.walkthrough.step_finetune import verdict_text
from app.views.train.finetune_charts import curves
from core.walkthrough.checks import lr_verdict
from tests.app.conftest import open_page


# ---------------------------------------------------------------------------------------------- step 6
def _report(acc: float, losses, majority: float = 0.142):
    return NS(accuracy=acc, majority_rate=majority, history=tuple({"step": i, "loss": v} for i, v in enumerate(losses)))


SMOOTH, JUMPY = (1.8, 1.79, 1.78, 1.77, 1.76), (1.8, 1.2, 1.6, 0.9, 1.3)


def test_step6_says_the_10x_run_won_when_it_did_as_measured_on_the_bundled_mini():
    """The recorded measurement (core/walkthrough/lr_measure.py, DistilBERT-mini, 30 steps, seed 1): the articles'
    rate stays at the majority guess, 10x reaches 79%. The page said "a learning rate 10x too high" and nothing
    about it winning; now it names the winner and never says the 10x run did worse."""
    v = lr_verdict(_report(0.142, SMOOTH), _report(0.792, JUMPY))
    assert v.kind == "stuck" and v.jumpier
    text = verdict_text(v)
    assert "barely moved" in text and "10× reached 79.2%" in text and "14.2%" in text
    assert "did worse" not in text and "collapsed" not in text
    assert "jumps more" in text and "(0.525 against 0.010)" in text
    assert "too high" not in t("walkthrough.s6.title")


@pytest.mark.parametrize(
    "good, high, kind",
    [(0.70, 0.88, "short_run"), (0.88, 0.70, "worse"), (0.88, 0.15, "collapsed"), (0.15, 0.74, "stuck")],
)
def test_step6_names_the_winner_the_runs_show_and_the_jitter_as_measured(good, high, kind):
    for losses_high, jumpier in ((JUMPY, True), (SMOOTH, False)):
        v = lr_verdict(_report(good, SMOOTH), _report(high, losses_high))
        assert v.kind == kind and v.jumpier is jumpier
        text = verdict_text(v)
        assert ("did worse" in text or "collapsed" in text) == (high < good)
        assert ("jumps more" in text) is jumpier and ("did not jump more" in text) is not jumpier
    # the 中文 text says it too, in Chinese
    zh = catalog()
    assert "10 倍" in zh["walkthrough.s6.verdict.stuck"]["zh"] and "震荡" in zh["walkthrough.s6.jitter_less"]["zh"]


# ---------------------------------------------------------------------------------------------- charts
def test_a_held_out_chart_with_one_evaluation_shows_a_labelled_marker_and_says_so():
    one = curves([("run1", [{"step": 1, "loss": 1.2}, {"step": 2, "loss": 1.0}, {"step": 2, "eval_accuracy": 0.5}])])
    ev = one.data[1]
    assert ev.mode == "markers+text" and list(ev.text) == ["50.0%"] and ev.marker.size >= 12
    assert [a.text for a in one.layout.annotations if a.text == t("finetune.fig.one_eval")]
    many = curves([("run1", [{"step": 1, "loss": 1.2, "eval_accuracy": 0.4}, {"step": 2, "eval_accuracy": 0.5}])])
    assert many.data[1].mode == "lines+markers" and many.data[1].text is None
    assert not [a for a in many.layout.annotations if a.text == t("finetune.fig.one_eval")]
    token = curves([("tok", [{"step": 3, "loss": 0.9}, {"step": 3, "eval_f1": 0.25}])])
    assert list(token.data[1].text) == ["0.250"]


# ---------------------------------------------------------------------------------------------- results
@pytest.fixture(scope="module")
def two_runs(tiny_models, tmp_path_factory):
    """A finished sequence run and a finished token run of a tiny model (a few steps each)."""
    from core.data.token_data import load_bundled_tokens
    from core.train.finetune import train
    from core.train.finetune_config import FinetuneConfig
    from tests.core.test_finetune import toy

    fam = "bert" if "bert" in tiny_models else next(iter(tiny_models))
    seq = train(
        FinetuneConfig(fam, str(tiny_models[fam]), max_steps=2, batch_size=8, max_length=16, patience=0),
        toy(24, 8),
        tmp_path_factory.mktemp("seq"),
    )
    tok = train(
        FinetuneConfig(fam, str(tiny_models[fam]), task="token", max_steps=2, batch_size=8, max_length=32, patience=0),
        load_bundled_tokens().subset(16, 4),
        tmp_path_factory.mktemp("tok"),
    )
    return seq, tok


def _compare(finished):
    from app.views.train.finetune_results import compare

    compare(finished)


def _result(name, result):
    from app.kit.finetune_work import trained_model
    from app.views.train.finetune_results import result_view

    result_view(name, result, trained_model)


def test_compare_runs_puts_sequence_and_token_runs_in_separate_tables(two_runs):
    seq, tok = two_runs
    at = AppTest.from_function(
        _compare, args=([("run1", seq), ("run2", tok), ("run3", seq)],), default_timeout=60
    ).run()
    assert not at.exception, at.exception
    tables = [d.value for d in at.dataframe]
    curves = [c for c in at.get("plotly_chart") if ".compare.curves." in c.proto.id]  # one per task
    assert len(tables) == 2 and len(curves) == 2
    seq_t, tok_t = tables
    assert list(seq_t.iloc[:, 0]) == ["run1", "run3"] and list(tok_t.iloc[:, 0]) == ["run2"]
    col = {c: t(f"finetune.col.{c}") for c in ("accuracy", "entity_f1", "token_accuracy", "pooling")}
    assert col["accuracy"] in seq_t.columns and col["pooling"] in seq_t.columns
    assert col["entity_f1"] not in seq_t.columns and col["token_accuracy"] not in seq_t.columns
    assert {col["entity_f1"], col["token_accuracy"]} <= set(tok_t.columns)
    assert col["pooling"] not in tok_t.columns and col["accuracy"] not in tok_t.columns
    assert any("measure different things" in c.value for c in at.caption)
    only_seq = AppTest.from_function(_compare, args=([("run1", seq)],), default_timeout=60).run()
    assert len(only_seq.dataframe) == 1 and any("one task" in c.value for c in only_seq.caption)


def test_the_worst_errors_are_a_wrapping_table_with_every_column(two_runs):
    seq, _ = two_runs
    if not seq.worst_errors(10):
        pytest.skip("the tiny run made no mistakes")
    at = AppTest.from_function(_result, args=("run1", seq), default_timeout=60).run()
    assert not at.exception, at.exception
    (table,) = [tb.value for tb in at.table if t("finetune.col.text") in tb.value.columns]  # beside the slices
    assert list(table.columns) == [
        t(f"finetune.col.{c}") for c in ("text", "true", "predicted", "confidence", "p_true")
    ]
    assert table.iloc[0, 3].endswith("%")
    assert not [d for d in at.dataframe if "text" in list(d.value.columns)]


def test_a_token_task_has_no_pooling_options(use_tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    at = open_page("finetune", {"finetune.task": "token", "finetune.tok_mix": "1"})
    assert not [r for r in at.radio if r.key == "finetune.pooling"]
    assert at.checkbox(key="finetune.tok_mix").value is True
    assert any("has no pooling" in (c.help or "") for c in at.checkbox)
    at.radio(key="finetune.task").set_value("sequence").run()
    assert at.radio(key="finetune.pooling").options == [
        t(f"finetune.pooling_opt.{p}") for p in ("cls", "mean", "scalar_mix")
    ]


# ---------------------------------------------------------------------------------------------- run panels
def _runs(cfg, data, job_ids, out):
    """The runs section as the page draws it: the page's side (app.kit.finetune_work) starts the jobs it asks for."""
    from functools import partial

    import streamlit as st

    from app.kit import finetune_work as work
    from app.views.train.finetune_runs import runs_section

    runs = st.session_state.setdefault(
        "test.runs",
        [dict(name=f"run{i + 1}-x", job_id=j, cfg=cfg, data=data, out=out, result=None) for i, j in job_ids],
    )
    runs_section(
        runs, work.jobs_of(runs), resume=work.resume, restart=partial(work.restart, runs), load=work.trained_model
    )


def _out_of_memory(ctx):
    from core.base.messages import msg
    from core.train.finetune_config import OOM_KIND, FinetuneError

    raise FinetuneError(msg(OOM_KIND, device="cpu", batch=8, max_len=16, half_batch=4, half_len=8, offer=""))


def _until_cancelled(ctx):
    while not ctx.cancelled:
        time.sleep(0.01)


def test_a_run_out_of_memory_restarts_with_a_remedy_and_a_cancelled_run_resumes(tiny_models, tmp_path, monkeypatch):
    """The run panel's two buttons start work through the page's side: a remedy starts a new run of the remedied
    config on the same data; Resume gives the cancelled run a new job, named as resumed."""
    from core.runtime.backend import runner
    from core.train.finetune_config import FinetuneConfig, apply_remedy, remedies_for
    from tests.core.test_finetune import toy

    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    r = runner()
    me = "views-session"  # the AppTest session's id below: a page shows only its own session's jobs
    oom = r.wait(r.submit("oom", _out_of_memory, owner=me))
    stopped = r.submit("stopped", _until_cancelled, owner=me)
    r.cancel(stopped.id)
    r.wait(stopped)
    assert (oom.status, stopped.status) == ("error", "cancelled")
    out = tmp_path / "run2"
    (out / "checkpoint").mkdir(parents=True)  # what a cancelled run leaves to resume from
    fam = "bert" if "bert" in tiny_models else next(iter(tiny_models))
    cfg = FinetuneConfig(fam, str(tiny_models[fam]), device="cpu", max_steps=2, batch_size=8, max_length=16)
    job_ids = list(enumerate((oom.id, stopped.id)))
    at = AppTest.from_function(_runs, args=(cfg, toy(24, 8), job_ids, str(out)), default_timeout=60)
    at.session_state[SESSION_ID] = me
    at.run()
    assert not at.exception, at.exception
    remedy = remedies_for(cfg)[0]
    at.button(key=f"finetune.remedy.run1-x.{remedy}").click().run()
    assert not at.exception, at.exception
    runs = at.session_state["test.runs"]
    assert [x["name"] for x in runs] == ["run1-x", "run2-x", f"run3-{fam}"]
    assert runs[2]["cfg"] == apply_remedy(cfg, remedy) and runs[2]["data"] is runs[0]["data"]
    at.button(key="finetune.resume.run2-x").click().run()
    assert not at.exception, at.exception
    resumed = r.get(at.session_state["test.runs"][1]["job_id"])
    assert resumed.id != stopped.id and resumed.name == t("finetune.job_name_resumed", name="run2-x")
    for job in (resumed, r.get(runs[2]["job_id"])):
        r.wait(job, timeout=300)

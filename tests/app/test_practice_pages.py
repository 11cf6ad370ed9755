"""AppTests for the articles' practice: the Speed page's int8 section, the Models page's GLUE table and the
Fine-tune page's "Out of memory?" panel."""

from __future__ import annotations

import json

import pytest

from core.runtime.backend import runner
from tests.app.conftest import open_page, page_for

pytestmark = pytest.mark.timeout(600)


def _texts(at) -> str:
    return " ".join(
        [m.value for m in at.markdown]
        + [c.value for c in at.caption]
        + [e.value for e in at.error]
        + [w.value for w in at.warning]
        + [i.value for i in at.info]
        + [s.value for s in at.success]
    )


def _button(at, label: str):
    return next(b for b in at.button if b.label == label)


def test_speed_int8_section_measures_the_sidebar_model(use_tiny_zoo):
    at = open_page("speed", state={"speed.seq": 16, "speed.batch": 1, "speed.reps": 1})
    text = _texts(at)
    assert "ALBERT配合量化" in text and "cost-effectiveness" in text  # the article's advice, quoted
    assert any("bert\\-mini" in c.value and "batch 1 × 16 tokens" in c.value for c in at.caption)
    _button(at, "Measure int8 vs fp32").click().run()
    assert not at.exception, at.exception
    (job,) = [j for j in runner().jobs() if j.name == "int8 vs fp32"][-1:]
    runner().wait(job, timeout=300)
    assert job.status == "done", job.error
    at.run()
    assert not at.exception, at.exception
    assert any("linear layers in int8" in s.value for s in at.success)
    (table,) = [d.value for d in at.dataframe if "int8 / fp32" in d.value.columns]
    assert list(table.columns) == ["measure", "fp32", "int8", "int8 / fp32"]
    assert table.iloc[0]["measure"].startswith("size on disk") and table.iloc[0]["int8"].endswith("MB")
    assert float(table.iloc[0]["int8 / fp32"].rstrip("×")) < 1.0  # int8 is smaller
    assert any(e.entry_id == f"speed.int8:{job.id}" for e in at.session_state["report.entries"].values())
    # another shape: the result is not shown under settings it was not made with
    at.session_state["speed.batch"] = 2
    at.run()
    assert not [d for d in at.dataframe if "int8 / fp32" in d.value.columns]


def test_models_glue_table_shows_claims_and_the_runs_found(tmp_path, monkeypatch):
    model = tmp_path / "runs" / "other-session" / "run1-bert" / "model"
    model.mkdir(parents=True)
    meta = dict(
        config=dict(
            family="bert", checkpoint="encoderlab/bert-mini", seed=7, batch_size=16, max_length=64, task="sequence"
        ),
        label_names=["neg", "pos"],
        data="glue-sst2",
        source="GLUE SST2",
        licence="-",
        accuracy=0.8125,
        macro_f1=0.8,
        steps=300,
    )
    (model / "encoderlab_finetune.json").write_text(json.dumps(meta))
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    at = open_page("models")
    claims = next(d.value for d in at.dataframe if "MNLI-m" in d.value.columns)
    assert list(claims["model"]) == ["BERT-base", "RoBERTa-base", "ALBERT-base", "DistilBERT"]
    assert claims.iloc[1]["CoLA"] == 63.6 and claims.iloc[0]["MNLI-m"] == 84.6
    measured = next(d.value for d in at.dataframe if "measured (%)" in d.value.columns)
    row = measured.iloc[0]
    assert (row["model"], row["data"], row["measured (%)"], row["article (same task)"]) == (
        "encoderlab/bert-mini",
        "SST-2",
        "81.2",
        "93.5",
    )
    assert (row["steps"], row["seed"]) == (300, 7)
    text = _texts(at)
    assert "cannot reproduce this table" in text and "300 steps × batch 16" in text
    full = next(d.value for d in at.dataframe if "training examples" in d.value.columns)
    assert full.iloc[0]["training examples"] == "392,702" and full.iloc[0]["examples seen"] == "1,178,106"


def test_models_glue_table_without_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "none"))
    at = open_page("models")
    assert any("No finished fine-tune found yet" in i.value for i in at.info)
    assert any("cannot reproduce this table" in w.value for w in at.warning)


def test_finetune_oom_panel_starts_a_measurement(use_tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr("core.data.datasets_local.hub_reachable", lambda *a, **k: False)
    at = open_page("finetune")
    text = _texts(at)
    assert "梯度检查点" in text and "not below 64" in text  # the article's advice, quoted
    at.number_input(key="remedies.steps").set_value(2)
    _button(at, "Measure remedies").click().run()
    assert not at.exception, at.exception
    job = [j for j in runner().jobs() if j.name == "Out-of-memory remedies"][-1]
    runner().cancel(job.id)  # six fresh processes take a while: the measurement itself is tested in tests/core
    runner().wait(job, timeout=120)
    at.run()
    assert not at.exception, at.exception
    assert job.status in ("cancelled", "done"), job.error


def test_fill_mask_compares_a_model_with_its_int8_copy(use_tiny_zoo):
    at = page_for("fill_mask")
    at.multiselect(key="fill_mask.cmp_models").set_value(
        ["bert|encoderlab/bert-mini", "bert|encoderlab/bert-mini|int8"]
    )
    next(b for b in at.button if b.label == "Compare").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    heads = [m.value for m in at.markdown if "bert\\-mini" in m.value or "bert-mini" in m.value]
    assert any("int8 (CPU)" in h for h in heads) and any("int8" not in h for h in heads)
    assert len([m for m in at.metric if m.label == "latency"]) == 2

"""The article's GLUE table (core/compare/glue_claims.py) and the reader of this installation's finished fine-tunes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.base.messages import read_catalogue
from core.base.paths import ASSETS
from core.compare import glue_claims as gc
from core.compare.glue_claims import (
    GLUE_CLAIMS,
    GLUE_COLUMNS,
    TRAIN_EXAMPLES,
    claims_in_text,
    claims_rows,
    find_runs,
    full_run,
    read_run,
    share_of_full,
)
from core.compare.glue_claims import META_FILE as READ_META
from core.data.datasets_local import load_bundled
from core.predict.classify import META_FILE
from core.train.finetune import train
from core.train.finetune_config import FinetuneConfig

SEEDS = Path(__file__).resolve().parents[3] / "shared" / "seeds"
ISSUE_TABLE = {
    "BERT-base": (84.6, 89.2, 90.5, 93.5, 52.1),
    "RoBERTa-base": (87.6, 91.9, 92.8, 94.8, 63.6),
    "ALBERT-base": (84.2, 90.3, 91.2, 93.9, 54.8),
    "DistilBERT": (82.8, 88.5, 89.3, 91.3, 48.7),
}


def test_the_claims_are_the_articles_table():
    assert {name: vals for name, vals in GLUE_CLAIMS.values()} == ISSUE_TABLE
    assert GLUE_COLUMNS == ("mnli", "qqp", "qnli", "sst2", "cola")
    assert [r["model"] for r in claims_rows()] == list(ISSUE_TABLE) and claims_rows()[1]["cola"] == 63.6
    # the article's own text, whose table lost its separators, parses back to the same figures
    flat = (
        "4.2 性能基准对比在GLUE基准测试中的表现模型MNLI-mQQPQNLISST-2CoLA"
        + "".join(name + "".join(f"{v:.1f}" for v in vals) for name, vals in ISSUE_TABLE.items())
        + "4.3 未来演进方向"
    )
    assert claims_in_text(flat) == ISSUE_TABLE


def test_the_claims_match_the_seed_article_when_it_is_here():
    texts = [p.read_text(encoding="utf-8") for p in sorted(SEEDS.glob("*.txt"))] if SEEDS.is_dir() else []
    found = [claims_in_text(x) for x in texts if "MNLI" in x]
    if not found:
        pytest.skip(f"the seed articles are not at {SEEDS}")
    assert found[0] == {name: vals for name, vals in GLUE_CLAIMS.values()}


def test_what_a_full_run_takes():
    f = full_run("mnli", samples_per_s=100.0)
    assert (f.examples, f.epochs, f.samples) == (392_702, 3, 1_178_106)
    assert f.hours == pytest.approx(1_178_106 / 100 / 3600)
    assert full_run("cola").hours is None and TRAIN_EXAMPLES["sst2"] == 67_349
    with pytest.raises(ValueError, match="Unknown GLUE task"):
        full_run("squad")


def test_a_finished_fine_tune_is_found_with_its_model_steps_and_seed(tiny_models, tmp_path):
    assert READ_META == META_FILE  # the reader looks for the file core.train.finetune writes
    data = load_bundled("wordnet").subset(16, 8)
    cfg = FinetuneConfig(
        "bert", str(tiny_models["bert"]), max_steps=2, batch_size=8, max_length=16, seed=7, device="cpu"
    )
    res = train(cfg, data, tmp_path / "sess" / "run1")
    (run,) = find_runs([tmp_path], extra=(res.model_dir,))  # found once, through the root and as a session model
    assert (run.family, run.checkpoint, run.steps, run.seed, run.batch_size) == ("bert", cfg.checkpoint, 2, 7, 8)
    assert run.data == "wordnet" and run.glue_task is None and run.task == "sequence"
    assert run.metric == "accuracy" and run.value == pytest.approx(res.accuracy)
    assert 0 < share_of_full(run) < 1e-4
    # a GLUE run is matched to its column; a folder with broken metadata is skipped, not an error
    meta = json.loads((Path(res.model_dir) / META_FILE).read_text())
    glue = tmp_path / "other" / "run2" / "model"
    glue.mkdir(parents=True)
    (glue / META_FILE).write_text(json.dumps(dict(meta, data="glue-sst2")))
    broken = tmp_path / "other" / "run3" / "model"
    broken.mkdir(parents=True)
    (broken / META_FILE).write_text("{not json")
    assert read_run(broken) is None
    runs = find_runs([tmp_path / "other", tmp_path / "missing"])
    assert [r.glue_task for r in runs] == ["sst2"]


def test_every_metric_code_has_a_name_in_both_languages(tmp_path):
    """#46: the page chose the metric's name by comparing r.metric with the English 'entity F1'; now the code is a
    StrEnum and the page names it models.glue.metric.<code>."""
    names = read_catalogue(ASSETS / "i18n" / "models.toml", "models")
    for m in gc.Metric:
        entry = names.get(f"models.glue.metric.{m}")
        assert entry and entry.get("en") and entry.get("zh"), m
    model = tmp_path / "model"
    model.mkdir()
    cfg = {"family": "bert", "checkpoint": "x", "task": "token"}
    (model / META_FILE).write_text(json.dumps({"config": cfg, "accuracy": 0.9, "entity_f1": 0.5}), encoding="utf-8")
    run = gc.read_run(model)
    assert run is not None and run.metric == gc.Metric.ENTITY_F1 and run.value == 0.5

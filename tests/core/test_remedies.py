"""The out-of-memory remedies, measured (core/train/remedies.py): each run in its own process, a row per remedy."""

from __future__ import annotations

import pytest

from core.data.datasets_local import load_bundled
from core.train.finetune_config import REMEDIES, FinetuneConfig
from core.train.remedies import BASELINE, measure_remedies, plan


@pytest.fixture(scope="module")
def cfg(tiny_models):
    return FinetuneConfig("bert", str(tiny_models["bert"]), batch_size=4, max_length=64, device="cpu", lr=1e-4)


def test_the_plan_has_the_baseline_and_a_row_per_remedy(cfg):
    rows = plan(cfg)
    assert [r[0] for r in rows] == [BASELINE, *REMEDIES]
    changed = {name: c for name, _, _, c in rows}
    assert changed["max_length_64"] is False  # already 64: the article says not under 64, so nothing to run
    assert changed["gradient_checkpointing"] and changed["half_batch"] and changed["freeze_embeddings"]
    with pytest.raises(ValueError, match="Unknown remedies"):
        plan(cfg, ("more_ram",))


def test_a_tiny_measurement_reports_peak_memory_and_speed_per_run(cfg):
    seen = []
    res = measure_remedies(
        cfg,
        load_bundled("wordnet"),
        steps=3,
        names=("gradient_checkpointing", "max_length_64"),
        on_progress=lambda f, m: seen.append(f),
    )
    assert [r.name for r in res.rows] == [BASELINE, "gradient_checkpointing", "max_length_64"]
    base, ckpt, same = res.rows
    for r in (base, ckpt):  # both ran to the end in their own process
        assert r.error is None, r.error
        assert r.peak_mb > 100 and 0 < r.train_mb < r.peak_mb  # the process's peak holds torch; training adds some
        assert r.steps_per_s > 0
    assert "checkpointing" in ckpt.settings and base.memory_ratio == pytest.approx(1.0)
    assert ckpt.memory_ratio > 0 and ckpt.speed_ratio > 0
    assert not same.changed and same.peak_mb is None and same.error is None
    assert res.device == "cpu" and res.train_rows == 3 * cfg.batch_size and "RSS" in res.memory_kind
    assert seen and seen[-1] == 1.0


def test_steps_are_checked(cfg):
    with pytest.raises(ValueError, match="Steps must be"):
        measure_remedies(cfg, load_bundled("wordnet"), steps=1)

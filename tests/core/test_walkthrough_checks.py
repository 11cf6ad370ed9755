"""core.walkthrough.checks: what the Walkthrough's steps compute, on tiny random models in real folders, and which
models they pick, asked of the family registry (so a newly registered family is covered without a test change)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from core.models.loading import ModelSpec, load
from core.predict.classify import META_FILE
from core.registry import FAMILIES, bundled_id
from core.train.finetune import train
from core.train.finetune_config import FinetuneConfig
from core.walkthrough import checks as W


def _only(*keys: str):
    """An availability rule: only the bundled models of these families are here."""
    here = {bundled_id(k) for k in keys}
    return lambda checkpoint: checkpoint in here


# ---------------------------------------------------------------------------------------------- which models
def test_pair_head_families_are_exactly_those_with_a_head():
    with_head = W.pair_head_families()
    assert with_head and all(f.pair_head for f in with_head)
    assert {f.key for f in with_head} | {f.key for f in W.no_pair_head_families()} == set(FAMILIES)
    assert {f.pair_head for f in with_head} >= {"nsp", "sop"}
    assert W.sop_family().pair_head == "sop"


def test_distillation_pair_uses_the_registered_teacher_and_a_stand_in_without_it():
    student = next(f for f in FAMILIES.values() if f.distilled_from)
    everyone = W.distillation_pair(lambda c: True)
    assert (everyone.student, everyone.teacher, everyone.missing) == (student.key, student.distilled_from, ())
    assert not everyone.stand_in

    others = [
        f.key
        for f in FAMILIES.values()
        if f.key not in (student.key, student.distilled_from) and not f.distilled_from and f.bundled
    ]
    no_teacher = W.distillation_pair(_only(student.key, others[0]))
    assert no_teacher.teacher == others[0] and no_teacher.stand_in
    assert no_teacher.missing == (bundled_id(student.distilled_from),)

    nothing = W.distillation_pair(lambda c: False)
    assert nothing.student is None and nothing.teacher is None and not nothing.stand_in
    assert bundled_id(student.key) in nothing.missing and bundled_id(student.distilled_from) in nothing.missing


def test_every_distilled_family_names_a_registered_teacher():
    for f in FAMILIES.values():
        if f.distilled_from:
            assert f.distilled_from in FAMILIES and not FAMILIES[f.distilled_from].distilled_from


def test_finetune_choices_put_the_distilled_family_first_and_skip_what_is_missing():
    choices = W.finetune_choices(lambda c: True)
    assert FAMILIES[choices[0][0]].distilled_from
    assert {f for f, _ in choices} == {f.key for f in FAMILIES.values() if f.bundled}
    assert all(ckpt == bundled_id(fam) for fam, ckpt in choices)
    first_undistilled = next(f.key for f in FAMILIES.values() if not f.distilled_from and f.bundled)
    assert W.finetune_choices(_only(first_undistilled)) == [(first_undistilled, bundled_id(first_undistilled))]


def test_pick_spec_keeps_an_official_checkpoint_of_the_family_and_refuses_a_fine_tune(tmp_path):
    from core.registry import ModelLoadError

    fam = next(f for f in FAMILIES.values() if f.bundled and f.checkpoints)
    official = ModelSpec(fam.key, fam.checkpoints[0].id)
    assert W.pick_spec(fam.key, official, [], "cpu", available=lambda c: True) is official
    bundled = ModelSpec(fam.key, bundled_id(fam.key), "cpu")
    assert W.pick_spec(fam.key, official, [], "cpu", available=lambda c: False) == bundled
    assert W.pick_spec(fam.key, None, [], "cpu") == bundled
    made_here = ModelSpec(fam.key, str(tmp_path))  # a folder (a fine-tune): the step explains the family's own head
    assert W.pick_spec(fam.key, made_here, [str(tmp_path)], "cpu", available=lambda c: True) == bundled
    other = next(f for f in FAMILIES.values() if f.key != fam.key and f.bundled)
    assert W.pick_spec(other.key, official, [], "cpu", available=lambda c: True).family == other.key
    unbundled = next((f for f in FAMILIES.values() if not f.bundled), None)
    if unbundled is not None:  # nothing of it in the sidebar and nothing shipped: the message says what to do
        with pytest.raises(ModelLoadError, match="ships no"):
            W.pick_spec(unbundled.key, None, [], "cpu")


def test_sharing_counts_a_shared_layer_once_stored_and_once_per_depth_applied():
    from core.models.params import breakdown

    plan = W.sharing_plan()
    assert plan.shared.shared_layers and not plan.reference.shared_layers and len(plan.checkpoints) == 4
    rows = W.sharing_rows([breakdown(c) for c in plan.checkpoints[:2]])  # base of each: large only takes longer
    for r, b in zip(rows, (plan.reference, plan.shared)):
        assert r.checkpoint in {c.id for c in b.checkpoints}
        if b.shared_layers:
            assert r.applied_m > r.stored_m  # one layer's weights, applied at every depth
        else:
            assert r.applied_m < r.stored_m  # the encoder alone, without the embeddings
    assert rows[1].stored_m < rows[0].stored_m / 5  # ALBERT-base is about 12M against BERT-base's 110M


# ---------------------------------------------------------------------------------------------- step 5
def test_heldout_sentences_are_stable_readable_lines():
    a, b = W.heldout_sentences(8), W.heldout_sentences(8)
    assert a == b and len(a) == 8 and len(set(a)) == 8
    assert all(60 <= len(s) <= 200 for s in a)
    with pytest.raises(ValueError, match="at least one"):
        W.heldout_sentences(0)


def test_heldout_top5_masks_the_same_words_for_every_model(tiny_models):
    sentences = W.heldout_sentences(4)
    fams = list(tiny_models)[:2]
    scores = [W.heldout_top5(load(ModelSpec(f, str(tiny_models[f]), "cpu"), "mlm"), sentences) for f in fams]
    for s in scores:
        assert s.sentences == 4 and s.pieces >= 4 and 0.0 <= s.top5 <= 1.0 and s.ms > 0
    with pytest.raises(ValueError, match="three letters"):
        W.heldout_top5(load(ModelSpec(fams[0], str(tiny_models[fams[0]]), "cpu"), "mlm"), ["a b c", "to be"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        scores[0].top5 = 1.0


@pytest.mark.slow
def test_measure_distillation_times_the_pair_and_scores_the_bundled_models(use_tiny_zoo):
    m = W.measure_distillation(8, 1, 1, 4, "cpu", load)
    student = next(f for f in FAMILIES.values() if f.distilled_from)
    assert (m.student, m.teacher) == (student.key, student.distilled_from) and not m.errors
    assert [s.family for s in m.models] == [student.distilled_from, student.key]
    assert m.speedup() > 0 and all(s.layers and s.params > 0 for s in m.models)
    with pytest.raises(ValueError, match="Sequence length"):
        W.measure_distillation(4, 1, 1, 4, "cpu", load)


def test_step_five_runs_as_a_picklable_job(use_tiny_zoo):
    """#46 §2: step 5 timed in the script thread; now it is a job fn(ctx) that a worker process can take."""
    import pickle

    from core.runtime.jobs import JobRunner

    fn = pickle.loads(pickle.dumps(W.distillation_job(8, 1, 1, 4, "cpu")))
    r = JobRunner({"cpu": 1})
    job = r.wait(r.submit("step 5", fn), timeout=240)
    assert job.status == "done", job.error
    assert job.result.speedup() > 0 and len(job.result.models) == 2


# ---------------------------------------------------------------------------------------------- step 6
def test_lr_pair_plan_is_the_seeds_settings_and_ten_times_the_rate():
    fam = next(f.key for f in FAMILIES.values() if f.bundled)
    plan = W.lr_pair_plan(fam, bundled_id(fam), 3e-5, 4, "cpu")
    (k1, good), (k2, high) = plan.runs
    assert (k1, k2) == ("good", "high") and high.lr == pytest.approx(W.LR_FACTOR * good.lr)
    for cfg in (good, high):
        assert (cfg.max_steps, cfg.batch_size, cfg.warmup_ratio, cfg.weight_decay, cfg.grad_clip) == (
            4,
            W.S6_BATCH,
            0.1,
            0.01,
            1.0,
        )
    assert len(plan.data.train) == 4 * W.S6_BATCH and len(plan.data.test) == W.S6_TEST_ROWS
    with pytest.raises(ValueError, match="at least 1"):
        W.lr_pair_plan(fam, bundled_id(fam), 3e-5, 0, "cpu")


def test_jitter_is_the_mean_step_to_step_change_of_the_loss():
    assert W.jitter([{"loss": 1.0}, {"loss": 3.0}, {"loss": 2.0}, {"loss": None}]) == pytest.approx(1.5)
    assert W.jitter([{"loss": 1.0}, {"loss": 2.0}]) is None


@pytest.mark.slow
def test_lr_verdict_and_classifier_detection_on_a_real_fine_tune(tiny_models, tmp_path):
    from tests.core.test_finetune import toy

    fam = next(iter(tiny_models))
    r = train(
        FinetuneConfig(fam, str(tiny_models[fam]), max_steps=2, batch_size=8, max_length=16),
        toy(24, 8),
        tmp_path / "ft",
    )
    assert W.is_cls_classifier(r.model_dir) == (r.config.pooling == "cls")
    good = dataclasses.replace(r, accuracy=0.9, majority_rate=0.5)
    assert W.lr_verdict(good, dataclasses.replace(good, accuracy=0.5)).kind == "collapsed"
    assert W.lr_verdict(good, dataclasses.replace(good, accuracy=0.8)).kind == "worse"
    v = W.lr_verdict(good, dataclasses.replace(good, accuracy=0.95))
    assert v.kind == "short_run" and (v.good, v.high, v.majority) == (0.9, 0.95, 0.5)
    assert W.lr_verdict(None, good).kind == "good_failed" and W.lr_verdict(good, None).kind == "diverged"


def test_classifier_detection_reads_the_fine_tune_metadata(tmp_path):
    (tmp_path / "cls").mkdir()
    (tmp_path / "cls" / META_FILE).write_text(json.dumps({"config": {"pooling": "cls"}}))
    (tmp_path / "mean").mkdir()
    (tmp_path / "mean" / META_FILE).write_text(json.dumps({"config": {"pooling": "mean"}}))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / META_FILE).write_text("{not json")
    assert W.is_cls_classifier(str(tmp_path / "cls"))
    assert not W.is_cls_classifier(str(tmp_path / "mean"))
    assert not W.is_cls_classifier(str(tmp_path / "broken"))
    assert not W.is_cls_classifier(str(tmp_path / "nowhere"))

"""core/inspect/head_importance: gradient importance (Michel et al. 2019) for all four families on tiny random models and a
tiny fine-tuned classifier, its check against single-head ablation, and, on the bundled bert-mini (real weights),
that pruning heads in importance order hurts the MLM loss less than pruning them in random order."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from core.inspect.ablation import default_texts
from core.inspect.head_importance import ImportanceError, head_importance, importance_job
from core.models.loading import ModelSpec, load

TEXTS = [
    "the cat sat on the mat and looked at the dog",
    "a dog ran in the park today with a ball",
    "it was a good day for a long walk",
    "the river runs past the old mill to the sea",
] * 2


def test_mlm_importance_of_every_family(family, tiny_models):
    lm = load(ModelSpec(family, str(tiny_models[family]), "cpu"), "pretraining")
    r = head_importance(lm, TEXTS, fractions=(0.0, 0.5, 1.0), seeds=(0,))
    assert r.task == "mlm" and r.metric == "MLM loss" and r.n_texts == len(TEXTS)
    assert r.scores.shape == (2, 4) and (r.scores >= 0).all() and r.scores.sum() > 0
    assert r.exhaustive.shape == (2, 4) and np.isfinite(r.exhaustive).all() and np.abs(r.exhaustive).sum() > 0
    assert r.spearman is not None and -1.0 <= r.spearman <= 1.0
    assert r.pruning_fraction == (0.0, 0.5, 1.0) and len(r.pruning_importance) == len(r.pruning_random) == 3
    assert r.pruning_importance[0] == r.pruning_random[0]  # nothing removed: the same model
    assert r.pruning_importance[-1] == pytest.approx(r.pruning_random[-1])  # everything removed: the same model
    assert r.seconds_gradient > 0 and r.seconds_exhaustive > 0


def test_gradient_scores_are_reproducible_and_leave_the_model_untouched(tiny_models):
    lm = load(ModelSpec("albert", str(tiny_models["albert"]), "cpu"), "pretraining")
    a = head_importance(lm, TEXTS, exhaustive=False, pruning=False)
    b = head_importance(lm, TEXTS, exhaustive=False, pruning=False)
    assert np.array_equal(a.scores, b.scores) and a.exhaustive is None and a.spearman is None
    assert all(p.grad is None for p in lm.model.parameters())  # a shared model gets no .grad


def test_classifier_importance_and_the_job(tiny_models, tmp_path):
    from core.data.datasets_local import LabelledData, Split
    from core.predict.classify import load_finetuned
    from core.train.finetune import train
    from core.train.finetune_config import FinetuneConfig

    texts = tuple(f"it was {w}" for w in ("good", "bad", "great", "awful") * 4)
    labels = (1, 0, 1, 0) * 4
    data = LabelledData("toy", Split(texts, labels), Split(texts[:8], labels[:8]), ("neg", "pos"), "test", "n/a")
    run = train(
        FinetuneConfig(
            "distilbert", str(tiny_models["distilbert"]), max_steps=2, batch_size=8, max_length=16, pooling="cls"
        ),
        data,
        tmp_path / "run",
    )
    fm = load_finetuned(run.model_dir, device="cpu")
    batch = (run.test_texts, None, tuple(int(y) for y in run.test_labels))
    r = head_importance(fm, batch=batch, fractions=(0.0, 1.0), seeds=(0,))
    assert r.task == "classify" and r.metric == "accuracy" and r.n_texts == 8
    assert r.scores.shape == (2, 4) and (r.scores >= 0).all() and r.exhaustive.shape == (2, 4)
    assert 0.0 <= min(r.pruning_importance) <= max(r.pruning_importance) <= 1.0
    with pytest.raises(ImportanceError, match="eval set"):
        head_importance(fm)
    # the job form: picklable, loads the model itself, reports progress
    fn = importance_job(
        "distilbert", run.model_dir, "cpu", exhaustive=False, pruning=False, finetuned_dir=run.model_dir, batch=batch
    )
    fn = pickle.loads(pickle.dumps(fn))

    class Ctx:  # what core.runtime.jobs hands a job: progress(fraction, message)
        seen: list = []

        def progress(self, fraction, message="", **metrics):
            self.seen.append((fraction, message))

    ctx = Ctx()
    rj = fn(ctx)
    assert np.allclose(rj.scores, head_importance(fm, batch=batch, exhaustive=False, pruning=False).scores)
    assert ctx.seen[0][0] == 0.0 and ctx.seen[-1][0] == pytest.approx(1.0)


def test_bad_input_is_explained(tiny_models):
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), "pretraining")
    with pytest.raises(ImportanceError, match="at least one sentence"):
        head_importance(lm, ["  "])


def test_importance_order_prunes_more_gently_than_random_on_bert_mini():
    lm = load(ModelSpec("bert", "encoderlab/bert-mini", "cpu"), "pretraining")
    fr = (0.0, 0.5, 0.75)
    r = head_importance(lm, default_texts(32), exhaustive=False, fractions=fr, seeds=(0, 1))
    auc_imp = np.trapezoid(r.pruning_importance, r.pruning_fraction)
    auc_rand = np.trapezoid(r.pruning_random, r.pruning_fraction)
    # MLM loss: lower is better; importance order must stay clearly below random order
    assert auc_imp < auc_rand - 0.05, (r.pruning_importance, r.pruning_random)
    assert r.pruning_importance[-1] < r.pruning_random[-1]


def test_progress_counts_loss_passes_so_the_eta_is_honest(tiny_models):
    """#46 (third walk 13): the gradient pass was one step of 41, so the ETA read 493 s, then 38 s, then 0 s with
    seconds to go. Progress now counts loss passes (the gradient pass as GRADIENT_UNITS of them), one report per pass
    actually made, and ends at exactly 1."""
    from core.inspect.head_importance import GRADIENT_UNITS, pruning_passes

    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), "pretraining")
    seen: list[tuple[float, str]] = []
    head_importance(lm, TEXTS, fractions=(0.0, 0.5, 1.0), seeds=(0,), progress=lambda f, m: seen.append((f, m.kind)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)
    steps = GRADIENT_UNITS + (8 + 1) + pruning_passes(8, (0.0, 0.5, 1.0), (0,))
    assert pruning_passes(8, (0.0, 0.5, 1.0), (0,)) == 4  # none and all heads removed are shared by both orders
    done_gradient = next(f for f, k in seen if k == "progress.importance.gradient_done")
    assert done_gradient == pytest.approx(GRADIENT_UNITS / steps)
    pruned = [k for _, k in seen if k.startswith("progress.importance.pruning")]
    assert len(pruned) == pruning_passes(8, (0.0, 0.5, 1.0), (0,))  # one report per distinct set of heads removed

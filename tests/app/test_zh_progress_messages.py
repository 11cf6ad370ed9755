"""In 中文 a job's progress lines and its status read Chinese (#46 §1: "English that still reaches 中文").

Real jobs run here on tiny models (a tuned-lens tune of two steps, attributions with their per-method, per-row and
per-layer lines, head importance), collecting every line they hand to the job's progress; the job runner's own
statuses (queued, starting, done, failed, cancelled) come from a real JobRunner. Each is a Message whose kind (and
every kind it quotes) is in assets/i18n/errors.toml, reads the same as the panel shows it in English, and in 中文
(app.kit.i18n.explain, which app/kit/jobs_panel.py writes) holds Chinese and no English sentence: neither one of
errors.toml's (tests/app/test_zh_core_messages.english_in) nor a run of three English words (tests/english.py).
"""

from __future__ import annotations

import threading
import time

import pytest
import torch

from app.kit.i18n import explain
from core.base.messages import Message, msg, templates
from core.base.segment import has_han
from core.inspect import tuned_lens as TL
from core.inspect.attribution import BatchRow, attribute, attribute_batch
from core.inspect.attribution_inputs import AttributionConfig
from core.inspect.head_importance import head_importance
from core.models.loading import ModelSpec, load
from core.registry import FAMILIES
from core.runtime.job_outcome import JobContext
from core.runtime.jobs import CANCELLED, DONE, ERROR, QUEUED, JobRunner
from core.train.finetune import StepInfo
from core.train.finetune_config import FinetuneConfig
from core.train.remedies import _settings
from tests.app.test_zh_core_messages import english_in
from tests.english import english_runs


@pytest.fixture()
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _collecting() -> tuple[JobContext, list]:
    """A job's context whose progress lines land in a list (as core.runtime.jobs.Job.report receives them)."""
    seen: list = []
    return JobContext(threading.Event(), lambda fraction, message, metrics: seen.append(message)), seen


def _kinds(m: Message) -> list[str]:
    """``m``'s kind and those of the Messages it quotes, at any depth."""
    out = [m.kind]
    for v in m.params.values():
        for x in v if isinstance(v, (list, tuple)) else [v]:
            if isinstance(x, Message):
                out += _kinds(x)
    return out


def _check(lines, ui_lang) -> list[str]:
    """Every line a Message of known kinds, shown in English as its str and in 中文 without English; returns the zh
    texts."""
    assert lines
    unknown = [(str(m), k) for m in lines for k in (_kinds(m) if isinstance(m, Message) else ["<not a Message>"])]
    unknown = [x for x in unknown if x[1] not in templates()]
    assert not unknown, unknown
    ui_lang("en")
    assert [explain(m) for m in lines] == [str(m) for m in lines]
    ui_lang("zh")
    zh = [explain(m) for m in lines]
    assert all(has_han(z) for z in zh), [z for z in zh if not has_han(z)]
    assert not english_in(zh), english_in(zh)
    runs = [(z, english_runs(z)) for z in zh if english_runs(z)]
    assert not runs, runs
    return zh


def test_a_tuned_lens_job_reports_in_chinese(tiny_models, tmp_path, monkeypatch, ui_lang, one_thread):
    monkeypatch.setenv("ENCODERLAB_LENS_DIR", str(tmp_path / "lens"))
    ctx, seen = _collecting()
    spec = ModelSpec("bert", str(tiny_models["bert"]), "cpu")
    TL.tune_job(spec, TL.TuneConfig(steps=2, batch_size=2, heldout_sentences=4))(ctx)
    kinds = [m.kind for m in seen]
    assert kinds[0] == "progress.loading_fresh_copy" and kinds[-1] == "progress.lens.saved"
    assert kinds.count("progress.lens.step") == 2 and "progress.lens.measuring" in kinds
    zh = _check(seen, ui_lang)
    assert zh[0] == templates()["progress.loading_fresh_copy"]["zh"]
    assert str(seen[0]) == "loading a fresh copy of the model"  # the English stays as it was


def test_attributions_report_per_method_row_and_layer_in_chinese(tiny_models, ui_lang, one_thread):
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="pretraining")
    mask = FAMILIES["bert"].mask_token
    seen: list = []
    cfg = AttributionConfig(
        target="mask", text=f"the cat sat on the {mask} .", methods=("saliency", "lig"), n_steps=4, layer_steps=2
    )
    attribute(lm, cfg, lambda f, m: seen.append(m))
    rows = (BatchRow(f"a {mask} b ."), BatchRow(f"the {mask} is red ."))
    attribute_batch(lm, rows, {"target": "mask", "methods": ("saliency",)}, lambda f, m: seen.append(m))
    kinds = {k for m in seen for k in _kinds(m)}
    assert {
        "progress.attribution.method",
        "progress.attribution.batch",
        "progress.attribution.row",
        "progress.attribution.layer_embeddings",
        "progress.attribution.layer",
        "progress.done",
        "attribution.method_name.lig",
    } <= kinds, kinds
    row = next(m for m in seen if m.kind == "progress.attribution.row")
    assert str(row).startswith("row 1/2: Saliency")  # the wrapped line, English as before
    zh = _check(seen, ui_lang)
    assert any(z.startswith("第 1/2 行：显著性") for z in zh), zh  # the inner line translated too


def test_head_importance_reports_in_chinese(tiny_models, ui_lang, one_thread):
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="mlm")
    seen: list = []
    head_importance(
        lm, ["the cat sat on the mat .", "a dog ran in the park ."], fractions=(0.0, 0.5), seeds=(0,),
        progress=lambda f, m: seen.append(m),
    )  # fmt: skip
    kinds = {m.kind for m in seen}
    assert {
        "progress.importance.gradient",
        "progress.importance.gradient_done",
        "progress.importance.single_head",
        "progress.importance.pruning_ordered",
        "progress.importance.pruning_random",
    } <= kinds, kinds
    _check(seen, ui_lang)


def test_the_runner_s_statuses_are_messages_in_chinese(ui_lang):
    r = JobRunner(limits={"cpu": 1}, workers=False)
    gate, seen = threading.Event(), []

    def waits(ctx):
        seen.append(next(j for j in r.jobs() if j.name == "first").message)  # before its first progress line
        gate.wait(30)
        return 1

    first = r.submit("first", waits)
    second = r.submit("second", lambda ctx: 2)
    assert second.status == QUEUED
    seen.append(second.message)
    r.cancel(second.id)
    assert second.status == CANCELLED
    seen.append(second.message)
    gate.set()
    assert r.wait(first).status == DONE
    seen.append(first.message)
    failing = r.wait(r.submit("failing", lambda ctx: 1 / 0))
    assert failing.status == ERROR
    seen.append(failing.message)
    running = threading.Event()

    def until_cancelled(ctx):
        while True:  # ctx.progress raises JobCancelled once Cancel is pressed
            ctx.progress(0.5, msg("progress.loading_model"))
            running.set()
            time.sleep(0.01)

    cancelling = r.submit("cancelling", until_cancelled)
    assert running.wait(30)
    r.cancel(cancelling.id)
    assert r.wait(cancelling).status == CANCELLED
    seen.append(cancelling.message)
    assert [m.kind for m in seen] == [
        "progress.starting",
        "progress.queued",
        "progress.cancelled_before_start",
        "progress.done",
        "progress.failed",
        "progress.cancelled",
    ]
    assert [str(m) for m in seen[:2]] == ["starting", "queued"]  # the English stays as it was
    _check(seen, ui_lang)


def test_step_lines_ray_loss_and_remedy_settings_in_chinese(ui_lang):
    """Lines the runs above do not reach, built as core builds them: the fine-tune's step and evaluation lines
    (with and without the ETA, with entity F1), a lost Ray node, a remedy run's settings."""
    cfg = FinetuneConfig("bert", "encoderlab/bert-mini", gradient_checkpointing=True, freeze_embeddings=True)
    lines = [
        StepInfo("train", 3, 40, 0.5, loss=2.1, samples_per_s=12.5, eta_s=30.0).message(),
        StepInfo("train", 3, 40, 0.5, loss=2.1, samples_per_s=12.5, eta_s=30.0).message(with_eta=False),
        StepInfo("eval", 10, 40, 1.0, eval_accuracy=0.8).message(),
        StepInfo("eval", 10, 40, 1.0, eval_accuracy=0.8, eval_f1=0.7).message(),
        msg("jobs.node_lost", why=msg("jobs.node_lost_why.node_left")),
        msg("progress.remedies.child", settings=_settings(cfg), seconds=12.0),
        msg("progress.waiting_for_node", resource="GPU"),
    ]
    assert str(lines[0]) == "step 3/40 · epoch 0.50 · loss 2.1000 · 12.5 samples/s · ETA 30s"
    assert str(lines[3]).endswith("held-out token accuracy 0.800 · entity F1 0.700")
    assert "checkpointing" in str(lines[5]) and "embeddings frozen" in str(lines[5])
    assert "node running this job went away (its node left the cluster)" in lines[4]
    _check(lines, ui_lang)

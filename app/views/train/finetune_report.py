"""The Fine-tune page's session-report entries: a finished run (inputs, metrics, figures) and a try-it prediction."""

from __future__ import annotations

import hashlib

import plotly.graph_objects as go

from app.kit import report
from app.kit.i18n import t
from app.views.train.finetune_charts import confusion, curves, layer_weights_chart, stop_reason_label
from app.views.train.finetune_datamap import figure as datamap_figure
from core import registry
from core.train.finetune import FinetuneResult


def hyperparameters(result: FinetuneResult, train_rows: int | None = None) -> dict[str, str]:
    """The run's inputs under the labels the page shows: model, data and every hyperparameter."""
    cfg = result.config
    yes_no = lambda v: t("finetune.yes") if v else t("finetune.no")  # noqa: E731
    out = {
        t("finetune.rep.model"): cfg.checkpoint,
        t("finetune.rep.family"): registry.family(cfg.family).label,
        t("finetune.rep.data"): result.data_name,
    }
    if train_rows is not None:
        out[t("finetune.rep.rows")] = t("finetune.rep.rows_value", train=train_rows, test=len(result.test_texts))
    out.update(
        {
            t("finetune.epochs"): cfg.epochs,
            t("finetune.max_steps"): cfg.max_steps,
            t("finetune.lr"): f"{cfg.lr:.0e}",
            t("finetune.batch"): cfg.batch_size,
            t("finetune.max_len"): cfg.max_length,
            t("finetune.warmup"): cfg.warmup_ratio,
            t("finetune.wd"): cfg.weight_decay,
            t("finetune.clip"): cfg.grad_clip,
            t("finetune.pooling"): t(f"finetune.pooling_opt.{cfg.pooling}"),
            t("finetune.freeze_emb"): yes_no(cfg.freeze_embeddings),
            t("finetune.freeze_n"): cfg.freeze_layers,
            t("finetune.seed"): cfg.seed,
            t("finetune.patience"): cfg.patience,
            t("finetune.evals"): cfg.evals_per_epoch,
            t("finetune.rep.device"): f"{result.device} ({result.precision})",
            t("finetune.task"): t(f"finetune.task_opt.{cfg.task}"),
            t("finetune.dropout"): t("finetune.dropout_own") if cfg.dropout is None else cfg.dropout,
            t("finetune.grad_ckpt"): yes_no(cfg.gradient_checkpointing),
        }
    )
    return {k: str(v) for k, v in out.items()}


def final_metrics(result: FinetuneResult) -> list[dict]:
    """The finished run's held-out metrics as (metric, value) rows."""
    m, v = t("finetune.rep.metric"), t("finetune.rep.value")
    pairs = [
        (t("finetune.m.accuracy"), f"{result.accuracy:.1%}"),
        (t("finetune.rep.majority"), f"{result.majority_rate:.1%}"),
        (t("finetune.m.macro_f1"), f"{result.macro_f1:.3f}"),
        (t("finetune.m.steps"), f"{result.steps} ({stop_reason_label(result.stop_reason)})"),
        (t("finetune.rep.best_step"), str(result.best_step)),
        (t("finetune.rep.epochs_done"), f"{result.epochs_done:.2f}"),
        (t("finetune.m.time"), t("finetune.seconds", seconds=f"{result.train_seconds:,.1f}")),
        (t("finetune.m.samples_per_s"), f"{result.samples_per_s:,.1f}"),
        (t("finetune.rep.trained_params"), f"{result.params_trainable:,} / {result.params_total:,}"),
    ]
    if result.token_metrics is not None:
        tm = result.token_metrics
        pairs[:3] = [
            (t("finetune.tok.m.f1"), f"{tm.f1:.3f}"),
            (t("finetune.tok.m.precision"), f"{tm.precision:.3f}"),
            (t("finetune.tok.m.recall"), f"{tm.recall:.3f}"),
            (t("finetune.tok.m.accuracy"), f"{tm.token_accuracy:.1%}"),
            (t("finetune.tok.rep.majority"), f"{tm.majority_accuracy:.1%} / {tm.majority_f1:.3f}"),
        ]
    if result.layer_weights is not None:
        pairs.append((t("finetune.mix.title_plain"), ", ".join(f"{w:.3f}" for w in result.layer_weights)))
    return [{m: a, v: b} for a, b in pairs]


def record_run(job_id: int, name: str, result: FinetuneResult, train_rows: int | None = None) -> None:
    """One report entry per finished job (its id keys the entry): inputs, final metrics, curves, confusion matrix
    (and the layer mix's weights, the data map, where the run has them)."""
    report.record(
        f"finetune:{job_id}",
        t("nav.finetune"),
        t("finetune.rep.title", name=name, model=result.config.checkpoint, data=result.data_name),
        hyperparameters(result, train_rows),
        rows=final_metrics(result),
        figures=[curves([(name, list(result.history) + list(result.evals))]), confusion(result)]
        + ([layer_weights_chart(result)] if result.layer_weights is not None else [])
        + ([_data_map(name, result)] if result.data_map is not None else []),
    )


def _data_map(name: str, result: FinetuneResult) -> go.Figure:
    dm = result.data_map
    assert dm is not None
    return datamap_figure(dm, None, result.label_names, t("datamap.fig.title", run=name, epochs=dm.epochs))


def record_prediction(
    name: str, result: FinetuneResult, text: str, labels: list[str], probs: list[float], fig: go.Figure
) -> None:
    """The try-it box's prediction: one entry per (model, text), so classifying the same text again replaces it."""
    digest = hashlib.sha1(f"{result.model_dir}\n{text}".encode()).hexdigest()[:12]
    best = max(range(len(probs)), key=probs.__getitem__)
    lab, p = t("finetune.col.label"), t("finetune.col.probability")
    report.record(
        f"finetune:try:{digest}",
        t("nav.finetune"),
        t("finetune.rep.try_title", name=name),
        {
            t("finetune.rep.model"): f"{name} ({result.config.checkpoint}, {result.data_name})",
            t("finetune.rep.text"): text,
        },
        rows=[{lab: n, p: f"{q:.1%}"} for n, q in sorted(zip(labels, probs), key=lambda x: -x[1])],
        text=t("finetune.rep.try_text", label=labels[best], prob=f"{probs[best]:.1%}"),
        figures=[fig],
    )

"""The Fine-tune page's pieces: data picker, live curves, result view, run comparison (plotly), report entries."""
from __future__ import annotations

import hashlib
import html

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app.kit import presenter, report, state
from app.kit.i18n import t, t_or
from core import registry
from core.data.datasets_local import (BUNDLED, GLUE_TASKS, HELD_OUT_FRACTION, MAX_UPLOAD_MB, DataError, LabelledData,
                                 from_table, guess_columns, load_bundled, load_glue, read_table)
from app.kit.render import as_text
from core.base.fields import Bounds, bounded_fields, default_of
from core.train.finetune import (POOLINGS, REMEDIES, FinetuneConfig, suggested_settings, FinetuneResult, classify, load_finetuned, remedies_for, tag,
                           zip_folder)
from core.registry import FAMILIES, ModelLoadError
from core.models.downloads import hub_reachable
from core.data.token_data import (BUNDLED_TOKENS, TokenData, entity_spans, load_bundled_tokens, piece_table, read_tokens,
                             words_tokenizer)

PAGE = "finetune"
# Data sources: the widget's values (kept in links) are these ids; the labels come from assets/i18n/finetune.toml.
SOURCES = ("drugreview", "wordnet", "upload", "glue")
NO_SECOND_TEXT = "(none)"  # a widget value; its label comes through format_func
# Settings and data choice outlive a visit to another page (Streamlit drops a widget's value once it is not
# drawn; the defaults set before the widgets would then reset them).
KEEP = "session"


def K(name: str) -> str:
    return state.key(PAGE, name)


# ---------------------------------------------------------------------------------------------- data
@st.cache_data(show_spinner=False)
def _bundled(key: str) -> LabelledData:
    return load_bundled(key)


def _glue(task: str) -> LabelledData:
    with st.spinner(t("finetune.glue_downloading")):
        return _glue_cached(task)


@st.cache_data(show_spinner=False)
def _glue_cached(task: str) -> LabelledData:
    return load_glue(task)


def data_picker() -> LabelledData | None:
    """Draw the data choice; return the labelled data, or None after saying what is missing or wrong."""
    source = st.radio(t("finetune.data"), SOURCES, key=K("source"), persist_state=KEEP, horizontal=True,
                      format_func=lambda s: t(f"finetune.source.{s}"))
    try:
        if source in BUNDLED:
            info = BUNDLED[source]
            data = _bundled(info.key)
            description = t_or(f"finetune.data_desc.{info.key}", info.description)
            st.caption(t("finetune.bundled_caption", description=description, source=info.source,
                         licence=info.licence))
            if info.key == "drugreview":  # why it is not the default
                st.caption(t("finetune.drugreview_note"))
        elif source == "upload":
            data = _upload()
        else:
            data = _glue_picker()
    except DataError as e:
        st.error(str(e))
        return None
    if data is None:
        return None
    for note in data.notes:
        st.info(note)
    counts = ", ".join(f"{k}: {v}" for k, v in data.counts().items())
    st.caption(t("finetune.data_summary", train=len(data.train), test=len(data.test), counts=counts,
                 majority=f"{data.majority_rate():.1%}"))
    return data


def _upload() -> LabelledData | None:
    up = st.file_uploader(t("finetune.upload"), type=["csv", "tsv", "jsonl"], key=K("upload"),
                          help=t("finetune.upload_help"))
    # Streamlit refuses a file over server.maxUploadSize with its own generic message: say the app's limit first.
    st.caption(t("finetune.upload_limit", mb=f"{MAX_UPLOAD_MB:.0f}"))
    if up is None:
        st.info(t("finetune.upload_info"))
        return None
    data = up.getvalue()
    df = read_table(data, up.name)
    cols = [str(c) for c in df.columns]
    guess = guess_columns(df)
    signature = hashlib.sha1(up.name.encode() + data).hexdigest()
    if st.session_state.get(K("upload_sig")) != signature:  # a new file: start from the guess, then the user decides
        st.session_state[K("upload_sig")] = signature
        st.session_state[K("text_col")] = guess.text
        st.session_state[K("text_col_b")] = guess.text_b or NO_SECOND_TEXT
        st.session_state[K("label_col")] = guess.label
    c1, c2, c3, c4 = st.columns(4)
    text = c1.selectbox(t("finetune.text_col"), cols, key=K("text_col"), persist_state=KEEP)
    text_b = c2.selectbox(t("finetune.text_col_b"), [NO_SECOND_TEXT] + cols, key=K("text_col_b"), persist_state=KEEP,
                          format_func=lambda c: t("finetune.no_second_text") if c == NO_SECOND_TEXT else c)
    label = c3.selectbox(t("finetune.label_col"), cols, key=K("label_col"), persist_state=KEEP)
    why = {role: t(f"finetune.guess.{code}") for role, code in guess.why.items()}
    st.caption(t("finetune.guess.caption", text=guess.text, why_text=why["text"], label=guess.label,
                 why_label=why["label"], why_b=why["text_b"],
                 text_b=guess.text_b or t("finetune.no_second_text")))
    st.session_state.setdefault(K("test_frac"), TEST_FRAC.default)
    frac = number(c4, "test_frac")
    return from_table(df, text, label, None if text_b == NO_SECOND_TEXT else text_b, test_fraction=frac, name=up.name)


# ---------------------------------------------------------------------------------------------- settings
# The form's widgets, keyed K(name) (also their URL parameters), and the FinetuneConfig field each one sets. A number
# box takes its range and step from the field (core.base.fields), so the widget, the URL and the config agree.
CONFIG_KEYS = {"epochs": "epochs", "max_steps": "max_steps", "lr": "lr", "batch": "batch_size", "max_len": "max_length",
               "warmup": "warmup_ratio", "wd": "weight_decay", "clip": "grad_clip", "seed": "seed",
               "freeze_emb": "freeze_embeddings", "freeze_n": "freeze_layers", "pooling": "pooling",
               "patience": "patience", "evals": "evals_per_epoch", "precision": "precision",
               "grad_ckpt": "gradient_checkpointing", "dropout": "dropout"}
BOUNDS = bounded_fields(FinetuneConfig)
# The page's own: rows of each split to use (0: all); the held-out share of an upload is core.data.datasets_local's.
ROWS = Bounds(0, 0, 100_000, int)
TEST_FRAC = HELD_OUT_FRACTION
PAGE_BOUNDS = {"rows": ROWS, "test_rows": ROWS, "test_frac": TEST_FRAC, "tok_test_frac": TEST_FRAC}


def bounds_of(name: str) -> Bounds:
    """The range of the setting keyed K(name): its config field's, or the page's own."""
    return PAGE_BOUNDS[name] if name in PAGE_BOUNDS else BOUNDS[CONFIG_KEYS[name]]


def number(where, name: str, **kw):
    """A number box for the setting keyed K(name), its min, max and step from ``bounds_of(name)``."""
    return where.number_input(t(f"finetune.{name}"), **bounds_of(name).widget(), key=K(name), persist_state=KEEP, **kw)


# ---------------------------------------------------------------------------------------------- presets
PRESET_KEYS = {field: name for name, field in CONFIG_KEYS.items()
               if field in ("epochs", "max_steps", "lr", "batch_size", "max_length", "warmup_ratio", "weight_decay",
                            "grad_clip")}


def _apply(settings: dict) -> None:
    for field_, name in PRESET_KEYS.items():
        st.session_state[K(name)] = settings[field_]


def starting_settings(hidden: int | None, task: str) -> tuple[dict, dict]:
    """(this model size's settings, the articles' settings) for the task: token classification starts from the
    article's sequence-labelling lr (5e-5, in its 3e-5 to 7e-5)."""
    return suggested_settings(hidden, task), suggested_settings(None, task)


def task_changed(hidden: int | None) -> None:
    """The task switch: the lr moves to the new task's default (and the whole preset, when the form still held
    the other task's); mean pooling, which has no per-word form, becomes the family's head for token labelling."""
    new = st.session_state[K("task")]
    old = "sequence" if new == "token" else "token"
    current = {f: st.session_state.get(K(n)) for f, n in PRESET_KEYS.items()}
    for was, now in zip(starting_settings(hidden, old), starting_settings(hidden, new)):
        if current == was:
            _apply(now)
            break
    else:
        st.session_state[K("lr")] = starting_settings(hidden, new)[0]["lr"]
    if st.session_state.get(K("pooling")) not in poolings(new):
        st.session_state[K("pooling")] = "cls"


def poolings(task: str) -> tuple[str, ...]:
    return POOLINGS if task == "sequence" else tuple(p for p in POOLINGS if p != "mean")


OWN_DROPOUT = -1.0  # the dropout slider's first stop: keep the checkpoint's own (FinetuneConfig.dropout None)
DROPOUTS = (OWN_DROPOUT,) + BOUNDS["dropout"].stops  # then the field's stops (0 to 0.5)


def dropout_label(v: float) -> str:
    return t("finetune.dropout_own") if v == OWN_DROPOUT else f"{v:g}"


def config_from_state(spec, task: str, strict: bool = False) -> FinetuneConfig | None:
    """The FinetuneConfig the form's values stand for; None when they are not valid (``strict``: the ValueError)."""
    def value(name: str, field_: str):
        v = st.session_state.get(K(name))
        if field_ in BOUNDS:  # a number box holds an int for a float field when its min and max are ints
            return None if v is None or (field_ == "dropout" and v == OWN_DROPOUT) else BOUNDS[field_].kind(v)
        return bool(v) if isinstance(default_of(FinetuneConfig, field_), bool) else v

    try:
        if spec is None:
            raise ValueError(t("finetune.need_model_and_data"))
        return FinetuneConfig(spec.family, spec.checkpoint, device=spec.device, task=task,
                              **{f: value(n, f) for n, f in CONFIG_KEYS.items()})
    except (ValueError, TypeError):
        if strict:
            raise
        return None


def is_oom_error(error: str | None) -> bool:
    """A failed job's message says it ran out of memory (core.train.finetune's FinetuneError for OOM)."""
    return bool(error) and "Out of memory" in error


def presets(hidden: int | None, suggested: dict, articles: dict, task: str = "sequence") -> None:
    """Which settings the form holds (this model size's or the articles'), why they differ, and a button for each."""
    current = {f: st.session_state.get(K(n)) for f, n in PRESET_KEYS.items()}
    small = suggested != articles
    if current == articles:
        st.caption(t("finetune.preset.token_articles_in_use" if task == "token" else "finetune.preset.articles_in_use"))
    elif current == suggested:
        st.caption(t("finetune.preset.token_small_in_use" if task == "token" else "finetune.preset.small_in_use",
                     hidden=hidden, lr=f"{suggested['lr']:.0e}", epochs=suggested["epochs"],
                     max_len=suggested["max_length"]))
    else:
        st.caption(t("finetune.preset.own"))
    c1, c2, _ = st.columns([1, 1, 2])
    c1.button(t("finetune.preset.articles"), key=K("preset.articles"), on_click=_apply, args=(articles,),
              disabled=current == articles, help=t("finetune.preset.articles_help"))
    if small:
        c2.button(t("finetune.preset.small"), key=K("preset.small"), on_click=_apply, args=(suggested,),
                  disabled=current == suggested)


def _glue_picker() -> LabelledData | None:
    if not hub_reachable():
        st.warning(t("finetune.glue_offline"))
        return None
    task = st.selectbox(t("finetune.glue_task"), list(GLUE_TASKS), key=K("glue_task"), persist_state=KEEP)
    if not st.toggle(t("finetune.glue_go"), key=K("glue_go"), persist_state=KEEP):
        return None
    return _glue(task)


# ---------------------------------------------------------------------------------------------- curves
def curves(runs: list[tuple[str, list[dict]]], height: int = 360) -> go.Figure:
    """Training loss (left) and held-out accuracy (right; entity F1 for token runs) against step, one colour per run."""
    token = any(m.get("eval_f1") is not None for _, metrics in runs for m in metrics)
    right = "eval_f1" if token else "eval_accuracy"
    fig = make_subplots(rows=1, cols=2, subplot_titles=(t("finetune.fig.train_loss"),
                                                        t("finetune.fig.heldout_f1" if token else "finetune.fig.heldout_acc")))
    palette = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#B279A2", "#72B7B2", "#9D755D", "#FF9DA6")
    for i, (name, metrics) in enumerate(runs):
        color = palette[i % len(palette)]
        tr = [m for m in metrics if "loss" in m and m.get("loss") is not None]
        ev = [m for m in metrics if m.get(right) is not None]
        fig.add_scatter(x=[m["step"] for m in tr], y=[m["loss"] for m in tr], name=name, legendgroup=name,
                        line=dict(color=color), row=1, col=1)
        fig.add_scatter(x=[m["step"] for m in ev], y=[m[right] for m in ev], name=name, legendgroup=name,
                        mode="lines+markers", line=dict(color=color), showlegend=False, row=1, col=2)
    fig.update_xaxes(title_text=t("finetune.fig.step"))
    fig.update_yaxes(range=[0, 1.02], row=1, col=2)
    fig.update_layout(height=height, margin=dict(t=40, b=10), legend=dict(orientation="h", y=-0.2))
    return fig


def live(job) -> None:
    """While a run goes: samples/s and the curves so far (from job.metrics)."""
    metrics = list(job.metrics)
    if not any("loss" in m for m in metrics):
        return
    st.plotly_chart(presenter.scale(curves([(job.name, metrics)], height=320)), key=K(f"live.{job.id}"))


def confusion(result: FinetuneResult) -> go.Figure:
    names = list(result.label_names)
    fig = go.Figure(go.Heatmap(z=result.confusion, x=names, y=names, colorscale="Blues", text=result.confusion,
                               texttemplate="%{text}", hovertemplate=t("finetune.fig.cm_hover")))
    fig.update_layout(xaxis_title=t("finetune.fig.predicted"), yaxis_title=t("finetune.fig.true"),
                      yaxis_autorange="reversed", height=340, margin=dict(t=30, b=10))
    return fig


# ---------------------------------------------------------------------------------------------- results
@st.cache_resource(max_entries=4, show_spinner=False)
def _predictor(model_dir: str, device: str):
    return load_finetuned(model_dir, device)


def _stop_reason(reason: str) -> str:
    return t_or(f"finetune.stop.{reason.replace(' ', '_')}", reason)


def result_view(name: str, result: FinetuneResult) -> None:
    """Metrics, curves, confusion matrix, worst errors, try-it box, download and links to other pages."""
    if result.token_metrics is not None:
        token_result_view(name, result)
        return
    c = st.columns(6)
    c[0].metric(t("finetune.m.accuracy"), f"{result.accuracy:.1%}",
                t("finetune.m.vs_majority", d=f"{result.accuracy - result.majority_rate:+.1%}"))
    c[1].metric(t("finetune.m.macro_f1"), f"{result.macro_f1:.3f}")
    c[2].metric(t("finetune.m.steps"), f"{result.steps}", _stop_reason(result.stop_reason), delta_color="off")
    c[3].metric(t("finetune.m.time"), t("finetune.seconds", s=f"{result.train_seconds:,.1f}"))
    c[4].metric(t("finetune.m.samples_per_s"), f"{result.samples_per_s:,.1f}")
    c[5].metric(t("finetune.m.padding"), f"{result.padding_saved:.0%}", help=t("finetune.m.padding_help"))
    st.caption(t("finetune.result_caption", device=result.device, precision=result.precision,
                 trained=f"{result.params_trainable:,}", total=f"{result.params_total:,}", best=result.best_step))
    st.plotly_chart(presenter.scale(curves([(name, list(result.history) + list(result.evals))])), key=K(f"curves.{name}"))
    left, right = st.columns([2, 3])
    left.plotly_chart(presenter.scale(confusion(result)), key=K(f"cm.{name}"))
    with right:
        st.markdown(t("finetune.worst_errors"))
        errs = result.worst_errors(10)
        if errs:
            cols = {c: t(f"finetune.col.{c}") for c in ("text", "true", "predicted", "confidence", "p_true")}
            st.dataframe(pd.DataFrame(errs).rename(columns=cols), hide_index=True, height=300,
                         column_config={cols["confidence"]: st.column_config.ProgressColumn(min_value=0, max_value=1),
                                        cols["p_true"]: st.column_config.NumberColumn(format="%.2f")})
        else:
            st.success(t("finetune.no_errors"))
    _mix_view(name, result)
    _try_it(name, result)
    d1, d2, d3 = st.columns(3)
    d1.download_button(t("finetune.download"), lambda: zip_folder(result.model_dir),
                       file_name=f"{name}.zip", mime="application/zip", key=K(f"dl.{name}"))
    d2.button(t("finetune.pick"), key=K(f"pick.{name}"), on_click=_pick,
              args=(result.config.family, result.model_dir), help=t("finetune.pick_help"))
    d3.button(t("finetune.orig"), key=K(f"orig.{name}"), on_click=_pick,
              args=(result.config.family, result.config.checkpoint), help=t("finetune.orig_help"))


def _pick(family: str, checkpoint: str) -> None:
    from app.sidebar import pick

    pick(family, checkpoint)
    st.toast(t("finetune.picked", id=checkpoint))


def _try_it(name: str, result: FinetuneResult) -> None:
    with st.form(K(f"try.{name}")):
        text = st.text_area(t("finetune.try_text"), key=K(f"try_text.{name}"), height=80,
                            placeholder=t("finetune.try_placeholder"))
        go_ = st.form_submit_button(t("finetune.classify"))
    if go_ and text.strip():
        try:
            fm = _predictor(result.model_dir, "cpu" if result.device == "cpu" else "auto")
        except ModelLoadError as e:
            st.error(t("finetune.cannot_load", error=str(e)))
            return
        probs = [float(p) for p in classify(fm, [text.strip()])[0]]
        fig = go.Figure(go.Bar(x=list(fm.label_names), y=probs, text=[f"{p:.1%}" for p in probs],
                               textposition="outside")).update_layout(height=260, margin=dict(t=20, b=10),
                                                                      yaxis_range=[0, 1.1])
        st.plotly_chart(presenter.scale(fig), key=K(f"try_chart.{name}"))
        record_prediction(name, result, text.strip(), list(fm.label_names), probs, fig)
        st.session_state[K(f"try_done.{name}")] = text.strip()
    elif go_:
        st.warning(t("finetune.type_first"))
    if text.strip() and st.session_state.get(K(f"try_done.{name}")) == text.strip():  # heads off, same text
        from app.views.inspect.ablation import classify_heads

        classify_heads(lambda: _predictor(result.model_dir, "cpu" if result.device == "cpu" else "auto"),
                       text.strip(), K(f"try.{name}"), made_from=result.model_dir)


def compare(finished: list[tuple[str, FinetuneResult]]) -> None:
    """A table and overlaid curves across this session's finished runs."""
    rows = [dict(run=n, family=r.config.family, checkpoint=r.config.checkpoint, data=r.data_name,
                 accuracy=round(r.accuracy, 4), macro_f1=round(r.macro_f1, 4), majority=round(r.majority_rate, 4),
                 steps=r.steps, seconds=round(r.train_seconds, 1), samples_per_s=round(r.samples_per_s, 1),
                 params_m=round(r.params_total / 1e6, 2), trained_m=round(r.params_trainable / 1e6, 2),
                 lr=r.config.lr, batch=r.config.batch_size, max_len=r.config.max_length, pooling=r.config.pooling,
                 device=r.device, task=t(f"finetune.task_opt.{r.config.task}"),
                 entity_f1=None if r.token_metrics is None else round(r.token_metrics.f1, 4)) for n, r in finished]
    df = pd.DataFrame(rows)
    st.dataframe(df.rename(columns={c: t(f"finetune.col.{c}") for c in df.columns}), hide_index=True)
    st.plotly_chart(presenter.scale(curves([(n, list(r.history) + list(r.evals)) for n, r in finished])), key=K("compare.curves"))


# ---------------------------------------------------------------------------------------------- session report
def hyperparameters(result: FinetuneResult, train_rows: int | None = None) -> dict[str, str]:
    """The run's inputs under the labels the page shows: model, data and every hyperparameter."""
    cfg = result.config
    yes_no = lambda v: t("finetune.yes") if v else t("finetune.no")  # noqa: E731
    out = {t("finetune.rep.model"): cfg.checkpoint, t("finetune.rep.family"): registry.family(cfg.family).label,
           t("finetune.rep.data"): result.data_name}
    if train_rows is not None:
        out[t("finetune.rep.rows")] = t("finetune.rep.rows_value", train=train_rows, test=len(result.test_texts))
    out.update({
        t("finetune.epochs"): cfg.epochs, t("finetune.max_steps"): cfg.max_steps,
        t("finetune.lr"): f"{cfg.lr:.0e}", t("finetune.batch"): cfg.batch_size,
        t("finetune.max_len"): cfg.max_length, t("finetune.warmup"): cfg.warmup_ratio,
        t("finetune.wd"): cfg.weight_decay, t("finetune.clip"): cfg.grad_clip,
        t("finetune.pooling"): t(f"finetune.pooling_opt.{cfg.pooling}"),
        t("finetune.freeze_emb"): yes_no(cfg.freeze_embeddings), t("finetune.freeze_n"): cfg.freeze_layers,
        t("finetune.seed"): cfg.seed, t("finetune.patience"): cfg.patience, t("finetune.evals"): cfg.evals_per_epoch,
        t("finetune.rep.device"): f"{result.device} ({result.precision})", t("finetune.task"): t(f"finetune.task_opt.{cfg.task}"),
        t("finetune.dropout"): t("finetune.dropout_own") if cfg.dropout is None else cfg.dropout,
        t("finetune.grad_ckpt"): yes_no(cfg.gradient_checkpointing),
    })
    return {k: str(v) for k, v in out.items()}


def final_metrics(result: FinetuneResult) -> list[dict]:
    """The finished run's held-out metrics as (metric, value) rows."""
    m, v = t("finetune.rep.metric"), t("finetune.rep.value")
    pairs = [(t("finetune.m.accuracy"), f"{result.accuracy:.1%}"),
             (t("finetune.rep.majority"), f"{result.majority_rate:.1%}"),
             (t("finetune.m.macro_f1"), f"{result.macro_f1:.3f}"),
             (t("finetune.m.steps"), f"{result.steps} ({_stop_reason(result.stop_reason)})"),
             (t("finetune.rep.best_step"), str(result.best_step)),
             (t("finetune.rep.epochs_done"), f"{result.epochs_done:.2f}"),
             (t("finetune.m.time"), t("finetune.seconds", s=f"{result.train_seconds:,.1f}")),
             (t("finetune.m.samples_per_s"), f"{result.samples_per_s:,.1f}"),
             (t("finetune.rep.trained_params"), f"{result.params_trainable:,} / {result.params_total:,}")]
    if result.token_metrics is not None:
        tm = result.token_metrics
        pairs[:3] = [(t("finetune.tok.m.f1"), f"{tm.f1:.3f}"), (t("finetune.tok.m.precision"), f"{tm.precision:.3f}"),
                     (t("finetune.tok.m.recall"), f"{tm.recall:.3f}"), (t("finetune.tok.m.accuracy"), f"{tm.token_accuracy:.1%}"),
                     (t("finetune.tok.rep.majority"), f"{tm.majority_accuracy:.1%} / {tm.majority_f1:.3f}")]
    if result.layer_weights is not None:
        pairs.append((t("finetune.mix.title_plain"), ", ".join(f"{w:.3f}" for w in result.layer_weights)))
    return [{m: a, v: b} for a, b in pairs]


def record_run(job_id: int, name: str, result: FinetuneResult, train_rows: int | None = None) -> None:
    """One report entry per finished job (its id keys the entry): inputs, final metrics, curves, confusion matrix."""
    report.record(f"finetune:{job_id}", t("nav.finetune"),
                  t("finetune.rep.title", name=name, model=result.config.checkpoint, data=result.data_name),
                  hyperparameters(result, train_rows), rows=final_metrics(result),
                  figures=[curves([(name, list(result.history) + list(result.evals))]), confusion(result)]
                  + ([layer_weights_chart(result)] if result.layer_weights is not None else []))


def record_prediction(name: str, result: FinetuneResult, text: str, labels: list[str], probs: list[float],
                      fig: go.Figure) -> None:
    """The try-it box's prediction: one entry per (model, text), so classifying the same text again replaces it."""
    digest = hashlib.sha1(f"{result.model_dir}\n{text}".encode()).hexdigest()[:12]
    best = max(range(len(probs)), key=probs.__getitem__)
    lab, p = t("finetune.col.label"), t("finetune.col.probability")
    report.record(f"finetune:try:{digest}", t("nav.finetune"), t("finetune.rep.try_title", name=name),
                  {t("finetune.rep.model"): f"{name} ({result.config.checkpoint}, {result.data_name})",
                   t("finetune.rep.text"): text},
                  rows=[{lab: n, p: f"{q:.1%}"} for n, q in sorted(zip(labels, probs), key=lambda x: -x[1])],
                  text=t("finetune.rep.try_text", label=labels[best], p=f"{probs[best]:.1%}"), figures=[fig])


# ---------------------------------------------------------------------------------------------- token classification
TOKEN_SOURCES = ("sample", "upload")
TOKEN_UPLOAD_KINDS = ["conll", "iob", "bio", "txt", "tsv", "jsonl", "json"]
SPLIT_EXAMPLE = "Anneliese Kowalczyk flew from Reykjavik to Ljubljana on Thursday ."
# one colour per entity type (the first four: the bundled sample's PER, LOC, ORG, DATE in sorted order)
ENTITY_COLOURS = ("#fde2a7", "#c7e6c1", "#c9dcf5", "#f6c8d9", "#e1d5f2", "#d3eef0", "#f3d9c4", "#e6e6e6")


@st.cache_data(show_spinner=False)
def _token_sample() -> TokenData:
    return load_bundled_tokens()


def token_data_picker() -> TokenData | None:
    """The token task's data: the bundled sample or a CoNLL/IOB/JSONL upload; None after saying what is wrong."""
    source = st.radio(t("finetune.tok.data"), TOKEN_SOURCES, key=K("tok_source"), persist_state=KEEP,
                      horizontal=True, format_func=lambda s: t(f"finetune.tok.source.{s}"))
    try:
        if source == "sample":
            data = _token_sample()
            st.caption(t("finetune.tok.sample_caption", source=BUNDLED_TOKENS["source"],
                         licence=BUNDLED_TOKENS["licence"]))
        else:
            up = st.file_uploader(t("finetune.tok.upload"), type=TOKEN_UPLOAD_KINDS, key=K("tok_upload"),
                                  help=t("finetune.tok.upload_help"))
            st.caption(t("finetune.upload_limit", mb=f"{MAX_UPLOAD_MB:.0f}"))
            if up is None:
                st.info(t("finetune.tok.upload_info"))
                return None
            st.session_state.setdefault(K("tok_test_frac"), TEST_FRAC.default)
            frac = st.number_input(t("finetune.test_frac"), **TEST_FRAC.widget(), key=K("tok_test_frac"),
                                   persist_state=KEEP)
            data = read_tokens(up.getvalue(), up.name, test_fraction=float(frac))
    except DataError as e:
        st.error(as_text(str(e)))  # the message quotes the file's own line: shown as text
        return None
    for note in data.notes:
        st.info(as_text(note))
    st.caption(t("finetune.tok.summary", train=len(data.train), test=len(data.test),
                 words=f"{data.train.n_words:,}", tags=", ".join(data.label_names),
                 majority_tag=data.majority_tag(), majority=f"{data.majority_rate():.1%}"))
    return data


def split_table(spec, data: TokenData | None) -> None:
    """How the current model's tokenizer splits words into pieces, and which piece carries the word's tag."""
    from app.kit.loaders import get_model

    if spec is None:
        return
    try:
        tok = words_tokenizer(get_model(spec, "base").tokenizer)
    except (ModelLoadError, ValueError) as e:
        st.error(str(e))
        return
    fam = registry.family(spec.family)
    st.markdown(t("finetune.tok.split_title", family=fam.label, kind=fam.tokenizer_kind))
    st.session_state.setdefault(K("tok_split_text"), SPLIT_EXAMPLE)
    text = st.text_input(t("finetune.tok.split_input"), key=K("tok_split_text"), max_chars=400,
                         help=t("finetune.tok.split_help"))
    words = text.split()
    if not words:
        st.info(t("finetune.type_first"))
        return
    rows = piece_table(tok, words[:60])
    c = {k: t(f"finetune.tok.col.{k}") for k in ("word", "pieces", "n", "labelled", "ignored")}
    df = pd.DataFrame([{c["word"]: r["word"], c["pieces"]: " · ".join(r["pieces"]), c["n"]: len(r["pieces"]),
                        c["labelled"]: r["labelled"] or "", c["ignored"]: " · ".join(r["pieces"][1:])}
                       for r in rows])
    st.dataframe(df, hide_index=True, key=K("tok_split_table"))
    split = sum(len(r["pieces"]) > 1 for r in rows)
    st.caption(t("finetune.tok.split_caption", split=split, words=len(rows),
                 pieces=sum(len(r["pieces"]) for r in rows)))


def _colour(types: tuple[str, ...], typ: str) -> str:
    return ENTITY_COLOURS[types.index(typ) % len(ENTITY_COLOURS)] if typ in types else ENTITY_COLOURS[-1]


def tagged_html(words, tags, types: tuple[str, ...], gold=None) -> str:
    """One sentence with its predicted entities as coloured spans (type after them); with ``gold``, a word whose
    tag is wrong is underlined in red and its title gives the true tag. Every word is html-escaped."""
    esc = lambda s: html.escape(str(s), quote=True)  # noqa: E731
    starts = {s: (typ, e) for typ, s, e in entity_spans(tags)}
    out, i = [], 0
    while i < len(words):
        def word(j: int) -> str:
            if gold is not None and gold[j] != tags[j]:
                return (f'<span class="tk-wrong" title="{esc(t("finetune.tok.true_tag", tag=gold[j]))}">'
                        f'{esc(words[j])}</span>')
            return esc(words[j])
        if i in starts:
            typ, e = starts[i]
            inner = " ".join(word(j) for j in range(i, e + 1))
            out.append(f'<span class="tk-ent" style="background:{_colour(types, typ)}">{inner}'
                       f'<span class="tk-type">{esc(typ)}</span></span>')
            i = e + 1
        else:
            out.append(word(i))
            i += 1
    return " ".join(out)


TOKEN_CSS = ("<style>.tk-s{line-height:2.1;margin:0 0 .35rem 0;font-size:.95rem}"
             ".tk-ent{padding:.1rem .3rem;border-radius:.3rem;margin:0 .1rem}"
             ".tk-type{font-size:.65rem;font-weight:600;margin-left:.3rem;opacity:.75}"
             ".tk-wrong{text-decoration:underline wavy #d62728;text-underline-offset:3px}</style>")


def heldout_sentences_html(tm, types: tuple[str, ...], n: int = 12) -> str:
    rows = [f'<div class="tk-s">{tagged_html(w, p, types, g)}</div>'
            for w, g, p in list(zip(tm.words, tm.gold, tm.pred))[:n]]
    return TOKEN_CSS + "".join(rows)


def layer_weights_chart(result: FinetuneResult) -> go.Figure:
    """The scalar mix's learned softmax weights: embeddings, layer 1..L (an even mix would be 1/(L+1) each)."""
    w = list(result.layer_weights)
    names = [t("finetune.mix.embeddings")] + [t("finetune.mix.layer", n=i) for i in range(1, len(w))]
    # values at the foot of each bar, so the even-mix line never runs through them
    fig = go.Figure(go.Bar(x=names, y=w, text=[f"{v:.3f}" for v in w], textposition="inside",
                           insidetextanchor="start", textfont_color="white", marker_color="#4C78A8"))
    fig.add_hline(y=1 / len(w), line_dash="dot", line_color="#E45756", annotation_text=t("finetune.mix.even"),
                  annotation_position="top right", annotation_font_color="#E45756")
    fig.update_layout(height=300, margin=dict(t=30, b=10), yaxis_title=t("finetune.mix.weight"),
                      yaxis_range=[0, max(w) * 1.25])
    return fig


def _mix_view(name: str, result: FinetuneResult) -> None:
    if result.layer_weights is None:
        return
    st.markdown(t("finetune.mix.title"))
    st.plotly_chart(presenter.scale(layer_weights_chart(result)), key=K(f"mix.{name}"))
    top = max(range(len(result.layer_weights)), key=result.layer_weights.__getitem__)
    st.caption(t("finetune.mix.caption", gamma=f"{result.layer_gamma:.2f}",
                 top=t("finetune.mix.embeddings") if top == 0 else t("finetune.mix.layer", n=top),
                 w=f"{result.layer_weights[top]:.3f}", even=f"{1 / len(result.layer_weights):.3f}"))


def token_result_view(name: str, result: FinetuneResult) -> None:
    """A token run: entity P/R/F1 and token accuracy against the majority tag, curves, per-type table, held-out
    sentences with predicted entities, try-it tagging, download and links."""
    tm = result.token_metrics
    c = st.columns(6)
    c[0].metric(t("finetune.tok.m.f1"), f"{tm.f1:.3f}",
                t("finetune.tok.m.vs_majority", d=f"{tm.f1 - tm.majority_f1:+.3f}", tag=tm.majority_tag))
    c[1].metric(t("finetune.tok.m.precision"), f"{tm.precision:.3f}")
    c[2].metric(t("finetune.tok.m.recall"), f"{tm.recall:.3f}")
    c[3].metric(t("finetune.tok.m.accuracy"), f"{tm.token_accuracy:.1%}",
                t("finetune.tok.m.vs_majority", d=f"{tm.token_accuracy - tm.majority_accuracy:+.1%}", tag=tm.majority_tag))
    c[4].metric(t("finetune.m.steps"), f"{result.steps}", _stop_reason(result.stop_reason), delta_color="off")
    c[5].metric(t("finetune.m.time"), t("finetune.seconds", s=f"{result.train_seconds:,.1f}"))
    st.caption(t("finetune.tok.baseline", tag=tm.majority_tag, acc=f"{tm.majority_accuracy:.1%}",
                 f1=f"{tm.majority_f1:.3f}"))
    if tm.words_truncated:
        st.caption(t("finetune.tok.truncated", n=tm.words_truncated, max_len=result.config.max_length))
    st.caption(t("finetune.result_caption", device=result.device, precision=result.precision,
                 trained=f"{result.params_trainable:,}", total=f"{result.params_total:,}", best=result.best_step))
    st.plotly_chart(presenter.scale(curves([(name, list(result.history) + list(result.evals))])), key=K(f"curves.{name}"))
    left, right = st.columns([2, 3])
    with left:
        st.markdown(t("finetune.tok.per_label"))
        cols = {k: t(f"finetune.tok.col.{k}") for k in ("label", "precision", "recall", "f1", "support")}
        st.dataframe(pd.DataFrame(list(tm.per_label)).rename(columns=cols), hide_index=True,
                     key=K(f"per_label.{name}"),
                     column_config={cols[k]: st.column_config.NumberColumn(format="%.3f")
                                    for k in ("precision", "recall", "f1")})
    with right:
        st.markdown(t("finetune.tok.heldout"))
        types = tuple(sorted({n.split("-", 1)[1] for n in result.label_names if "-" in n}))
        st.html(heldout_sentences_html(tm, types))
    _mix_view(name, result)
    _tag_it(name, result, types)
    d1, d2, d3 = st.columns(3)
    d1.download_button(t("finetune.download"), lambda: zip_folder(result.model_dir),
                       file_name=f"{name}.zip", mime="application/zip", key=K(f"dl.{name}"))
    d2.button(t("finetune.pick"), key=K(f"pick.{name}"), on_click=_pick,
              args=(result.config.family, result.model_dir), help=t("finetune.pick_help"))
    d3.button(t("finetune.orig"), key=K(f"orig.{name}"), on_click=_pick,
              args=(result.config.family, result.config.checkpoint), help=t("finetune.orig_help"))


def _tag_it(name: str, result: FinetuneResult, types: tuple[str, ...]) -> None:
    with st.form(K(f"tag.{name}")):
        text = st.text_input(t("finetune.tok.try_text"), key=K(f"tag_text.{name}"), max_chars=1000,
                             placeholder=t("finetune.tok.try_placeholder"))
        go_ = st.form_submit_button(t("finetune.tok.tag"))
    if go_ and not text.strip():
        st.warning(t("finetune.type_first"))
        return
    if not text.strip() or not (go_ or st.session_state.get(K(f"tag_done.{name}")) == text.strip()):
        return
    try:
        fm = _predictor(result.model_dir, "cpu" if result.device == "cpu" else "auto")
    except ModelLoadError as e:
        st.error(t("finetune.cannot_load", error=str(e)))
        return
    tagged = tag(fm, [text.strip()])[0]
    st.session_state[K(f"tag_done.{name}")] = text.strip()
    if not tagged:
        st.warning(t("finetune.type_first"))
        return
    words, tags_ = [w for w, _, _ in tagged], [g for _, g, _ in tagged]
    st.html(TOKEN_CSS + f'<div class="tk-s">{tagged_html(words, tags_, types)}</div>')
    cw, ct, cp = (t(f"finetune.tok.col.{k}") for k in ("word", "tag", "probability"))
    st.dataframe(pd.DataFrame([{cw: w, ct: g, cp: p} for w, g, p in tagged]), hide_index=True,
                 key=K(f"tag_table.{name}"), column_config={cp: st.column_config.ProgressColumn(min_value=0, max_value=1)})


# ---------------------------------------------------------------------------------------------- remedies
def advice(cfg: FinetuneConfig | None, hidden: int | None) -> None:
    """The config's advice (max length under 64, lr outside the article's range, ...) as warnings."""
    if cfg is None:
        return
    for line in cfg.advice(hidden):
        st.warning(line)


def oom_offer(run: dict, restart) -> None:
    """Under a run that ran out of memory: one button per remedy that would change its config."""
    names = remedies_for(run["cfg"])
    if not names:
        return
    st.markdown(t("finetune.oom.offer"))
    cols = st.columns(len(names))
    for col, n in zip(cols, names):
        col.button(t("finetune.oom.restart", remedy=t_or(f"finetune.remedy.{n}", REMEDIES[n][0])),
                   key=K(f"remedy.{run['name']}.{n}"), on_click=restart, args=(run, n))


def oom_panel(cfg: FinetuneConfig | None, data) -> None:
    """The "Out of memory?" expander: helper PR's measurement panel (app.views.train.remedies), when it is installed."""
    with st.expander(t("finetune.oom.expander")):
        try:
            from app.views.train import remedies as render_remedies
        except ImportError:  # the page works without it: the article's advice, no measurement
            st.caption(t("finetune.oom.article"))
            st.caption(t("finetune.oom.unavailable"))
            return
        render_remedies.oom_panel(cfg, data)  # it says itself when the settings or the data are missing

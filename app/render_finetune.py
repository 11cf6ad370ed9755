"""The Fine-tune page's pieces: data picker, live curves, result view, run comparison (plotly), report entries."""
from __future__ import annotations

import hashlib

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app import presenter, report, state
from app.i18n import t, t_or
from core.datasets_local import (BUNDLED, GLUE_TASKS, MAX_UPLOAD_MB, DataError, LabelledData, from_table,
                                 guess_columns, load_bundled, load_glue, read_table)
from core.finetune import FinetuneResult, classify, load_finetuned, zip_folder
from core.models import FAMILIES, ModelLoadError, hub_reachable

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
    st.session_state.setdefault(K("test_frac"), 0.2)
    frac = c4.number_input(t("finetune.test_frac"), 0.05, 0.5, step=0.05, key=K("test_frac"), persist_state=KEEP)
    return from_table(df, text, label, None if text_b == NO_SECOND_TEXT else text_b, test_fraction=frac, name=up.name)


# ---------------------------------------------------------------------------------------------- presets
PRESET_KEYS = {"epochs": "epochs", "max_steps": "max_steps", "lr": "lr", "batch_size": "batch",
               "max_length": "max_len", "warmup_ratio": "warmup", "weight_decay": "wd", "grad_clip": "clip"}


def _apply(settings: dict) -> None:
    for field_, name in PRESET_KEYS.items():
        st.session_state[K(name)] = settings[field_]


def presets(hidden: int | None, suggested: dict, articles: dict) -> None:
    """Which settings the form holds (this model size's or the articles'), why they differ, and a button for each."""
    current = {f: st.session_state.get(K(n)) for f, n in PRESET_KEYS.items()}
    small = suggested != articles
    if current == articles:
        st.caption(t("finetune.preset.articles_in_use"))
    elif current == suggested:
        st.caption(t("finetune.preset.small_in_use", hidden=hidden, lr=f"{suggested['lr']:.0e}",
                     epochs=suggested["epochs"], max_len=suggested["max_length"]))
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
    """Training loss (left) and held-out accuracy (right) against step, one colour per run."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(t("finetune.fig.train_loss"), t("finetune.fig.heldout_acc")))
    palette = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#B279A2", "#72B7B2", "#9D755D", "#FF9DA6")
    for i, (name, metrics) in enumerate(runs):
        color = palette[i % len(palette)]
        tr = [m for m in metrics if "loss" in m and m.get("loss") is not None]
        ev = [m for m in metrics if m.get("eval_accuracy") is not None]
        fig.add_scatter(x=[m["step"] for m in tr], y=[m["loss"] for m in tr], name=name, legendgroup=name,
                        line=dict(color=color), row=1, col=1)
        fig.add_scatter(x=[m["step"] for m in ev], y=[m["eval_accuracy"] for m in ev], name=name, legendgroup=name,
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
        from app.render_ablation import classify_heads

        classify_heads(lambda: _predictor(result.model_dir, "cpu" if result.device == "cpu" else "auto"),
                       text.strip(), K(f"try.{name}"), made_from=result.model_dir)


def compare(finished: list[tuple[str, FinetuneResult]]) -> None:
    """A table and overlaid curves across this session's finished runs."""
    rows = [dict(run=n, family=r.config.family, checkpoint=r.config.checkpoint, data=r.data_name,
                 accuracy=round(r.accuracy, 4), macro_f1=round(r.macro_f1, 4), majority=round(r.majority_rate, 4),
                 steps=r.steps, seconds=round(r.train_seconds, 1), samples_per_s=round(r.samples_per_s, 1),
                 params_m=round(r.params_total / 1e6, 2), trained_m=round(r.params_trainable / 1e6, 2),
                 lr=r.config.lr, batch=r.config.batch_size, max_len=r.config.max_length, pooling=r.config.pooling,
                 device=r.device) for n, r in finished]
    df = pd.DataFrame(rows)
    st.dataframe(df.rename(columns={c: t(f"finetune.col.{c}") for c in df.columns}), hide_index=True)
    st.plotly_chart(presenter.scale(curves([(n, list(r.history) + list(r.evals)) for n, r in finished])), key=K("compare.curves"))


# ---------------------------------------------------------------------------------------------- session report
def hyperparameters(result: FinetuneResult, train_rows: int | None = None) -> dict[str, str]:
    """The run's inputs under the labels the page shows: model, data and every hyperparameter."""
    cfg = result.config
    yes_no = lambda v: t("finetune.yes") if v else t("finetune.no")  # noqa: E731
    out = {t("finetune.rep.model"): cfg.checkpoint, t("finetune.rep.family"): FAMILIES[cfg.family].label,
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
        t("finetune.rep.device"): f"{result.device} ({result.precision})",
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
    return [{m: a, v: b} for a, b in pairs]


def record_run(job_id: int, name: str, result: FinetuneResult, train_rows: int | None = None) -> None:
    """One report entry per finished job (its id keys the entry): inputs, final metrics, curves, confusion matrix."""
    report.record(f"finetune:{job_id}", t("nav.finetune"),
                  t("finetune.rep.title", name=name, model=result.config.checkpoint, data=result.data_name),
                  hyperparameters(result, train_rows), rows=final_metrics(result),
                  figures=[curves([(name, list(result.history) + list(result.evals))]), confusion(result)])


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

"""The Fine-tune page's pieces: data picker, live curves, result view, run comparison (plotly)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app import state
from core.datasets_local import BUNDLED, GLUE_TASKS, DataError, LabelledData, from_table, load_bundled, load_glue, read_table
from core.finetune import FinetuneResult, classify, load_finetuned, zip_folder
from core.models import ModelLoadError, hub_reachable

PAGE = "finetune"
SOURCES = ("Bundled: UCI drug reviews", "Bundled: WordNet glosses", "Upload CSV / TSV / JSONL", "GLUE (needs the Hub)")


def K(name: str) -> str:
    return state.key(PAGE, name)


# ---------------------------------------------------------------------------------------------- data
@st.cache_data(show_spinner=False)
def _bundled(key: str) -> LabelledData:
    return load_bundled(key)


@st.cache_data(show_spinner="Downloading GLUE …")
def _glue(task: str) -> LabelledData:
    return load_glue(task)


def data_picker() -> LabelledData | None:
    """Draw the data choice; return the labelled data, or None after saying what is missing or wrong."""
    source = st.radio("Data", SOURCES, key=K("source"), horizontal=True)
    try:
        if source in SOURCES[:2]:
            info = BUNDLED["drugreview" if source == SOURCES[0] else "wordnet"]
            data = _bundled(info.key)
            st.caption(f"{info.description} Source: {info.source}. Licence: {info.licence}.")
        elif source == SOURCES[2]:
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
    st.caption(f"**{len(data.train)}** training and **{len(data.test)}** held-out rows · classes ({counts}) · "
               f"always guessing the most common class scores **{data.majority_rate():.1%}** held-out")
    return data


def _upload() -> LabelledData | None:
    up = st.file_uploader("A labelled table", type=["csv", "tsv", "jsonl"], key=K("upload"),
                          help="One row per example: a text column (or two, for pairs) and a label column.")
    if up is None:
        st.info("Upload a .csv, .tsv or .jsonl file with a text column and a label column.")
        return None
    df = read_table(up.getvalue(), up.name)
    cols = [str(c) for c in df.columns]
    c1, c2, c3, c4 = st.columns(4)
    text = c1.selectbox("Text column", cols, key=K("text_col"))
    text_b = c2.selectbox("Second text (pairs)", ["(none)"] + cols, key=K("text_col_b"))
    label = c3.selectbox("Label column", cols, index=min(1, len(cols) - 1), key=K("label_col"))
    frac = c4.number_input("Held-out share", 0.05, 0.5, 0.2, 0.05, key=K("test_frac"))
    return from_table(df, text, label, None if text_b == "(none)" else text_b, test_fraction=frac, name=up.name)


def _glue_picker() -> LabelledData | None:
    if not hub_reachable():
        st.warning("Offline: GLUE is downloaded from the Hugging Face Hub, which this machine cannot reach. "
                   "Use the bundled drug reviews or upload a file.")
        return None
    task = st.selectbox("GLUE task", list(GLUE_TASKS), key=K("glue_task"))
    if not st.toggle("Download and use it", key=K("glue_go")):
        return None
    return _glue(task)


# ---------------------------------------------------------------------------------------------- curves
def curves(runs: list[tuple[str, list[dict]]], height: int = 360) -> go.Figure:
    """Training loss (left) and held-out accuracy (right) against step, one colour per run."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("training loss", "held-out accuracy"))
    palette = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#B279A2", "#72B7B2", "#9D755D", "#FF9DA6")
    for i, (name, metrics) in enumerate(runs):
        color = palette[i % len(palette)]
        tr = [m for m in metrics if "loss" in m and m.get("loss") is not None]
        ev = [m for m in metrics if m.get("eval_accuracy") is not None]
        fig.add_scatter(x=[m["step"] for m in tr], y=[m["loss"] for m in tr], name=name, legendgroup=name,
                        line=dict(color=color), row=1, col=1)
        fig.add_scatter(x=[m["step"] for m in ev], y=[m["eval_accuracy"] for m in ev], name=name, legendgroup=name,
                        mode="lines+markers", line=dict(color=color), showlegend=False, row=1, col=2)
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(range=[0, 1.02], row=1, col=2)
    fig.update_layout(height=height, margin=dict(t=40, b=10), legend=dict(orientation="h", y=-0.2))
    return fig


def live(job) -> None:
    """While a run goes: samples/s and the curves so far (from job.metrics)."""
    metrics = list(job.metrics)
    if not any("loss" in m for m in metrics):
        return
    st.plotly_chart(curves([(job.name, metrics)], height=320), key=K(f"live.{job.id}"))


def confusion(result: FinetuneResult) -> go.Figure:
    names = list(result.label_names)
    fig = go.Figure(go.Heatmap(z=result.confusion, x=names, y=names, colorscale="Blues", text=result.confusion,
                               texttemplate="%{text}", hovertemplate="true %{y} → predicted %{x}: %{z}<extra></extra>"))
    fig.update_layout(xaxis_title="predicted", yaxis_title="true", yaxis_autorange="reversed", height=340,
                      margin=dict(t=30, b=10))
    return fig


# ---------------------------------------------------------------------------------------------- results
@st.cache_resource(max_entries=4, show_spinner=False)
def _predictor(model_dir: str, device: str):
    return load_finetuned(model_dir, device)


def result_view(name: str, result: FinetuneResult) -> None:
    """Metrics, curves, confusion matrix, worst errors, try-it box, download and links to other pages."""
    c = st.columns(6)
    c[0].metric("Held-out accuracy", f"{result.accuracy:.1%}", f"{result.accuracy - result.majority_rate:+.1%} vs majority")
    c[1].metric("Macro-F1", f"{result.macro_f1:.3f}")
    c[2].metric("Steps", f"{result.steps}", result.stop_reason, delta_color="off")
    c[3].metric("Training time", f"{result.train_seconds:,.1f}s")
    c[4].metric("Samples/s", f"{result.samples_per_s:,.1f}")
    c[5].metric("Padding avoided", f"{result.padding_saved:.0%}", help="Pad tokens saved by dynamic padding with "
                "length-grouped batches, against padding every batch to max length.")
    st.caption(f"On `{result.device}` ({result.precision}) · {result.params_trainable:,} of {result.params_total:,} "
               f"parameters trained · best evaluation at step {result.best_step} (its weights were kept)")
    st.plotly_chart(curves([(name, list(result.history) + list(result.evals))]), key=K(f"curves.{name}"))
    left, right = st.columns([2, 3])
    left.plotly_chart(confusion(result), key=K(f"cm.{name}"))
    with right:
        st.markdown("**Worst errors** (wrong and most confident)")
        errs = result.worst_errors(10)
        if errs:
            st.dataframe(pd.DataFrame(errs), hide_index=True, height=300,
                         column_config={"confidence": st.column_config.ProgressColumn(min_value=0, max_value=1),
                                        "p_true": st.column_config.NumberColumn(format="%.2f")})
        else:
            st.success("No held-out errors.")
    _try_it(name, result)
    d1, d2, d3 = st.columns(3)
    d1.download_button("Download model folder (.zip)", lambda: zip_folder(result.model_dir),
                       file_name=f"{name}.zip", mime="application/zip", key=K(f"dl.{name}"))
    d2.button("Inspect it in the sidebar model picker", key=K(f"pick.{name}"), on_click=_pick,
              args=(result.config.family, result.model_dir),
              help="Selects the fine-tuned model in the sidebar, so Attention and Attributions show it.")
    d3.button("Back to the original checkpoint", key=K(f"orig.{name}"), on_click=_pick,
              args=(result.config.family, result.config.checkpoint),
              help="Compare attention before and after fine-tuning by switching between the two.")


def _pick(family: str, checkpoint: str) -> None:
    from app.sidebar import CUSTOM_OPTION, _checkpoint_options

    st.session_state[state.FAMILY] = family
    if checkpoint in _checkpoint_options(family):
        st.session_state[state.CHECKPOINT] = checkpoint
    else:  # a folder or Hub id typed in earlier: goes back through the custom box
        st.session_state[state.CHECKPOINT] = CUSTOM_OPTION
        st.session_state[state.CUSTOM] = checkpoint
    st.toast(f"Sidebar model: {checkpoint}. Open Attention or Attributions to look inside it.")


def _try_it(name: str, result: FinetuneResult) -> None:
    with st.form(K(f"try.{name}")):
        text = st.text_area("Try it: a new text", key=K(f"try_text.{name}"), height=80,
                            placeholder="This medicine worked wonders, no side effects at all.")
        go_ = st.form_submit_button("Classify")
    if go_ and text.strip():
        try:
            fm = _predictor(result.model_dir, "cpu" if result.device == "cpu" else "auto")
        except ModelLoadError as e:
            st.error(f"The fine-tuned folder cannot be loaded: {e}")
            return
        probs = classify(fm, [text.strip()])[0]
        st.plotly_chart(go.Figure(go.Bar(x=list(fm.label_names), y=probs, text=[f"{p:.1%}" for p in probs],
                                         textposition="outside")).update_layout(height=260, margin=dict(t=20, b=10),
                                                                                yaxis_range=[0, 1.1]),
                        key=K(f"try_chart.{name}"))
    elif go_:
        st.warning("Type some text first.")


def compare(finished: list[tuple[str, FinetuneResult]]) -> None:
    """A table and overlaid curves across this session's finished runs."""
    rows = [dict(run=n, family=r.config.family, checkpoint=r.config.checkpoint, data=r.data_name,
                 accuracy=round(r.accuracy, 4), macro_f1=round(r.macro_f1, 4), majority=round(r.majority_rate, 4),
                 steps=r.steps, seconds=round(r.train_seconds, 1), samples_per_s=round(r.samples_per_s, 1),
                 params_m=round(r.params_total / 1e6, 2), trained_m=round(r.params_trainable / 1e6, 2),
                 lr=r.config.lr, batch=r.config.batch_size, max_len=r.config.max_length, pooling=r.config.pooling,
                 device=r.device) for n, r in finished]
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    st.plotly_chart(curves([(n, list(r.history) + list(r.evals)) for n, r in finished]), key=K("compare.curves"))

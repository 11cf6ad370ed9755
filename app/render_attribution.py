"""Renderers for the Attributions page: coloured tokens, bar chart, methods side by side, rank correlations,
the token x layer heatmap, and the batch export. Figures are plain functions of core results (testable)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from core.attribution import (METHODS, AttributionResult, BatchResult, BatchRow, batch_to_csv, batch_to_html,
                              tokens_html)

DIVERGING = [[0.0, "#d73027"], [0.5, "#ffffff"], [1.0, "#1a9850"]]


def _labels(tokens: tuple[str, ...]) -> list[str]:
    """Unique axis labels (plotly merges equal categories): '3·the'."""
    return [f"{i}·{t}" for i, t in enumerate(tokens)]


def _normalised(scores: np.ndarray) -> np.ndarray:
    m = float(np.max(np.abs(scores))) if len(scores) else 0.0
    return scores / m if m > 0 else scores


def bar_chart(res: AttributionResult, method: str) -> go.Figure:
    """One method's attribution per token, green up / red down."""
    m = res.method(method)
    fig = go.Figure(go.Bar(x=_labels(res.tokens), y=m.scores,
                           marker_color=["#1a9850" if v >= 0 else "#d73027" for v in m.scores],
                           hovertemplate="%{x}: %{y:+.4f}<extra></extra>"))
    fig.update_layout(yaxis_title=f"{m.label} attribution", margin=dict(t=30, b=10), height=320)
    return fig


def methods_heatmap(res: AttributionResult) -> go.Figure:
    """Every method for the same input, each scaled to its own max |value| so they can be compared."""
    z = np.stack([_normalised(m.scores) for m in res.methods])
    fig = go.Figure(go.Heatmap(z=z, x=_labels(res.tokens), y=[m.label for m in res.methods], zmin=-1, zmax=1,
                               colorscale=DIVERGING, hovertemplate="%{y}<br>%{x}: %{z:+.2f}<extra></extra>"))
    fig.update_layout(margin=dict(t=30, b=10), height=120 + 40 * len(res.methods))
    return fig


def correlation_heatmap(res: AttributionResult) -> go.Figure:
    names = [m.label for m in res.methods]
    fig = go.Figure(go.Heatmap(z=res.rank_corr, x=names, y=names, zmin=-1, zmax=1, colorscale=DIVERGING,
                               text=np.round(res.rank_corr, 2), texttemplate="%{text}",
                               hovertemplate="%{y} vs %{x}: ρ = %{z:.2f}<extra></extra>"))
    fig.update_layout(margin=dict(t=30, b=10), height=140 + 45 * len(names))
    return fig


def layer_heatmap(res: AttributionResult) -> go.Figure:
    """LayerIG at each encoder layer: tokens across, layers down (row-normalised)."""
    z = np.stack([_normalised(r) for r in res.layer_scores])
    fig = go.Figure(go.Heatmap(z=z, x=_labels(res.tokens), y=list(res.layer_names), zmin=-1, zmax=1,
                               colorscale=DIVERGING, customdata=res.layer_scores,
                               hovertemplate="%{y}<br>%{x}: %{customdata:+.4f}<extra></extra>"))
    fig.update_layout(yaxis_autorange="reversed", margin=dict(t=30, b=10), height=140 + 30 * len(res.layer_names))
    return fig


def show_result(res: AttributionResult, key: str) -> None:
    """The whole result: target, warnings, coloured tokens per method, charts, layers, downloads."""
    st.markdown(f"**Explaining:** {res.target_label}")
    c1, c2, c3 = st.columns(3)
    c1.metric("f(x)", f"{res.f_x:+.4f}")
    c2.metric(f"f(baseline: {res.baseline})", f"{res.f_baseline:+.4f}")
    c3.metric("f(x) − f(baseline)", f"{res.f_x - res.f_baseline:+.4f}")
    if res.candidates:
        st.caption("Model's view: " + " · ".join(f"`{w}` {p:.1%}" for w, p in res.candidates))
    for note in res.notes:
        st.warning(note)
    if res.delta_warning:
        st.warning(res.delta_warning)
    for key_, why in res.skipped:
        st.info(f"**{METHODS.get(key_, 'Per-layer attribution')} does not apply here.** {why}")
    st.caption("Green pushes the explained score up, red pushes it down (Saliency is a magnitude: always ≥ 0). "
               "Faded tokens are special tokens, kept fixed in the baseline.")
    for m in res.methods:
        extra = "" if m.delta is None else f" · convergence delta {m.delta:+.2e}"
        st.markdown(f"**{m.label}** <small>({m.note}; {m.seconds:.2f}s{extra})</small>", unsafe_allow_html=True)
        st.html(tokens_html(res.tokens, m.scores, res.special))
    pick = st.selectbox("Bar chart of", [m.method for m in res.methods], format_func=METHODS.get,
                        key=f"{key}.bar")
    st.plotly_chart(bar_chart(res, pick), key=f"{key}.barfig")
    if len(res.methods) > 1:
        st.subheader("Methods side by side")
        st.plotly_chart(methods_heatmap(res), key=f"{key}.methods")
        st.caption("Spearman rank correlation between methods over the non-special tokens: low or negative "
                   "values mean the methods disagree about which tokens matter.")
        st.plotly_chart(correlation_heatmap(res), key=f"{key}.corr")
    if res.layer_scores is not None:
        st.subheader("Per layer (LayerIG at each encoder layer)")
        st.plotly_chart(layer_heatmap(res), key=f"{key}.layers")
    single = BatchResult((BatchRow(" ".join(res.tokens)),), (res,), (None,))
    d1, d2 = st.columns(2)
    d1.download_button("Download CSV", batch_to_csv(single), "attribution.csv", "text/csv", key=f"{key}.csv")
    d2.download_button("Download HTML", batch_to_html(single), "attribution.html", "text/html", key=f"{key}.html")


def show_batch(batch: BatchResult, key: str) -> None:
    ok = sum(r is not None for r in batch.results)
    st.success(f"{ok} of {len(batch.rows)} rows explained.")
    for i, (row, err) in enumerate(zip(batch.rows, batch.errors), start=1):
        if err:
            st.warning(f"Row {i} ({row.text[:60]}): {err}")
    d1, d2 = st.columns(2)
    d1.download_button("Download CSV", batch_to_csv(batch), "attributions.csv", "text/csv", key=f"{key}.csv")
    d2.download_button("Download standalone HTML", batch_to_html(batch), "attributions.html", "text/html",
                       key=f"{key}.html")
    for i, res in enumerate(batch.results[:20], start=1):
        if res is not None:
            st.markdown(f"**{i}.** {res.target_label}")
            st.html(tokens_html(res.tokens, res.methods[0].scores, res.special))

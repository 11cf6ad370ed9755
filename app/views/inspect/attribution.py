"""Renderers for the Attributions page: coloured tokens, bar chart, methods side by side, rank correlations,
the token x layer heatmap, and the batch export. Figures are plain functions of core results (testable).
Labels come from assets/i18n/attribution.toml; core's own texts (target label, notes, errors) stay as core wrote
them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, report, urlstate
from app.kit.download_button import download
from app.kit.exports import (
    DIVERGING,
    NEGATIVE,
    POSITIVE,
    batch_to_csv,
    batch_to_html,
    faithfulness_csv,
    tokens_html,
)
from app.kit.i18n import explain, t, t_or
from app.kit.plot_text import plot_texts
from app.views.inspect import faithfulness as fv
from app.views.inspect.attention import option_labels
from core.base.text import display_piece
from core.inspect.attribution import AttributionResult, BatchResult, BatchRow
from core.inspect.attribution_inputs import BASELINES, AttributionConfig
from core.inspect.attribution_methods import METHODS
from core.inspect.faithfulness import rank_methods


def method_label(key: str) -> str:
    """A method's name in the session's language (the registry's name when the files lack it)."""
    return t_or(f"attribution.method.{key}", METHODS[key].label if key in METHODS else key)


def methods_help(keys) -> str:
    """The method picker's help: the page's note, then what each offered method computes and costs (the
    registry's descriptions, as core writes them)."""
    about = "\n".join(f"- **{method_label(k)}**: {explain(METHODS[k].description)}" for k in keys)
    return t("attribution.methods_help") + "\n\n" + about


def baseline_label(key: str) -> str:
    return t_or(f"attribution.baseline.{key}", BASELINES.get(key, key))


def _labels(tokens: tuple[str, ...]) -> list[str]:
    """Unique axis labels (plotly merges equal categories): '3·the', shown as typed (no markup made of them)."""
    return plot_texts(f"{i}·{tok}" for i, tok in enumerate(tokens))


def shown_tokens(res: AttributionResult) -> tuple[str, ...]:
    """The tokens as a person reads them (no Ġ/▁; core.base.text.display_piece), for charts, tables and exports."""
    labels = getattr(res, "labels", ())  # a result kept from before this field, or a stand-in: made here
    return tuple(labels) if len(labels) == len(res.tokens) else tuple(display_piece(p) for p in res.tokens)


def for_export(res: AttributionResult) -> AttributionResult:
    """``res`` with its tokens as a person reads them: the CSV and HTML exports write ``tokens`` as they are."""
    return replace(res, tokens=shown_tokens(res))


def _normalised(scores: np.ndarray) -> np.ndarray:
    m = float(np.max(np.abs(scores))) if len(scores) else 0.0
    return scores / m if m > 0 else scores


def bar_chart(res: AttributionResult, method: str) -> go.Figure:
    """One method's attribution per token, green up / red down."""
    m = res.method(method)
    fig = go.Figure(
        go.Bar(
            x=_labels(shown_tokens(res)),
            y=m.scores,
            marker_color=[POSITIVE if v >= 0 else NEGATIVE for v in m.scores],
            customdata=plot_texts(res.tokens),  # the raw piece
            hovertemplate="%{x} (%{customdata}): %{y:+.4f}<extra></extra>",
        )
    )
    fig.update_layout(  # the method names the chart; its y axis only says what the bars are (in 中文 a method's name
        title=dict(text=method_label(m.method), font=dict(size=14)),  # and that overran the 320 px axis)
        xaxis_title=t("attribution.fig.bar_x"),
        yaxis_title=t("attribution.fig.bar_y"),
        margin=dict(t=40, b=10),
        height=320,
    )
    return fig


def methods_heatmap(res: AttributionResult) -> go.Figure:
    """Every method for the same input, each scaled to its own max |value| so they can be compared."""
    z = np.stack([_normalised(m.scores) for m in res.methods])
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=_labels(shown_tokens(res)),
            y=[method_label(m.method) for m in res.methods],
            zmin=-1,
            zmax=1,
            colorscale=DIVERGING,
            hovertemplate="%{y}<br>%{x}: %{z:+.2f}<extra></extra>",
        )
    )
    fig.update_layout(margin=dict(t=30, b=10), height=120 + 40 * len(res.methods))
    return fig


def correlation_heatmap(res: AttributionResult) -> go.Figure:
    names = [method_label(m.method) for m in res.methods]
    fig = go.Figure(
        go.Heatmap(
            z=res.rank_corr,
            x=names,
            y=names,
            zmin=-1,
            zmax=1,
            colorscale=DIVERGING,
            text=np.round(res.rank_corr, 2),
            texttemplate="%{text}",
            hovertemplate=t("attribution.fig.hover_corr"),
        )
    )
    fig.update_layout(margin=dict(t=30, b=10), height=140 + 45 * len(names))
    return fig


def layer_heatmap(res: AttributionResult) -> go.Figure:
    """LayerIG at each encoder layer: tokens across, layers down (row-normalised)."""
    z = np.stack([_normalised(r) for r in res.layer_scores])
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=_labels(shown_tokens(res)),
            y=list(res.layer_names),
            zmin=-1,
            zmax=1,
            colorscale=DIVERGING,
            customdata=res.layer_scores,
            hovertemplate="%{y}<br>%{x}: %{customdata:+.4f}<extra></extra>",
        )
    )
    fig.update_layout(yaxis_autorange="reversed", margin=dict(t=30, b=10), height=140 + 30 * len(res.layer_names))
    return fig


def show_result(res: AttributionResult, key: str, mask_token: str = "[MASK]") -> list[go.Figure]:
    """The whole result: target, warnings, coloured tokens per method, charts, faithfulness, layers, downloads.
    ``mask_token``: the model's, named where faithfulness says how it removed a token. Returns the figures it drew
    (for the session report)."""
    st.markdown(t("attribution.explaining", target=explain(res.target_label)))
    c1, c2, c3 = st.columns(3)
    c1.metric("f(x)", f"{res.f_x:+.4f}")  # i18n: ok (a formula)
    c2.metric(t("attribution.f_baseline", baseline=baseline_label(res.baseline)), f"{res.f_baseline:+.4f}")
    c3.metric(t("attribution.f_diff"), f"{res.f_x - res.f_baseline:+.4f}")
    if res.candidates:
        st.caption(t("attribution.candidates", words=" · ".join(f"`{w}` {p:.1%}" for w, p in res.candidates)))
    for note in res.notes:
        st.warning(explain(note))
    if res.delta_warning:
        st.warning(explain(res.delta_warning))
    for key_, why in res.skipped:
        if key_ == "faithfulness":
            st.info(t("faithfulness.skipped", why=explain(why)))
            continue
        name = method_label(key_) if key_ in METHODS else t("attribution.per_layer_method")
        st.info(t("attribution.skipped", method=name, why=explain(why)))
    st.caption(t("attribution.colours"))
    for m in res.methods:
        extra = "" if m.delta is None else t("attribution.delta", delta=f"{m.delta:+.2e}")
        st.markdown(
            f"**{method_label(m.method)}** <small>({explain(m.note)}; {m.seconds:.2f}s{extra})</small>",
            unsafe_allow_html=True,
        )
        st.html(tokens_html(shown_tokens(res), m.scores, res.special))
    shown = [m.method for m in res.methods]
    urlstate.relabel((f"{key}.bar",))  # its labels are in the session's language
    pick = st.selectbox(
        t("attribution.bar_of"), shown, format_func=option_labels(shown, method_label), key=f"{key}.bar"
    )
    figures = [bar_chart(res, pick)]
    st.plotly_chart(presenter.scale(figures[0]), key=f"{key}.barfig")
    if len(res.methods) > 1:
        st.subheader(t("attribution.side_by_side"))
        figures.append(methods_heatmap(res))
        st.plotly_chart(presenter.scale(figures[-1]), key=f"{key}.methods")
        st.caption(t("attribution.corr_caption"))
        figures.append(correlation_heatmap(res))
        st.plotly_chart(presenter.scale(figures[-1]), key=f"{key}.corr")
    faith = fv.show(res.faithfulness, method_label, mask_token, f"{key}.faith")
    if faith is not None:
        figures.append(faith)
    if res.layer_scores is not None:
        st.subheader(t("attribution.per_layer"))
        figures.append(layer_heatmap(res))
        st.plotly_chart(presenter.scale(figures[-1]), key=f"{key}.layers")
    single = BatchResult((BatchRow(" ".join(res.tokens)),), (for_export(res),), (None,))
    row = st.container(horizontal=True)  # the buttons side by side at their own widths
    download(
        row, t("attribution.download_csv"), lambda: batch_to_csv(single), "attribution.csv", "text/csv", f"{key}.csv"
    )
    download(
        row,
        t("attribution.download_html"),
        lambda: batch_to_html(single),
        "attribution.html",
        "text/html",
        f"{key}.html",
    )
    if res.faithfulness is not None:
        download(
            row,
            t("faithfulness.download_csv"),
            lambda: faithfulness_csv(single),
            "faithfulness.csv",
            "text/csv",
            f"{key}.fcsv",
        )
    return figures


def show_batch(batch: BatchResult, key: str) -> None:
    ok = sum(r is not None for r in batch.results)
    st.success(t("attribution.batch_done", ok=ok, n=len(batch.rows)))
    for i, (row, err) in enumerate(zip(batch.rows, batch.errors), start=1):
        if err:
            st.warning(t("attribution.batch_row_error", row=i, text=row.text[:60], error=explain(err)))
    measured = [r.faithfulness for r in batch.results if r is not None and r.faithfulness is not None]
    fv.show_ranking(rank_methods(measured) if measured else None, method_label, f"{key}.faith")
    row = st.container(horizontal=True)  # the buttons side by side at their own widths
    shown = replace(batch, results=tuple(None if r is None else for_export(r) for r in batch.results))
    download(
        row, t("attribution.download_csv"), lambda: batch_to_csv(shown), "attributions.csv", "text/csv", f"{key}.csv"
    )
    download(
        row,
        t("attribution.download_standalone"),
        lambda: batch_to_html(shown),
        "attributions.html",
        "text/html",
        f"{key}.html",
    )
    if measured:
        download(
            row,
            t("faithfulness.download_csv"),
            lambda: faithfulness_csv(batch),
            "faithfulness.csv",
            "text/csv",
            f"{key}.fcsv",
        )
    for i, res in enumerate(batch.results[:20], start=1):
        if res is not None:
            st.markdown(f"**{i}.** {explain(res.target_label)}")
            st.html(tokens_html(shown_tokens(res), res.methods[0].scores, res.special))


# ---------------------------------------------------------------------------------------------- the report
def report_inputs(checkpoint: str, cfg: AttributionConfig, class_label) -> dict[str, str]:
    """What the participant asked for, labelled in the session's language (kept when the job starts)."""
    inputs = {
        t("attribution.report.model"): checkpoint,
        t("attribution.report.target"): t(f"attribution.target.{cfg.target}"),
        t("attribution.report.text"): cfg.text,
    }
    if cfg.target == "pair":
        inputs[t("attribution.report.text_b")] = cfg.text_b
    if cfg.target == "mask":
        if cfg.word:
            inputs[t("attribution.report.word")] = cfg.word
        if cfg.contrast_word:
            inputs[t("attribution.report.contrast")] = cfg.contrast_word
    else:
        inputs[t("attribution.report.class")] = class_label(cfg.class_index)
    inputs[t("attribution.report.methods")] = ", ".join(method_label(m) for m in cfg.methods)
    inputs[t("attribution.report.baseline")] = baseline_label(cfg.baseline)
    return inputs


def record(res: AttributionResult, inputs: dict[str, str], figures: list[go.Figure], entry_id: str) -> None:
    """One attribution in the session report: a row per token with each method's score, and the figures."""
    token_col = t("attribution.report.token")
    rows = [
        {token_col: tok, **{method_label(m.method): f"{m.scores[i]:+.4f}" for m in res.methods}}
        for i, tok in enumerate(shown_tokens(res))
    ]
    report.record(
        entry_id,
        page=t("nav.attribution"),
        title=t("attribution.report.title", target=explain(res.target_label)),
        inputs=inputs,
        rows=rows,
        figures=figures,
    )

"""The Fine-tune page's figures: training curves (live and finished), confusion matrix, layer-mix weights, and
tagged sentences as HTML."""

from __future__ import annotations

import html

import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app.kit import presenter
from app.kit.i18n import t, t_or
from app.kit.plot_text import plot_text, plot_texts
from app.views.train.finetune import K
from core.data.token_data import entity_spans
from core.train.finetune import FinetuneResult


def curves(runs: list[tuple[str, list[dict]]], height: int = 360) -> go.Figure:
    """Training loss (left) and held-out accuracy (right; entity F1 for token runs) against step, one colour per run."""
    token = any(m.get("eval_f1") is not None for _, metrics in runs for m in metrics)
    right = "eval_f1" if token else "eval_accuracy"
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=(
            t("finetune.fig.train_loss"),
            t("finetune.fig.heldout_f1" if token else "finetune.fig.heldout_acc"),
        ),
    )
    palette = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#B279A2", "#72B7B2", "#9D755D", "#FF9DA6")
    for i, (name, metrics) in enumerate(runs):
        color = palette[i % len(palette)]
        tr = [m for m in metrics if "loss" in m and m.get("loss") is not None]
        ev = [m for m in metrics if m.get(right) is not None]
        fig.add_scatter(
            x=[m["step"] for m in tr],
            y=[m["loss"] for m in tr],
            name=plot_text(name),
            legendgroup=name,
            line=dict(color=color),
            row=1,
            col=1,
        )
        one = len(ev) == 1  # a lone point: a big marker with its value written on it, not a dot lost in the axes
        fig.add_scatter(
            x=[m["step"] for m in ev],
            y=[m[right] for m in ev],
            name=plot_text(name),
            legendgroup=name,
            mode="markers+text" if one else "lines+markers",
            line=dict(color=color),
            showlegend=False,
            marker=dict(size=14 if one else 6),
            textposition="top center",
            cliponaxis=False,
            text=[f"{m[right]:.3f}" if token else f"{m[right]:.1%}" for m in ev] if one else None,
            row=1,
            col=2,
        )
    fig.update_xaxes(title_text=t("finetune.fig.step"))
    fig.update_yaxes(range=[0, 1.02], row=1, col=2)
    if runs and all(sum(m.get(right) is not None for m in metrics) <= 1 for _, metrics in runs):
        fig.add_annotation(
            text=t("finetune.fig.one_eval"),
            xref="x2 domain",
            yref="y2 domain",
            x=0.5,
            y=0.02,
            showarrow=False,
            font=dict(size=12, color="#666"),
        )
    fig.update_layout(height=height, margin=dict(t=40, b=10), legend=dict(orientation="h", y=-0.2))
    return fig


def live(job) -> None:
    """While a run goes: samples/s and the curves so far (from job.metrics)."""
    metrics = list(job.metrics)
    if not any("loss" in m for m in metrics):
        return
    st.plotly_chart(presenter.scale(curves([(job.name, metrics)], height=320)), key=K(f"live.{job.id}"))


def confusion(result: FinetuneResult) -> go.Figure:
    names = plot_texts(result.label_names)  # the file's own labels: shown as typed, never as markup
    fig = go.Figure(
        go.Heatmap(
            z=result.confusion,
            x=names,
            y=names,
            colorscale="Blues",
            text=result.confusion,
            texttemplate="%{text}",
            hovertemplate=t("finetune.fig.cm_hover"),
        )
    )
    fig.update_layout(
        xaxis_title=t("finetune.fig.predicted"),
        yaxis_title=t("finetune.fig.true"),
        yaxis_autorange="reversed",
        height=340,
        margin=dict(t=30, b=10),
    )
    return fig


def try_chart(label_names, probs) -> go.Figure:
    """The try-it box's class probabilities, one bar per class (the data's own labels, shown as typed)."""
    return go.Figure(
        go.Bar(x=plot_texts(label_names), y=probs, text=[f"{p:.1%}" for p in probs], textposition="outside")
    ).update_layout(height=260, margin=dict(t=20, b=10), yaxis_range=[0, 1.1])


def stop_reason_label(reason: str) -> str:
    return t_or(f"finetune.stop.{reason.replace(' ', '_')}", reason)


# one colour per entity type (the first four: the bundled sample's PER, LOC, ORG, DATE in sorted order)
ENTITY_COLOURS = ("#fde2a7", "#c7e6c1", "#c9dcf5", "#f6c8d9", "#e1d5f2", "#d3eef0", "#f3d9c4", "#e6e6e6")


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
                return (
                    f'<span class="tk-wrong" title="{esc(t("finetune.tok.true_tag", tag=gold[j]))}">'
                    f"{esc(words[j])}</span>"
                )
            return esc(words[j])

        if i in starts:
            typ, e = starts[i]
            inner = " ".join(word(j) for j in range(i, e + 1))
            out.append(
                f'<span class="tk-ent" style="background:{_colour(types, typ)}">{inner}'
                f'<span class="tk-type">{esc(typ)}</span></span>'
            )
            i = e + 1
        else:
            out.append(word(i))
            i += 1
    return " ".join(out)


TOKEN_CSS = (
    "<style>.tk-s{line-height:2.1;margin:0 0 .35rem 0;font-size:.95rem}"
    ".tk-ent{padding:.1rem .3rem;border-radius:.3rem;margin:0 .1rem}"
    ".tk-type{font-size:.65rem;font-weight:600;margin-left:.3rem;opacity:.75}"
    ".tk-wrong{text-decoration:underline wavy #d62728;text-underline-offset:3px}</style>"
)


def heldout_sentences_html(tm, types: tuple[str, ...], n: int = 12) -> str:
    rows = [
        f'<div class="tk-s">{tagged_html(w, p, types, g)}</div>'
        for w, g, p in list(zip(tm.words, tm.gold, tm.pred))[:n]
    ]
    return TOKEN_CSS + "".join(rows)


def layer_weights_chart(result: FinetuneResult) -> go.Figure:
    """The scalar mix's learned softmax weights: embeddings, layer 1..L (an even mix would be 1/(L+1) each)."""
    w = list(result.layer_weights)
    names = [t("finetune.mix.embeddings")] + [t("finetune.mix.layer", n=i) for i in range(1, len(w))]
    # values at the foot of each bar, so the even-mix line never runs through them
    fig = go.Figure(
        go.Bar(
            x=names,
            y=w,
            text=[f"{v:.3f}" for v in w],
            textposition="inside",
            insidetextanchor="start",
            textfont_color="white",
            marker_color="#4C78A8",
        )
    )
    fig.add_hline(
        y=1 / len(w),
        line_dash="dot",
        line_color="#E45756",
        annotation_text=t("finetune.mix.even"),
        annotation_position="top right",
        annotation_font_color="#E45756",
    )
    fig.update_layout(
        height=300, margin=dict(t=30, b=10), yaxis_title=t("finetune.mix.weight"), yaxis_range=[0, max(w) * 1.25]
    )
    return fig

"""Renderers for the Layer lens page: the layers x top-k table, the answer across depth, the KL per depth.

Labels come from assets/i18n/lens.toml. Every chart goes through presenter.scale."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app.kit import presenter, report, state, urlstate
from app.kit.i18n import explain, t
from app.kit.plot_text import plot_text
from app.kit.render import as_text
from core.inspect.lens import LensResult, MaskLens
from core.inspect.tuned_lens import TuneReport

PAGE = "lens"
ROW_PX = 30  # table height per depth
TABLE_WORD = 12  # characters of a candidate shown in a cell (hover shows it whole)


def K(name: str) -> str:
    return state.key(PAGE, name)


def depth_labels(n_depths: int) -> list[str]:
    """'embeddings', 'layer 1', … 'layer L' in the session's language."""
    return [t("lens.embeddings")] + [t("lens.layer", n=d) for d in range(1, n_depths)]


def _cell(text: str) -> str:
    text = text if text.strip() else "␣"  # a piece that decodes to nothing (a word-start marker, a space)
    return text if len(text) <= TABLE_WORD else text[: TABLE_WORD - 1] + "…"


def lens_table(r: LensResult, m: MaskLens) -> go.Figure:
    """Heatmap of depths (rows, embeddings at the top) x choices (columns), coloured by probability, with the
    candidate words as cell text; the last layer's answer in bold wherever it appears."""
    labels = depth_labels(r.depths)
    k = len(m.rows[0])
    z = np.array([[c.prob for c in row] for row in m.rows])  # (D, k)
    words = [
        [
            ("<b>" + plot_text(_cell(c.text)) + "</b>") if c.token_id == m.answer.token_id else plot_text(_cell(c.text))
            for c in row
        ]
        for row in m.rows
    ]
    full = [
        [f"{plot_text(c.text)} · {plot_text(c.piece)}" for c in row] for row in m.rows
    ]  # the hover: the word, then the tokenizer's own piece
    cols = [t("lens.choice", n=i + 1) for i in range(k)]
    top = max(float(z.max()), 1e-9)
    fmt = ".0%" if top >= 0.1 else ".1%" if top >= 0.01 else ".1e"  # a random model's 3e-05 is not "0%"
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=cols,
            y=labels,
            text=words,
            customdata=full,
            texttemplate="%{text}",
            textfont=dict(size=13),
            colorscale="Blues",
            zmin=0,
            zmax=top,
            colorbar=dict(title=t("lens.prob"), tickformat=fmt),
            hovertemplate=t("lens.table_hover").replace("%{text}", "%{customdata}").replace(":.1%}", f":{fmt}}}")
            + "<extra></extra>",
        )
    )
    fig.update_layout(
        title=dict(text=t("lens.table_title", top_k=k, mode=t(f"lens.mode_short.{r.mode}")), y=0.99, yanchor="top"),
        height=130 + ROW_PX * r.depths,
        margin=dict(t=75, b=10, l=10, r=10),
        yaxis=dict(autorange="reversed", type="category"),
        xaxis=dict(side="top", type="category"),
    )
    return fig


def answer_plot(r: LensResult, m: MaskLens) -> go.Figure:
    """The last layer's answer across depth: its rank (log scale, 1 = first) and its probability."""
    x = depth_labels(r.depths)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_scatter(
        x=x,
        y=[rk + 1 for rk in m.answer_rank],
        name=t("lens.rank"),
        mode="lines+markers",
        line=dict(color="#F58518"),
        hovertemplate="%{x}: %{y}<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=list(m.answer_prob),
        name=t("lens.prob"),
        mode="lines+markers",
        line=dict(color="#4C78A8"),
        hovertemplate="%{x}: %{y:.2%}<extra></extra>",
        secondary_y=True,
    )
    fig.update_yaxes(title_text=t("lens.rank"), type="log", autorange="reversed", dtick=1, secondary_y=False)
    fig.update_yaxes(
        title_text=t("lens.prob"),
        tickformat=".0%",
        range=[0, max(max(m.answer_prob) * 1.15, 0.01)],
        tickmode="auto",
        showgrid=False,
        secondary_y=True,
    )
    fig.update_layout(
        title=t("lens.answer_title", word=m.answer.text),
        height=360,
        xaxis_title=t("lens.depth"),
        margin=dict(t=50, b=10),
        legend=dict(orientation="h", y=-0.3),
    )
    return fig


def kl_plot(rep: TuneReport) -> go.Figure:
    """Held-out KL(last || lens) per intermediate depth, raw against tuned."""
    x = depth_labels(len(rep.kl_raw))[:-1]
    fig = go.Figure()
    fig.add_scatter(
        x=x,
        y=list(rep.kl_raw[:-1]),
        name=t("lens.kl_raw"),
        mode="lines+markers",
        line=dict(color="#9E9E9E"),
        hovertemplate="%{x}: %{y:.3f}<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=list(rep.kl_tuned[:-1]),
        name=t("lens.kl_tuned"),
        mode="lines+markers",
        line=dict(color="#54A24B"),
        hovertemplate="%{x}: %{y:.3f}<extra></extra>",
    )
    fig.update_layout(
        title=t("lens.kl_title"),
        height=340,
        xaxis_title=t("lens.depth"),
        yaxis_title=t("lens.kl_axis"),
        yaxis=dict(rangemode="tozero"),
        margin=dict(t=50, b=10),
        legend=dict(orientation="h", y=-0.3),
    )
    return fig


def _first_top(m: MaskLens) -> tuple[int, int]:
    """(first depth where the answer is the first choice, depth from which it stays first)."""
    first = next(d for d, rk in enumerate(m.answer_rank) if rk == 0)
    stays = len(m.answer_rank) - 1
    while stays > 0 and m.answer_rank[stays - 1] == 0:
        stays -= 1
    return first, stays


def show_result(r: LensResult) -> None:
    """The lens result: summary, notes, a mask picker when there are several, the table and the answer plot."""
    st.caption(t("lens.summary", n=len(r.tokens), depths=r.depths, layers=r.n_layers, ms=f"{r.latency_ms:,.0f}"))
    for note in r.notes + ((r.truncation,) if r.truncation else ()):
        st.info(explain(note))
    j = 0
    if len(r.masks) > 1:
        if st.session_state.get(K("mask")) not in range(len(r.masks)):  # an earlier text had more masks
            st.session_state.pop(K("mask"), None)
        urlstate.relabel((K("mask"),))  # its labels are in the session's language
        j = st.selectbox(
            t("lens.mask_pick"),
            list(range(len(r.masks))),
            key=K("mask"),
            format_func=lambda i: t("lens.mask_option", n=i + 1, position=r.masks[i].position),
        )
        j = j if j is not None and j < len(r.masks) else 0
    m = r.masks[j]
    table, answer = lens_table(r, m), answer_plot(r, m)
    st.plotly_chart(presenter.scale(table), width="stretch", key=K("table"))
    labels = depth_labels(r.depths)
    first, stays = _first_top(m)
    line = t("lens.answer_line", word=as_text(m.answer.text), depth=labels[first], stays=labels[stays])
    st.markdown(line)
    st.plotly_chart(presenter.scale(answer), width="stretch", key=K("answer"))
    report.record_view(
        "lens",
        t("nav.lens"),
        t("report.lens_title", word=m.answer.text),
        {
            t("report.in.model"): r.checkpoint,
            t("report.in.text"): r.text,
            t("report.in.lens"): t(f"lens.mode_opt.{r.mode}"),
        },
        (r.checkpoint, r.text, r.mode, r.lens_key, j),
        text=line,
        figures=[table, answer],
    )


def show_kl(rep: TuneReport) -> None:
    st.plotly_chart(presenter.scale(kl_plot(rep)), width="stretch", key=K("kl"))
    st.caption(t("lens.kl_caption", n=rep.heldout_positions, steps=rep.steps, seconds=f"{rep.seconds:,.0f}"))

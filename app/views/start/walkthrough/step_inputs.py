"""Step 1: what pretraining is, and what the encoder reads: the token, segment and position parts of each input
vector of the participant's sentence pair (core.walkthrough.embeddings)."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter
from app.kit.i18n import t
from app.kit.plot_text import plot_texts
from app.kit.walkthrough_work import Flow, SidebarModel
from app.views.start.walkthrough.common import TEXT, TEXT_B, K, Step, axis_labels, pair_strip, record, text_default
from core.base.text import display_piece

N = 1
PART_COLORS = {"token": "#4C78A8", "segment": "#B279A2", "position": "#72B7B2", "output": "#F58518"}
SEG_NOTE = {"ab": "walkthrough.s1.seg_ab", "single": "walkthrough.s1.seg_single", "none": "walkthrough.s1.seg_none"}


NICE = (1, 2, 2.5, 5)  # tick steps: these times a power of ten


def nice_step(span: float, intervals: int) -> float:
    """The smallest nice step (NICE times a power of ten) with ``intervals`` steps covering ``span``."""
    raw = max(span, 1e-12) / intervals
    power = 10 ** math.floor(math.log10(raw))
    return next((m * power for m in (*NICE, 10) if m * power >= raw * (1 - 1e-9)), 10 * power)


def _fit(lo: float, hi: float, intervals: int) -> tuple[float, float]:
    """(start, step): ``intervals`` nice steps from a multiple of the step at or below ``lo`` up to ``hi``."""
    step = nice_step(hi - lo, intervals)
    while True:
        start = math.floor(lo / step + 1e-9) * step
        if start + step * intervals >= hi - 1e-9:
            return start, step
        step = nice_step(step * 1.01 * intervals, intervals)


def aligned_axes(bar_max: float, line_values, lo_n: int = 4, hi_n: int = 8) -> tuple[dict, dict]:
    """Ranges and ticks of the bars' axis (from 0, with room above the tallest bar) and of the line's axis (its
    values with a small margin), in nice steps and the same number of them on both axes (``lo_n`` to ``hi_n``,
    the one that wastes the least height), so that the two axes' ticks fall on the same heights."""
    top = max(bar_max, 1e-6) * 1.06
    vals = [float(v) for v in (line_values if line_values is not None else ())]
    lo = hi = None
    if vals:
        lo, hi = min(vals), max(vals)
        pad = max(hi - lo, abs(hi) * 0.02, 1e-6) * 0.04
        lo, hi = lo - pad, hi + pad
    best = None
    for n in range(lo_n, hi_n + 1):
        _, step = _fit(0.0, top, n)
        waste = n * step / top
        right = None
        if vals:
            start, step2 = _fit(lo, hi, n)
            right = (start, step2)
            waste *= n * step2 / (hi - lo)
        score = (round(waste, 6), abs(n - 6))
        if best is None or score < best[0]:
            best = (score, n, step, right)
    _, n, step, right = best
    left = dict(range=[0, round(step * n, 12)], tick0=0, dtick=step, autorange=False)
    if right is None:
        return left, {}
    start, step2 = right
    return left, dict(
        range=[round(start, 12), round(start + step2 * n, 12)], tick0=round(start, 12), dtick=step2, autorange=False
    )


def render() -> Flow[None]:
    text_default(TEXT, "example.sentence")
    text_default(TEXT_B, "example.sentence_b")
    c1, c2 = st.columns(2)
    a = c1.text_input(t("walkthrough.sentence_a"), key=TEXT)
    b = c2.text_input(t("walkthrough.sentence_b_optional"), key=TEXT_B)
    lm = yield SidebarModel("mlm")
    if lm is None:
        return
    r = pair_strip(lm, a, b or None)
    if r is None:
        return
    tok = lm.tokenizer
    st.caption(t("walkthrough.s1.specials", cls=tok.cls_token, sep=tok.sep_token, n=len(r.tokens)))
    if r.truncated:
        st.warning(t("walkthrough.s1.truncated", n=len(r.tokens)))
    if r.segments == "single" and r.type_vocab_size > 1:  # the bundled XLM-R: two rows, the tokenizer asks for one
        st.info(
            t(
                "walkthrough.s1.zh_seg_unused",
                id=lm.spec.checkpoint,
                n=r.type_vocab_size,
                seps=f"`{tok.sep_token * lm.family.pair_separators}`",
            )
        )
    else:
        st.info(t(SEG_NOTE[r.segments], family=lm.family.label))
    if r.factorized:
        st.info(t("walkthrough.s1.factorized", embedding_size=r.embedding_size, hidden_size=r.hidden_size))
    x, raw = axis_labels(r.tokens), plot_texts(r.tokens)
    fig = go.Figure()
    parts = [
        ("token", r.token_norms),
        ("segment", r.segment_norms),
        ("position", r.position_norms),
        ("output", r.output_norms),
    ]
    for name, values in parts:
        if values is None:
            continue
        label = t(f"walkthrough.s1.part.{name}")
        hover = "%{x} (%{customdata})<br>" + label + ": %{y:.3f}<extra></extra>"  # the raw piece in ()
        if name == "output":  # about sqrt(E) times larger: its own axis, so the three parts stay readable
            fig.add_scatter(
                x=x,
                y=values,
                name=label,
                yaxis="y2",
                mode="lines+markers",
                line=dict(color=PART_COLORS[name]),
                customdata=raw,
                hovertemplate=hover,
            )
        else:
            fig.add_bar(x=x, y=values, name=label, marker_color=PART_COLORS[name], customdata=raw, hovertemplate=hover)
    bars = [v for name, vals in parts if name != "output" and vals is not None for v in vals]
    left, right = aligned_axes(max(bars, default=1.0), r.output_norms)
    fig.update_layout(
        barmode="group",
        height=380,
        margin=dict(t=40, b=10),
        title=t("walkthrough.s1.fig_title"),
        yaxis=dict(title=t("walkthrough.s1.norm"), **left),
        legend=dict(orientation="h", y=-0.25),
        yaxis2=dict(title=t("walkthrough.s1.norm_ln"), overlaying="y", side="right", showgrid=False, **right),
    )
    st.plotly_chart(presenter.scale(fig), key=K("s1.fig"), width="stretch")
    none = t("walkthrough.none")
    rows = [
        {
            t("walkthrough.s1.col.pos"): i,
            t("walkthrough.s1.col.token"): display_piece(tk),  # as the chart writes it (␣, not a raw ▁)
            t("walkthrough.s1.col.raw"): tk,  # the tokenizer's own piece beside it
            t("walkthrough.s1.col.segment"): r.token_type_ids[i] if r.segments == "ab" else none,
            t("walkthrough.s1.col.position"): r.position_ids[i],
            t("walkthrough.s1.part.token"): round(float(r.token_norms[i]), 3),
            t("walkthrough.s1.part.segment"): none if r.segment_norms is None else round(float(r.segment_norms[i]), 3),
            t("walkthrough.s1.part.position"): round(float(r.position_norms[i]), 3),
            t("walkthrough.s1.part.output"): round(float(r.output_norms[i]), 3),
        }
        for i, tk in enumerate(r.tokens)
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    record(
        N,
        {
            t("walkthrough.in.model"): lm.spec.checkpoint,
            t("walkthrough.sentence_a"): a,
            t("walkthrough.sentence_b_optional"): b,
        },
        rows=rows,
        figures=[fig],
    )


STEP = Step(N, render, correct=1, links=("models",))

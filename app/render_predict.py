"""Renderers for the Predict pages (fill-mask, sentence pair): token strips, top-k bars, pair bars, confusion."""
from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core.fill_mask import FillMaskResult, MaskPrediction
from core.sentence_pair import BatchPairResult, PairResult

MASK_COLOR, SPECIAL_COLOR, PIECE_COLOR, TARGET_COLOR = "#F58518", "#9E9E9E", "#4C78A8", "#54A24B"


def fmt_prob(p: float) -> str:
    """Percent for readable probabilities, scientific notation for tiny ones (a random model's 3e-05)."""
    return f"{p:.1%}" if p >= 0.001 else f"{p:.1e}"


def token_strip(tokens: tuple[str, ...], highlight: tuple[int, ...] = (), specials: tuple[str, ...] = ()) -> str:
    """HTML chips of the model's pieces (##, Ġ, ▁ kept as they are); masks in orange, specials in grey."""
    chips = []
    for i, t in enumerate(tokens):
        color = MASK_COLOR if i in highlight else SPECIAL_COLOR if t in specials else PIECE_COLOR
        chips.append(f'<span title="token {i}" style="display:inline-block;margin:2px;padding:1px 6px;'
                     f'border-radius:6px;border:1px solid {color};color:{color};font-family:monospace;'
                     f'white-space:pre">{html.escape(t)}</span>')
    return '<div class="encoderlab-tokens">' + "".join(chips) + "</div>"


def topk_bar(m: MaskPrediction, title: str, height: int | None = None) -> go.Figure:
    """Horizontal bars of one mask's top-k pieces and probabilities (the masked original in green)."""
    cands = m.candidates
    labels = [f"{c.piece}  " for c in cands]
    colors = [TARGET_COLOR if m.original and c.token_id == m.original.token_id else PIECE_COLOR for c in cands]
    fig = go.Figure(go.Bar(x=[c.prob for c in cands], y=labels, orientation="h", marker_color=colors,
                           text=[fmt_prob(c.prob) for c in cands], textposition="outside",
                           hovertemplate="%{y}: %{x:.4f}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="probability", yaxis=dict(autorange="reversed", type="category"),
                      height=height or max(220, 60 + 22 * len(cands)), margin=dict(t=40, b=10, l=10, r=40))
    return fig


def show_fill_result(r: FillMaskResult, key: str, specials: tuple[str, ...] = (), charts: bool = True) -> None:
    """Tokenization, notes, the joint fill, and one top-k chart per mask."""
    if r.truncation:
        st.warning(r.truncation)
    for n in r.notes:
        st.info(n)
    st.markdown(token_strip(r.tokens, r.mask_positions, specials), unsafe_allow_html=True)
    how = "independently (one pass)" if r.strategy == "independent" else "one at a time, most confident first"
    st.markdown(f"**Joint fill** ({how}): {html.escape(r.filled_text)}")
    per = f" per text, batch of {r.batch_size}" if r.batch_size > 1 else ""
    st.caption(f"joint probability {r.joint_prob:.3g} · {len(r.masks)} mask(s) · {r.latency_ms:,.1f} ms{per}")
    if len(r.masks) > 1:
        order = {m: i + 1 for i, m in enumerate(r.fill_order)}
        st.dataframe(pd.DataFrame([{
            "mask": i + 1, "position": m.position, "filled with": r.fill_pieces[i],
            "probability when filled": round(r.fill_probs[i], 4), "fill step": order[i],
            "own top-1": m.candidates[0].piece, "own top-1 prob": round(m.candidates[0].prob, 4),
            "entropy (nats)": round(m.entropy, 2)} for i, m in enumerate(r.masks)]),
            hide_index=True, key=f"{key}.table")
    if r.masked_word:
        ranks = ", ".join(f"{m.original.piece} #{m.original_rank + 1} ({fmt_prob(m.original.prob)})" for m in r.masks
                          if m.original is not None and m.original_rank is not None)
        st.caption(f"Masked word **{html.escape(r.masked_word)}** → {len(r.masks)} piece(s); rank of each "
                   f"original piece in its mask's distribution: {ranks}")
    if charts:
        for i, m in enumerate(r.masks):
            st.plotly_chart(topk_bar(m, f"mask {i + 1} (token {m.position}): its own distribution"),
                            key=f"{key}.bar.{i}", width="stretch")


def pair_bars(r: PairResult) -> go.Figure:
    """One bar per scored pair: the head's probability of 'positive' (IsNext / in order)."""
    fig = go.Figure(go.Bar(x=[s.label for s in r.scores], y=[s.prob for s in r.scores],
                           text=[f"{s.prob:.1%}" for s in r.scores], textposition="outside",
                           marker_color=["#54A24B", "#E45756", "#B279A2"][:len(r.scores)],
                           hovertext=[f"{s.first} ‖ {s.second}" for s in r.scores],
                           hovertemplate="%{hovertext}<br>%{y:.4f}<extra></extra>"))
    fig.add_hline(y=0.5, line_dash="dot", line_color="grey")
    fig.update_layout(yaxis=dict(title=r.prob_label, range=[0, 1.1]), height=360, margin=dict(t=30, b=10))
    return fig


def confusion_fig(b: BatchPairResult) -> go.Figure:
    """2x2 confusion matrix heatmap, true label on rows, prediction on columns."""
    names = ["0 (not next)", "1 (next)"] if b.head == "nsp" else ["0 (swapped)", "1 (in order)"]
    z = [list(b.confusion[0]), list(b.confusion[1])]
    fig = go.Figure(go.Heatmap(z=z, x=[f"predicted {n}" for n in names], y=[f"true {n}" for n in names],
                               colorscale="Blues", showscale=False, text=z, texttemplate="%{text}"))
    fig.update_layout(yaxis=dict(autorange="reversed"), height=320, margin=dict(t=30, b=10))
    return fig


def batch_table(b: BatchPairResult) -> pd.DataFrame:
    return pd.DataFrame([{"a": r.a, "b": r.b, "label": r.label, b.prob_label: round(p, 4), "predicted": y,
                          "correct": r.label == y} for r, p, y in zip(b.rows, b.probs, b.preds)])

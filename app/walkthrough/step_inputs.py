"""Step 1: what pretraining is, and what the encoder reads: the token, segment and position parts of each input
vector of the participant's sentence pair (core.embeddings)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import presenter
from app.i18n import t
from app.loaders import model_or_error
from app.render_predict import token_strip
from app.walkthrough.common import TEXT, TEXT_B, K, Step, axis_labels, record, text_default
from core.embeddings import embedding_parts

N = 1
PART_COLORS = {"token": "#4C78A8", "segment": "#B279A2", "position": "#72B7B2", "output": "#F58518"}
SEG_NOTE = {"ab": "walkthrough.s1.seg_ab", "single": "walkthrough.s1.seg_single", "none": "walkthrough.s1.seg_none"}


def render() -> None:
    text_default(TEXT, "example.sentence")
    text_default(TEXT_B, "example.sentence_b")
    c1, c2 = st.columns(2)
    a = c1.text_input(t("walkthrough.sentence_a"), key=TEXT)
    b = c2.text_input(t("walkthrough.sentence_b_optional"), key=TEXT_B)
    lm = model_or_error("mlm")
    if lm is None:
        return
    try:
        r = embedding_parts(lm, a, b or None)
    except ValueError as e:
        st.error(str(e))
        return
    specials = tuple(tok for tok, s in zip(r.tokens, r.special) if s)
    st.markdown(token_strip(r.tokens, (), specials), unsafe_allow_html=True)
    tok = lm.tokenizer
    st.caption(t("walkthrough.s1.specials", cls=tok.cls_token, sep=tok.sep_token, n=len(r.tokens)))
    if r.truncated:
        st.warning(t("walkthrough.s1.truncated", n=len(r.tokens)))
    st.info(t(SEG_NOTE[r.segments], family=lm.family.label))
    if r.factorized:
        st.info(t("walkthrough.s1.factorized", e=r.embedding_size, h=r.hidden_size))
    x = axis_labels(r.tokens)
    fig = go.Figure()
    parts = [("token", r.token_norms), ("segment", r.segment_norms), ("position", r.position_norms),
             ("output", r.output_norms)]
    for name, values in parts:
        if values is None:
            continue
        label = t(f"walkthrough.s1.part.{name}")
        hover = "%{x}<br>" + label + ": %{y:.3f}<extra></extra>"
        if name == "output":  # about sqrt(E) times larger: its own axis, so the three parts stay readable
            fig.add_scatter(x=x, y=values, name=label, yaxis="y2", mode="lines+markers",
                            line=dict(color=PART_COLORS[name]), hovertemplate=hover)
        else:
            fig.add_bar(x=x, y=values, name=label, marker_color=PART_COLORS[name], hovertemplate=hover)
    fig.update_layout(barmode="group", height=380, margin=dict(t=40, b=10), title=t("walkthrough.s1.fig_title"),
                      yaxis_title=t("walkthrough.s1.norm"), legend=dict(orientation="h", y=-0.25),
                      yaxis2=dict(title=t("walkthrough.s1.norm_ln"), overlaying="y", side="right", showgrid=False))
    st.plotly_chart(presenter.scale(fig), key=K("s1.fig"), width="stretch")
    none = t("walkthrough.none")
    rows = [{t("walkthrough.s1.col.pos"): i, t("walkthrough.s1.col.token"): tk,
             t("walkthrough.s1.col.segment"): r.token_type_ids[i] if r.segments == "ab" else none,
             t("walkthrough.s1.col.position"): r.position_ids[i],
             t("walkthrough.s1.part.token"): round(float(r.token_norms[i]), 3),
             t("walkthrough.s1.part.segment"): none if r.segment_norms is None else round(float(r.segment_norms[i]), 3),
             t("walkthrough.s1.part.position"): round(float(r.position_norms[i]), 3),
             t("walkthrough.s1.part.output"): round(float(r.output_norms[i]), 3)} for i, tk in enumerate(r.tokens)]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    record(N, {t("walkthrough.in.model"): lm.spec.checkpoint, t("walkthrough.sentence_a"): a,
               t("walkthrough.sentence_b_optional"): b}, rows=rows, figures=[fig])


STEP = Step(N, render, correct=1, links=("models",))

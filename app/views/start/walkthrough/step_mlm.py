"""Step 2: masked language modelling. A fresh 15% / 80-10-10 mask of the participant's sentence on every click
(core.walkthrough.masking_view, the Pretraining lab's own masking function), its shares measured over 2,000 draws, fill-mask
on one word (core.predict.fill_mask), and the pretraining objectives of every registered family."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app.kit import presenter, urlstate
from app.kit.i18n import explain, t, t_or
from app.kit.plot_text import plot_text, plot_texts
from app.kit.walkthrough_work import Flow, SidebarModel
from app.kit.words_line import word_line
from app.views.start.walkthrough.common import TEXT, K, Step, chips, record, text_default
from core.base.segment import has_han
from core.base.text import display_piece
from core.predict.fill_mask import FillMaskConfig, fill_mask, words
from core.registry import FAMILIES
from core.walkthrough.masking_view import corrupt, masking_shares

N = 2
ACTION_COLORS = {"": "#4C78A8", "mask": "#F58518", "random": "#E45756", "keep": "#54A24B"}
SPECIAL_COLOR = "#9E9E9E"
HISTORY = 6  # masks kept in the "same sentence, new mask" table
SHARE_DRAWS = 2000
TOP_K = 5  # bars per masked piece in the fill-mask chart
GREEN = "#54A24B"  # the fill-mask chart's bar of the original piece
BERT_MASK = "[MASK]"  # the mask token the step's texts name (BERT's); the loaded tokenizer's is shown where it differs
MASK_TOKEN = K("s2.mask_token")  # the last loaded model's mask token, for the check question drawn after render()


def _remask() -> None:
    st.session_state[K("s2.seed")] = st.session_state.get(K("s2.seed"), 1) + 1


def render() -> Flow[None]:
    text_default(TEXT, "example.sentence")
    text = st.text_input(t("walkthrough.your_sentence"), key=TEXT)
    lm = yield SidebarModel("mlm")
    if lm is None:
        st.session_state.pop(MASK_TOKEN, None)  # the question names BERT's [MASK] again
        return
    seed = st.session_state.setdefault(K("s2.seed"), 1)
    st.session_state.setdefault(K("s2.whole_word"), False)
    c1, c2 = st.columns([1, 2])
    c1.button(
        t("walkthrough.s2.remask"), key=K("s2.remask"), on_click=_remask, type="primary", icon=":material/casino:"
    )
    whole = c2.toggle(t("walkthrough.s2.whole_word"), key=K("s2.whole_word"), help=t("walkthrough.s2.whole_word_help"))
    try:
        v = corrupt(lm, text, seed, whole_word=whole)
        shares = masking_shares(lm, text, draws=SHARE_DRAWS, seed=0, whole_word=whole)
    except ValueError as e:
        st.error(explain(e))
        return
    # Both rows in the legend's colours: a selected token has the colour of what is done to it, in either row
    colors = [
        ACTION_COLORS[a] if a else (SPECIAL_COLOR if s else ACTION_COLORS[""]) for a, s in zip(v.actions, v.special)
    ]
    mask = lm.tokenizer.mask_token or BERT_MASK
    st.session_state[MASK_TOKEN] = mask
    titles = [action_title(a, mask) for a in v.actions]
    st.markdown(t("walkthrough.s2.original", seed=seed))
    st.markdown(chips(v.tokens, colors, titles), unsafe_allow_html=True)
    if (line := word_line(text)) is not None:  # the 词 whole-word masking selects, under the token strip
        st.caption(line + ("  \n" + t("walkthrough.s2.zh_whole_word") if whole else ""))
    st.markdown(t("walkthrough.s2.model_reads"))
    st.markdown(chips(v.corrupted, colors, titles), unsafe_allow_html=True)
    st.caption(t("walkthrough.s2.legend"))
    if mask != BERT_MASK:
        st.caption(t("walkthrough.s2.zh_mask_note", id=lm.spec.checkpoint, token=mask))
    n_sel = len(v.selected)
    st.markdown(
        t(
            "walkthrough.s2.counts",
            n=n_sel,
            n_candidates=v.candidates,
            mask=v.count("mask"),
            random=v.count("random"),
            keep=v.count("keep"),
        )
    )
    if n_sel == 0:
        st.caption(t("walkthrough.s2.none_selected", share=f"{0.85**v.candidates:.0%}", n_candidates=v.candidates))
    hist: list = st.session_state.setdefault(K("s2.history"), [])
    row = (seed, whole, " ".join(v.corrupted))
    if not hist or hist[-1] != row:
        hist.append(row)
        del hist[:-HISTORY]
    st.markdown("**" + t("walkthrough.s2.history") + "**")
    st.dataframe(
        pd.DataFrame(
            [
                {
                    t("walkthrough.s2.col.pass"): s,
                    t("walkthrough.s2.col.whole"): t("walkthrough.s2.whole_on" if w else "walkthrough.s2.whole_off"),
                    t("walkthrough.s2.col.reads"): r,
                }
                for s, w, r in reversed(hist)
            ]
        ),
        hide_index=True,
        width="stretch",
    )
    m = st.columns(4)
    m[0].metric(
        t("walkthrough.s2.m.selected"), f"{shares.selected:.1%}", help=t("walkthrough.s2.m.help", n=shares.draws)
    )
    m[1].metric(t("walkthrough.s2.zh_m_mask", token=mask), f"{shares.mask:.1%}")
    m[2].metric(t("walkthrough.s2.m.random"), f"{shares.random:.1%}")
    m[3].metric(t("walkthrough.s2.m.keep"), f"{shares.keep:.1%}")

    st.markdown("#### " + t("walkthrough.s2.fill_title"))
    ws = words(text)
    fig = None
    if ws:
        if st.session_state.get(K("s2.word"), len(ws)) >= len(ws):  # first visit, or a shorter sentence now
            long_words = [
                i
                for i, w in enumerate(ws)
                if w.text.isalpha() and (len(w.text) > 3 or (has_han(w.text) and len(w.text) > 1))
            ]  # 北京, not 的
            st.session_state[K("s2.word")] = long_words[-1] if long_words else 0
        idx = st.selectbox(
            t("walkthrough.s2.pick_word"), list(range(len(ws))), key=K("s2.word"), format_func=lambda i: ws[i].text
        )
        try:
            res = fill_mask(lm, FillMaskConfig(text, top_k=TOP_K, word=int(idx)))
        except ValueError as e:
            st.error(explain(e))
            res = None
        if res is not None:
            fig = fill_figure(res)
            st.plotly_chart(presenter.scale(fig), key=K("s2.fill"), width="stretch")
            st.caption(fill_caption(res))
    _objectives()
    record(
        N,
        {
            t("walkthrough.in.model"): lm.spec.checkpoint,
            t("walkthrough.your_sentence"): text,
            t("walkthrough.s2.col.pass"): seed,
            t("walkthrough.s2.whole_word"): whole,
        },
        text=t(
            "walkthrough.s2.zh_report",
            token=mask,
            reads=" ".join(v.corrupted),
            selected=f"{shares.selected:.1%}",
            mask=f"{shares.mask:.1%}",
            random=f"{shares.random:.1%}",
            keep=f"{shares.keep:.1%}",
        ),
        figures=[fig] if fig is not None else [],
        same=(lm.spec.checkpoint, text),
    )


def action_title(action: str, mask: str) -> str:
    """A token chip's hover: what masking did to it, naming the tokenizer's own mask token."""
    if action == "mask":
        return t("walkthrough.s2.zh_action_mask", token=mask)
    return t(f"walkthrough.s2.action.{action or 'none'}")


def quiz(part: str) -> str:
    """The check question, its options naming the mask token of the model the step last loaded."""
    if part.startswith("opt"):
        return t(f"walkthrough.s2.zh_{part}", token=st.session_state.get(MASK_TOKEN, BERT_MASK))
    return t(f"walkthrough.s2.{part}")


def _is_original(m, candidate) -> bool:
    return m.original is not None and candidate.token_id == m.original.token_id


def fill_caption(res) -> str:
    """Under the fill-mask chart: the pieces, each original's rank ("?" when unknown), and what the green bar is,
    or why no bar is green (the original is not among the bars shown)."""
    ranks = ", ".join(str(m.original_rank + 1) if m.original_rank is not None else "?" for m in res.masks)
    text = t("walkthrough.s2.fill_caption", word=res.masked_word, n=len(res.masks), ranks=ranks)
    k = max((len(m.candidates) for m in res.masks), default=TOP_K)
    missing = [i for i, m in enumerate(res.masks) if not any(_is_original(m, c) for c in m.candidates)]
    if not missing:
        return text + " " + t("walkthrough.s2.fill_green")
    if len(missing) == len(res.masks) == 1:  # its rank (when known) is in the sentence before
        return text + " " + t("walkthrough.s2.fill_not_shown", top_k=k)
    pieces = ", ".join(str(i + 1) for i in missing)
    key = "walkthrough.s2.fill_some_not_shown" if len(missing) < len(res.masks) else "walkthrough.s2.fill_none_shown"
    return text + " " + t(key, top_k=k, pieces=pieces)


def fill_figure(res) -> go.Figure:
    """Top-5 of each masked piece, side by side; the original piece in green."""
    n = len(res.masks)
    fig = make_subplots(
        rows=1,
        cols=n,
        subplot_titles=[
            t(
                "walkthrough.s2.piece",
                number=i + 1,
                piece=plot_text(display_piece(m.original.piece)) if m.original else "?",
            )
            for i, m in enumerate(res.masks)
        ],
    )
    for c, m in enumerate(res.masks, start=1):
        colors = [GREEN if _is_original(m, x) else "#4C78A8" for x in m.candidates]
        # bars by rank, labelled with the text each piece stands for (two pieces may read alike: "Ġthe", "the");
        # the raw piece is in the hover
        rows = list(range(len(m.candidates)))
        fig.add_trace(
            go.Bar(
                x=[x.prob for x in m.candidates],
                y=rows,
                orientation="h",
                marker_color=colors,
                showlegend=False,
                customdata=plot_texts(x.piece for x in m.candidates),
                hovertemplate="%{customdata}: %{x:.3f}<extra></extra>",
            ),
            row=1,
            col=c,
        )
        fig.update_yaxes(
            autorange="reversed",
            tickvals=rows,
            ticktext=plot_texts(display_piece(x.piece) for x in m.candidates),
            row=1,
            col=c,
        )
    fig.update_xaxes(title_text=t("walkthrough.probability"))
    fig.update_layout(height=280, margin=dict(t=40, b=10))
    return fig


def _objectives() -> None:
    """Every registered family's pretraining objectives, from the registry: MLM is one of several."""
    st.markdown("#### " + t("walkthrough.s2.objectives_title"))
    st.dataframe(
        pd.DataFrame(
            [
                {
                    t("walkthrough.s2.col.family"): f.label,
                    t("walkthrough.s2.col.objectives"): t_or(f"families.{f.key}.objectives", " + ".join(f.objectives)),
                }
                for f in FAMILIES.values()
            ]
        ),
        hide_index=True,
        width="stretch",
    )


STEP = Step(
    N,
    render,
    correct=2,
    quiz=quiz,
    links=("fill-mask", "pretrain"),
    fields=(urlstate.Field(K("s2.whole_word"), "bool"),),
    keep=(K("s2.whole_word"), K("s2.word")),
)

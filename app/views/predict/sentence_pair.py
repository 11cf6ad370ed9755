"""Sentence pair's results: one pair's scores (with the heads switched off below them) and a scored batch. The page
(pages/sentence_pair.py) keeps the widgets; these draw what came back."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from app.kit import presenter
from app.kit.i18n import explain, t
from app.kit.render import as_text, mini_note, record_once
from app.views.inspect.ablation import pair_heads
from app.views.predict.results import (
    batch_report,
    batch_table,
    confusion_fig,
    pair_bars,
    pair_label,
    prob_label,
    token_strip,
)
from core.models.spec import LoadedModel
from core.predict.sentence_pair import PairResult
from core.runtime.jobs import Job

P = "sentence_pair"  # the page's name in session keys and the report's entries


def show_pair(res: PairResult | None, lm: LoadedModel, a: str, b: str, seed: int, k: Callable[[str], str]) -> None:
    """One pair's scores: the bars (when the head learned), each ordering's probability and the pieces."""
    if res is None:
        return
    for n in res.notes:
        st.warning(explain(n))
    learned = mini_note(res.checkpoint, res.head)  # a head that did not learn is not drawn as a result
    with st.container() if learned else st.expander(t("common.mini_scores_anyway")):
        if learned:
            st.plotly_chart(presenter.scale(pair_bars(res)), key=k("bars"), width="stretch")
        cols = st.columns(len(res.scores))
        for col, s in zip(cols, res.scores):
            col.metric(f"{prob_label(res.head, res.prob_label)} {pair_label(s.label)}", f"{s.prob:.1%}")
            col.caption(as_text(f"{s.first} ‖ {s.second}"))
    st.markdown(
        token_strip(res.scores[0].tokens, specials=tuple(lm.tokenizer.all_special_tokens)),
        unsafe_allow_html=True,
    )
    st.caption(t("sentence_pair.latency", ms=f"{res.latency_ms:,.1f}", n=len(res.scores)))
    if learned:
        st.markdown(t("sentence_pair.reading"))
    pair_heads(lm, a, b, seed)  # the same pair with heads switched off


def show_batch(job: Job, k: Callable[[str], str]) -> None:
    """A finished batch: accuracy, the confusion matrix, every row (and the report's entry, once)."""
    bres = job.result
    c1, c2, c3 = st.columns(3)
    c1.metric(t("sentence_pair.accuracy"), f"{bres.accuracy:.1%}")
    c2.metric(t("sentence_pair.rows"), len(bres.rows))
    c3.metric(t("sentence_pair.time"), f"{bres.latency_ms / 1000:,.2f} s")
    bprob = prob_label(bres.head, bres.prob_label)
    mini_note(bres.checkpoint, bres.head)  # a measured accuracy: drawn, with what the mini's head is
    st.caption(t("sentence_pair.batch_caption", model=bres.checkpoint, label=bprob, threshold=f"{bres.threshold:.2f}"))
    if bres.truncated_rows:
        st.warning(t("sentence_pair.truncated_rows", n=bres.truncated_rows))
    for n in bres.notes:
        st.info(explain(n))
    st.plotly_chart(presenter.scale(confusion_fig(bres)), key=k(f"confusion.{job.id}"), width="stretch")
    st.dataframe(batch_table(bres), hide_index=True, key=k(f"table.{job.id}"))
    record_once(
        k("recorded"),
        f"{P}:batch:{job.id}",
        lambda: batch_report(
            bres,
            {
                t("sentence_pair.in.model"): bres.checkpoint,
                t("sentence_pair.rows"): len(bres.rows),
                t("sentence_pair.in.threshold"): f"{bres.threshold:.2f}",
            },
        ),
    )

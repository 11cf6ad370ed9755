"""Step 3: Next Sentence Prediction, and why RoBERTa dropped it. Every family with a sentence-pair head (NSP or
SOP, asked of the registry) scores (A, B), (B, A) and (A, a sentence on another topic) (core.predict.sentence_pair)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, state, urlstate
from app.kit.i18n import explain, t, t_or
from app.kit.plot_text import plot_text
from app.kit.walkthrough_work import Flow, Load
from app.views.start.walkthrough.common import (
    K,
    Step,
    family_spec,
    load_family,
    noise_hint,
    noise_numbers,
    pair_head_note,
    pair_strip,
    record,
    text_default,
)
from core.base.segment import has_han
from core.predict.sentence_pair import PairConfig, predict_pair
from core.registry import ModelLoadError, family, pair_head_module, reads_chinese
from core.walkthrough.checks import no_pair_head_families, pair_head_families, unlearned_pair_head

N = 3
COLORS = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#72B7B2")


def render() -> Flow[None]:
    text_default(K("s3.a"), "example.pair_a")
    text_default(K("s3.b"), "example.pair_b")
    c1, c2 = st.columns(2)
    a = c1.text_input(t("walkthrough.sentence_a"), key=K("s3.a"))
    b = c2.text_input(t("walkthrough.sentence_b"), key=K("s3.b"))
    try:
        cfg = PairConfig(a, b)
    except ValueError as e:
        st.error(explain(e))
        return
    yield from _sidebar_without_head(a, b)
    results, english = [], []
    for fam in pair_head_families():
        if has_han(a + b) and not _reads_chinese(fam):  # an English mini's pair head on Chinese: not run
            english.append(family_spec(fam).checkpoint)
            continue
        lm = yield from load_family(fam, "pretraining")
        if lm is None:
            continue
        try:
            results.append(predict_pair(lm, cfg, probe=True))
        except ValueError as e:
            st.error(explain(e))
    st.caption(
        t("walkthrough.s3.no_head", families=t("walkthrough.list_sep").join(f.label for f in no_pair_head_families()))
    )
    if english:
        st.info(t("walkthrough.s3.zh_minis_english", ids=t("walkthrough.list_sep").join(english)))
    if not results:
        return
    pair_names = [t("walkthrough.s3.pair_ab"), t("walkthrough.s3.pair_ba"), t("walkthrough.s3.pair_other")]
    fig = go.Figure()
    for i, r in enumerate(results):
        name = t(f"walkthrough.s3.head.{r.head}", id=r.checkpoint)
        if unlearned_pair_head(r.checkpoint, r.head) is not None:
            name += t("walkthrough.s3.head_noise")
        fig.add_bar(
            x=pair_names[: len(r.scores)],
            y=[s.prob for s in r.scores],
            name=name,
            marker_color=COLORS[i % len(COLORS)],
            text=[f"{s.prob:.0%}" for s in r.scores],
            textposition="outside",
            hovertemplate="%{x}: %{y:.3f}<extra>" + plot_text(name) + "</extra>",
        )
    fig.add_hline(y=0.5, line_dash="dot", line_color="grey")
    fig.update_layout(
        barmode="group",
        height=360,
        yaxis=dict(range=[0, 1.1], title=t("walkthrough.s3.y")),
        margin=dict(t=30, b=10),
        legend=dict(orientation="h", y=-0.2),
    )
    st.plotly_chart(presenter.scale(fig), key=K("s3.fig"), width="stretch")
    for r in results:
        pair_head_note(r.checkpoint, r.head)
    other = results[0].scores[2].second if len(results[0].scores) > 2 else ""
    if other:
        st.caption(t("walkthrough.s3.other", sentence=other))
    rows = [
        {
            t("walkthrough.in.model"): r.checkpoint,
            t("walkthrough.s3.col.head"): r.head.upper(),
            **{n: round(s.prob, 3) for n, s in zip(pair_names, r.scores)},
        }
        for r in results
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    record(N, {t("walkthrough.sentence_a"): a, t("walkthrough.sentence_b"): b}, rows=rows, figures=[fig])


def _reads_chinese(fam) -> bool:
    try:
        return reads_chinese(family_spec(fam).checkpoint)
    except ModelLoadError:
        return False


def _sidebar_without_head(a: str, b: str) -> Flow[None]:
    """The sidebar's model has no NSP/SOP head (XLM-R, RoBERTa): say so, and show what it can, the pair as it
    reads it (core.walkthrough.embeddings: the same encoding step 1 draws)."""
    spec = state.current_spec()
    if spec is None or family(spec.family).pair_head is not None:
        return
    lm = yield Load(spec, "mlm")
    if lm is None or pair_head_module(lm.model) is not None:
        return
    st.markdown(
        t(
            "walkthrough.s3.zh_no_head",
            id=spec.checkpoint,
            note=t_or(f"families.{lm.family.key}.pair_head_note", lm.family.pair_head_note),
        )
    )
    r = pair_strip(lm, a, b)
    if r is None:
        return
    tok = lm.tokenizer
    st.caption(
        t(
            "walkthrough.s3.zh_pair_tokens_types" if r.has_segments else "walkthrough.s3.zh_pair_tokens",
            n=len(r.tokens),
            cls=tok.cls_token,
            sep=tok.sep_token,
            seps=tok.sep_token * lm.family.pair_separators,
        )
    )
    st.divider()


def hint() -> str:
    """The "try this" text: it compares the two heads' (B, A) bars, unless a head in use did not learn (a bundled
    mini's, by its card): then it says that head's bars are noise and what to read instead."""
    a, b = st.session_state.get(K("s3.a")) or "", st.session_state.get(K("s3.b")) or ""
    if has_han(a + b) and not any(_reads_chinese(fam) for fam in pair_head_families()):
        return t("walkthrough.s3.zh_try")  # no pair head runs on this Chinese pair: what to try instead
    notes, learned = [], 0
    for fam in pair_head_families():
        try:
            note = unlearned_pair_head(family_spec(fam).checkpoint, fam.pair_head)
        except ModelLoadError:
            continue
        if note is None:
            learned += 1
        else:
            notes.append(note)
    if not notes:
        return t("walkthrough.s3.try")
    which = t("walkthrough.list_sep").join(t("walkthrough.s3.noise_one", **noise_numbers(n)) for n in notes)
    return t(
        "walkthrough.s3.try_noise" if learned else "walkthrough.s3.try_all_noise",
        notes=which,
        hint=" ".join(dict.fromkeys(noise_hint(n) for n in notes)),
    )


STEP = Step(
    N,
    render,
    correct=0,
    hint=hint,
    links=("sentence-pair",),
    fields=(urlstate.Field(K("s3.a"), max_len=500), urlstate.Field(K("s3.b"), max_len=500)),
    keep=(K("s3.a"), K("s3.b")),
)

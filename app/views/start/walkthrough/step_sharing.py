"""Step 4: ALBERT's factorized embeddings (the V×H against V×E + E×H calculator, core.models.params), its shared layers
(stored against applied parameters of base and large, from the shipped configs) and its SOP head on one ordered
pair. The families compared are asked of the registry (core.walkthrough.checks.sharing_plan, sop_family)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, state, urlstate
from app.kit.i18n import explain, t
from app.kit.plot_text import plot_text
from app.kit.walkthrough_work import Flow, Load
from app.kit.zh_examples import chinese_examples
from app.views.start.walkthrough.common import K, Step, breakdowns, load_family, pair_head_note, record
from core.models.params import albert_factorization
from core.predict.sentence_pair import PairConfig, predict_pair
from core.registry import ModelLoadError
from core.walkthrough.checks import sharing_plan, sharing_rows, sop_family

N = 4
# V, H, E: (lo, hi, default, widget step), read by the widgets and the URL fields. Defaults: the articles' example.
SIZES = {"s4.v": (1, 1_000_000, 30000, 1000), "s4.h": (1, 65_536, 768, 64), "s4.e": (1, 65_536, 128, 16)}


def render() -> Flow[None]:
    st.markdown("#### " + t("walkthrough.s4.calc_title"))
    c = st.columns(3)
    v, h, e = (_size(col, name) for col, name in zip(c, SIZES))
    f = None
    try:
        f = albert_factorization(int(v), int(h), int(e))
    except ValueError as err:
        st.error(explain(err))
    if f is not None:
        m = st.columns(3)
        m[0].metric(t("walkthrough.s4.full"), f"{f.full / 1e6:,.2f}M")
        m[1].metric(
            t("walkthrough.s4.fact"), f"{f.factorized / 1e6:,.2f}M", f"-{f.saved / 1e6:,.2f}M", delta_color="inverse"
        )
        m[2].metric(t("walkthrough.s4.ratio"), f"{f.ratio:,.1f}×")
        st.caption(
            t(
                "walkthrough.s4.parts",
                ve=f"{f.vocab * f.embedding / 1e6:,.2f}M",
                eh=f"{f.embedding * f.hidden / 1e6:,.3f}M",
            )
        )
    if chinese_examples():  # the Chinese-capable model in the sidebar: its own vocabulary in the same sum
        yield from _sidebar_vocab()

    st.markdown("#### " + t("walkthrough.s4.share_title"))
    plan = sharing_plan()
    rows_b = []
    if plan is not None:
        try:
            rows_b = sharing_rows(breakdowns(plan.checkpoints))
        except (ValueError, ModelLoadError) as err:
            st.error(explain(err))
    fig = None
    rows = []
    if rows_b:
        ids = [r.checkpoint for r in rows_b]
        stored = [r.stored_m for r in rows_b]
        applied = [r.applied_m for r in rows_b]
        fig = go.Figure()
        for name, ys, color in (
            (t("walkthrough.s4.stored"), stored, "#4C78A8"),
            (t("walkthrough.s4.applied"), applied, "#F58518"),
        ):
            fig.add_bar(
                x=ids,
                y=ys,
                name=name,
                marker_color=color,
                text=[f"{y:,.0f}M" for y in ys],
                textposition="outside",
                hovertemplate="%{x}: %{y:,.1f}M<extra>" + plot_text(name) + "</extra>",
            )
        fig.update_layout(
            barmode="group",
            height=380,
            yaxis_title=t("walkthrough.s4.y"),
            margin=dict(t=30, b=10),
            legend=dict(orientation="h", y=-0.2),
        )
        st.plotly_chart(presenter.scale(fig), key=K("s4.fig"), width="stretch")
        rows = [
            {
                t("walkthrough.in.model"): r.checkpoint,
                t("walkthrough.s4.col.layers"): r.layers,
                t("walkthrough.s4.col.hidden"): r.hidden,
                t("walkthrough.s4.col.e"): r.embedding_size,
                t("walkthrough.s4.col.stored"): round(r.stored_m, 1),
                t("walkthrough.s4.col.claim"): r.claim_m if r.claim_m is not None else t("walkthrough.none"),
                t("walkthrough.s4.col.applied"): round(r.applied_m, 1),
            }
            for r in rows_b
        ]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        st.caption(t("walkthrough.s4.share_caption"))

    st.markdown("#### " + t("walkthrough.s4.sop_title"))
    sop_rows = yield from _sop()
    record(
        N,
        {"V": v, "H": h, "E": e},
        rows=rows + sop_rows,
        figures=[fig] if fig is not None else [],
        same=("calculator",),
        text=t("walkthrough.s4.report", full=f"{f.full:,}", fact=f"{f.factorized:,}", ratio=f"{f.ratio:.1f}")
        if f is not None
        else "",
    )


ALBERT_E = 128  # ALBERT-base's embedding size


def _sidebar_vocab() -> Flow[None]:
    spec = state.current_spec()
    lm = (yield Load(spec, "mlm")) if spec is not None else None
    if lm is None:
        return
    v, h = int(lm.model.config.vocab_size), int(lm.model.config.hidden_size)
    f = albert_factorization(v, h, min(ALBERT_E, h))
    st.info(
        t(
            "walkthrough.s4.zh_vocab",
            id=spec.checkpoint,
            vocab=f"{v:,}",
            hidden_size=h,
            ve=f"{f.full / 1e6:,.1f}M",
            embedding_size=f.embedding,
            fact=f"{f.factorized / 1e6:,.1f}M",
            ratio=f"{f.ratio:,.1f}",
        )
    )


def _size(col, name: str) -> int:
    lo, hi, default, step = SIZES[name]
    st.session_state.setdefault(K(name), default)
    return col.number_input(t(f"walkthrough.{name}"), lo, hi, key=K(name), step=step)


def _sop() -> Flow[list[dict]]:
    """The SOP head on one ordered pair, both ways round; the rows for the report."""
    fam = sop_family()
    lm = (yield from load_family(fam, "pretraining")) if fam is not None else None
    if lm is None:
        return []
    sa, sb = t("walkthrough.example.sop_a"), t("walkthrough.example.sop_b")
    if chinese_examples():  # Chinese everywhere else in this walkthrough: say why this pair is English
        st.caption(t("walkthrough.s4.zh_sop_english", id=lm.spec.checkpoint))
    try:
        r = predict_pair(lm, PairConfig(sa, sb), probe=False)
    except ValueError as err:
        st.error(explain(err))
        return []
    m = st.columns(2)
    m[0].metric(t("walkthrough.s4.sop_ab", first=sa, second=sb), f"{r.scores[0].prob:.1%}")
    m[1].metric(t("walkthrough.s4.sop_ba", first=sb, second=sa), f"{r.scores[1].prob:.1%}")
    st.caption(t("walkthrough.s4.sop_caption", id=r.checkpoint))
    pair_head_note(r.checkpoint, r.head)  # a mini's SOP head that did not learn: these two numbers are noise
    return [
        {t("walkthrough.s3.col.pair"): f"{s.first} ‖ {s.second}", t("walkthrough.s3.y"): round(s.prob, 3)}
        for s in r.scores
    ]


STEP = Step(
    N,
    render,
    correct=1,
    links=("models",),
    fields=tuple(urlstate.Field(K(name), "int", lo=lo, hi=hi) for name, (lo, hi, _, _) in SIZES.items()),
    keep=tuple(K(name) for name in SIZES),
)

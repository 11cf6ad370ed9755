"""Step 5: a distilled student against its teacher (the registry's ``distilled_from``): their parameters from the
shipped configs, and on a click their speed on this device and the bundled models' held-out top-5
(core.walkthrough.checks.measure_distillation, on core.compare.speed and core.predict.fill_mask)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app.kit import presenter, state, urlstate
from app.kit.i18n import explain, t
from app.kit.jobs_panel import job_section
from app.kit.walkthrough_work import Flow, MeasureDistillation
from app.kit.zh_examples import chinese_examples
from app.views.start.walkthrough.common import K, Step, breakdowns, device, record
from core.models.cards import bundled_card
from core.registry import FAMILIES, ModelLoadError, family
from core.walkthrough.checks import distillation_pair

N = 5
SEQS, BATCHES, SENTENCES = (8, 16, 32, 64, 128), (1, 2, 4, 8), (4, 8, 16, 32, 64)
REPS = (1, 10)
# The articles' figure sits in a metric's delta slot as a reference, not a change: grey, with no up/down arrow
CLAIM = dict(delta_color="off", delta_arrow="off")
DEFAULTS = {"s5.seq": 32, "s5.batch": 4, "s5.reps": 3, "s5.sentences": 32}


def _params() -> None:
    """The teacher's and the student's base parameters from their shipped configs, beside the seeds' claims."""
    student = next((f for f in FAMILIES.values() if f.distilled_from), None)
    if student is None:
        return
    teacher = family(student.distilled_from)
    try:
        bb, db = breakdowns((teacher.base_checkpoint, student.base_checkpoint))
    except (ValueError, ModelLoadError) as e:
        st.error(explain(e))
        return
    c = st.columns(3)
    c[0].metric(
        t("walkthrough.s5.bert_params"),
        f"{bb.backbone / 1e6:,.1f}M",
        t("walkthrough.s5.claim", millions=f"{bb.claim_m:g}") if bb.claim_m else None,
        **CLAIM,
    )
    c[1].metric(
        t("walkthrough.s5.distil_params"),
        f"{db.backbone / 1e6:,.1f}M",
        t("walkthrough.s5.claim", millions=f"{db.claim_m:g}") if db.claim_m else None,
        **CLAIM,
    )
    c[2].metric(
        t("walkthrough.s5.smaller"), f"{1 - db.backbone / bb.backbone:.0%}", t("walkthrough.s5.claim_pct"), **CLAIM
    )


def render() -> Flow[None]:
    if chinese_examples():  # the Chinese-capable model has no bundled teacher: what this step shows instead
        st.info(t("walkthrough.s5.zh_not_applicable", id=state.current_spec().checkpoint))
    pair = distillation_pair()
    for mid in pair.missing:
        st.warning(t("walkthrough.s5.missing", id=mid))
    if pair.stand_in:
        st.info(t("walkthrough.s5.stand_in", teacher=FAMILIES[pair.teacher].label))
    _params()
    for key, value in DEFAULTS.items():
        st.session_state.setdefault(K(key), value)
    with presenter.settings():
        c = st.columns(4)
        seq = c[0].select_slider(t("walkthrough.s5.seq"), SEQS, key=K("s5.seq"))
        batch = c[1].select_slider(t("walkthrough.s5.batch"), BATCHES, key=K("s5.batch"))
        reps = c[2].number_input(t("walkthrough.s5.reps"), *REPS, key=K("s5.reps"))
        n_sent = c[3].select_slider(t("walkthrough.s5.sentences"), SENTENCES, key=K("s5.sentences"))
    # A background job, as on the Speed page: a room pressing Measure at once waits its turn in the job queue instead
    # of timing its runs against each other in the script threads (#46 §2). The page starts it.
    asked = (int(seq), int(batch), int(reps), int(n_sent), device())
    jobs_key = K("s5.jobs")
    if st.button(t("walkthrough.s5.measure"), key=K("s5.run"), type="primary", icon=":material/speed:"):
        yield MeasureDistillation(jobs_key, asked)
    if not job_section(jobs_key, asked, lambda j: _done(j, int(n_sent)), key=K("s5.job")):
        res = st.session_state.get(K("s5.result"))
        if res is None:
            st.caption(t("walkthrough.s5.not_yet"))
            return
        _draw(res, n_sent)


def _done(job, n_sent: int) -> None:
    """The finished measurement: kept in the session (as a mapping, as before the result had a type), then drawn."""
    m = job.result
    st.session_state[K("s5.result")] = {f.name: getattr(m, f.name) for f in dataclasses.fields(m)}
    _draw(st.session_state[K("s5.result")], n_sent)


def _draw(res: dict, n_sent: int) -> None:
    sp, student, teacher, models = res["speed"], res["student"], res["teacher"], res["models"]
    speedup = sp.speedup(student, teacher)
    st.success(
        t(
            "walkthrough.s5.speed",
            device=sp.device_name,
            batch=sp.batch,
            seq=sp.seq_len,
            reps=sp.repeats,
            bert=f"{sp.row(teacher).latency_ms:,.1f}",
            distil=f"{sp.row(student).latency_ms:,.1f}",
            speedup=f"{speedup:.2f}",
            at=res["at"],
        )
    )
    for err in res["errors"]:
        st.error(explain(err))
    rows = []
    for m in models:
        card = bundled_card(m.checkpoint).get("heldout", {})
        rows.append(
            {
                t("walkthrough.in.model"): m.checkpoint,
                t("walkthrough.s5.col.layers"): m.layers,
                t("walkthrough.s5.col.params"): round(m.params / 1e6, 1),
                t("walkthrough.s5.col.top5"): f"{m.top5:.1%}",
                t("walkthrough.s5.col.pieces"): m.pieces,
                t("walkthrough.s5.col.ms"): round(m.ms, 1),
                t("walkthrough.s5.col.card"): f"{card['mlm_top5']:.1%}"
                if "mlm_top5" in card
                else t("walkthrough.none"),
            }
        )
    fig = None
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        st.caption(t("walkthrough.s5.top5_caption", n=models[0].sentences))
        fig = make_subplots(
            rows=1,
            cols=3,
            subplot_titles=(t("walkthrough.s5.col.params"), t("walkthrough.s5.col.ms"), t("walkthrough.s5.col.top5")),
        )
        names = [m.checkpoint for m in models]
        for col, ys in enumerate(
            ([m.params / 1e6 for m in models], [m.ms for m in models], [m.top5 for m in models]), start=1
        ):
            fig.add_trace(
                go.Bar(x=names, y=ys, marker_color=["#4C78A8", "#F58518"][: len(ys)], showlegend=False), row=1, col=col
            )
        fig.update_layout(height=320, margin=dict(t=40, b=10))
        st.plotly_chart(presenter.scale(fig), key=K("s5.fig"), width="stretch")
        if len(models) == 2:
            tm, sm = models
            st.markdown(
                t(
                    "walkthrough.s5.verdict",
                    teacher=tm.checkpoint,
                    student=sm.checkpoint,
                    size=f"{1 - sm.params / tm.params:.0%}",
                    speedup=f"{tm.ms / max(sm.ms, 1e-9):.2f}",
                    kept=f"{sm.top5 / tm.top5:.0%}" if tm.top5 > 0 else "–",
                )
            )
        vs = bundled_card(models[-1].checkpoint).get("vs_teacher", {})
        if "top5_kept" in vs:
            st.caption(
                t(
                    "walkthrough.s5.card_kept",
                    teacher=vs.get("teacher", "?"),
                    kept=f"{vs['top5_kept']:.1%}",
                    speedup=f"{vs.get('speedup', 0):.2f}",
                    encoder_speedup=f"{vs.get('encoder_speedup', 0):.2f}",
                )
            )
    record(
        N,
        {
            t("walkthrough.s5.seq"): sp.seq_len,
            t("walkthrough.s5.batch"): sp.batch,
            t("walkthrough.s5.reps"): sp.repeats,
            t("walkthrough.s5.sentences"): n_sent,
            t("walkthrough.in.device"): sp.device_name,
        },
        rows=rows,
        figures=[fig] if fig is not None else [],
        text=t("walkthrough.s5.report", speedup=f"{speedup:.2f}", device=sp.device_name),
    )


STEP = Step(
    N,
    render,
    correct=2,
    links=("speed", "models"),
    fields=(
        urlstate.Field(K("s5.seq"), "int", choices=SEQS),
        urlstate.Field(K("s5.batch"), "int", choices=BATCHES),
        urlstate.Field(K("s5.reps"), "int", lo=REPS[0], hi=REPS[1]),
        urlstate.Field(K("s5.sentences"), "int", choices=SENTENCES),
    ),
    keep=tuple(K(k) for k in DEFAULTS),
)

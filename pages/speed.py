"""Speed: latency and throughput of each family's base architecture, measured in a background job; then the
sidebar's model in fp32 against int8 (core.compare.int8), the third article's ALBERT + quantization advice beside it.

The shape and families live in the URL (a link restores them; it never starts a measurement by itself);
each finished measurement goes to the session report."""

from functools import partial

import pandas as pd
import streamlit as st

from app.kit import presenter, state, urlstate
from app.kit.i18n import t, t_or
from app.kit.jobs_panel import job_section, start_job, submit_job
from app.kit.render import record_once, speed_chart, throughput_chart
from app.views.compare.practice import INT8_JOBS, Int8Ask, int8_result, int8_section
from core.base.fields import bounds, default_of
from core.compare.int8 import QuantConfig, measure_quantization
from core.compare.speed import SEED_CLAIMS, SpeedConfig, measure_speed
from core.registry import FAMILIES
from core.runtime.jobs import progress_job

# SpeedConfig declares the ranges (core.compare.speed.check_timing_shape checks them): the widgets and the URL read them
SEQ_LENS = bounds(SpeedConfig, "seq_len").stops
BATCHES = bounds(SpeedConfig, "batch").stops
REPS = bounds(SpeedConfig, "repeats")
TIMEABLE = tuple(k for k, f in FAMILIES.items() if f.base_checkpoint)  # every family with a base-size config shipped
DEFAULTS = {
    "speed.seq": default_of(SpeedConfig, "seq_len"),
    "speed.batch": default_of(SpeedConfig, "batch"),
    "speed.reps": REPS.default,
    "speed.families": list(default_of(SpeedConfig, "families")),
}
FIELDS = (
    urlstate.Field("speed.seq", "int", choices=SEQ_LENS),
    urlstate.Field("speed.batch", "int", choices=BATCHES),
    urlstate.Field.of("speed.reps", REPS),
    urlstate.Field("speed.families", "strs", choices=TIMEABLE),
)

st.title(t("speed.title"))
st.caption(t("speed.intro"))
urlstate.bind(FIELDS)
spec = state.current_spec()
device = spec.device if spec else "auto"
for key, value in DEFAULTS.items():
    st.session_state.setdefault(key, list(value) if isinstance(value, list) else value)

with st.form("speed.form"):
    with presenter.settings():
        c1, c2, c3 = st.columns(3)
        seq = c1.select_slider(t("speed.seq"), SEQ_LENS, key="speed.seq")
        batch = c2.select_slider(t("speed.batch"), BATCHES, key="speed.batch")
        reps = c3.number_input(t("speed.reps"), **REPS.widget(), key="speed.reps")
    fams = st.multiselect(
        t("speed.families"), list(TIMEABLE), key="speed.families", format_func=lambda k: FAMILIES[k].label
    )
    go = st.form_submit_button(t("speed.measure"), type="primary")

asked = (tuple(fams), int(seq), int(batch), int(reps), device)
if go:

    def _submit():
        cfg = SpeedConfig(families=tuple(fams), seq_len=int(seq), batch=int(batch), repeats=int(reps), device=device)
        # the resource follows the device the measurement really uses ("auto" is CUDA on a GPU server)
        return submit_job(
            "speed",
            t("speed.job_name"),
            progress_job(measure_speed, cfg),
            device=cfg.device,
            jobs_key="speed.made_from",
            asked=asked,
        )

    start_job("speed.made_from", _submit)


def _comparisons(res) -> pd.DataFrame:
    """The seeds' speed claims whose two families were timed, against the measured speedup."""
    timed = {r.family for r in res.rows}
    return pd.DataFrame(
        [
            {
                t("speed.col.comparison"): t("speed.vs", fast=FAMILIES[fast].label, base=FAMILIES[base].label),
                t("speed.col.measured"): f"{res.speedup(fast, base):.2f}×",
                t("speed.col.claim"): t_or(f"speed.claim.{fast}_{base}", text),
                t("speed.col.claimed"): f"~{claim:g}×",
            }
            for (fast, base), (text, claim) in SEED_CLAIMS.items()
            if fast in timed and base in timed
        ]
    )


def _rows(res) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                t("speed.col.family"): r.label,
                t("speed.col.params"): round(r.params / 1e6, 1),
                t("speed.col.layers"): r.layers,
                t("speed.col.latency"): round(r.latency_ms, 1),
                t("speed.col.std"): round(r.latency_std_ms, 1),
                t("speed.col.throughput"): round(r.throughput, 1),
            }
            for r in res.rows
        ]
    )


def show(job) -> None:
    res = job.result
    st.success(
        t(
            "speed.measured",
            device=res.device,
            name=res.device_name,
            batch=res.batch,
            seq=res.seq_len,
            reps=res.repeats,
            seconds=f"{job.elapsed:,.1f}",
        )
    )
    a, b = st.columns(2)
    a.plotly_chart(presenter.scale(speed_chart(res)), width="stretch", key=f"speed.lat.{job.id}")
    b.plotly_chart(presenter.scale(throughput_chart(res)), width="stretch", key=f"speed.thr.{job.id}")
    st.subheader(t("speed.against_claims"))
    comparisons, rows = _comparisons(res), _rows(res)
    st.dataframe(comparisons, hide_index=True, width="stretch")
    st.dataframe(rows, hide_index=True, width="stretch")
    record_once(
        "speed.recorded",
        f"speed:{job.id}",
        lambda: dict(
            page=t("nav.speed"),
            title=t("speed.report_title", device=res.device_name),
            inputs={
                t("speed.in.families"): ", ".join(r.label for r in res.rows),
                t("speed.seq"): res.seq_len,
                t("speed.batch"): res.batch,
                t("speed.reps"): res.repeats,
                t("speed.in.device"): res.device,
            },
            rows=rows.to_dict("records"),
            text=" · ".join(
                t("speed.report_cmp", pair=c[0], measured=c[1], claimed=c[3])
                for c in comparisons.itertuples(index=False)
            ),
            figures=[speed_chart(res), throughput_chart(res)],
        ),
    )


def _submit_int8(ask: Int8Ask):
    """The int8 section's measurement, as a job of this session (a bad shape raises ValueError: start_job says it)."""
    cfg = QuantConfig(seq_len=ask.seq_len, batch=ask.batch, repeats=ask.repeats)
    return submit_job(
        "speed",
        t("speed.int8.job_name"),
        progress_job(measure_quantization, ask.base, cfg),
        resource="cpu",
        jobs_key=INT8_JOBS,
        asked=ask.asked,
    )


# a measurement is shown only under the settings it was made with
if not job_section("speed.made_from", asked, show, key="speed") and not st.session_state.get("speed.made_from"):
    st.info(t("speed.hint"))

st.divider()
int8 = int8_section(spec, seq, batch, reps)  # the sidebar's model in fp32 and int8, at the shape above
if int8 is not None and int8.go:
    start_job(INT8_JOBS, partial(_submit_int8, int8))
int8_result(int8)

urlstate.publish()  # values first created in this run (the defaults) join the link too

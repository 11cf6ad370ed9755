"""Speed: latency and throughput of each family's base architecture, measured in a background job."""
import pandas as pd
import streamlit as st

from app import state
from app.jobs_ui import job_panel, runner
from app.render import speed_chart, throughput_chart
from core.bench import SpeedConfig, measure_speed
from core.models import FAMILIES

st.title("Speed")
st.caption("Each family's **base** architecture with **random weights of the real config** — timing does not "
           "depend on the weight values. Measured on this server's device, round-robin, median of the rounds.")
spec = state.current_spec()
device = spec.device if spec else "auto"

with st.form("speed.form"):
    c1, c2, c3 = st.columns(3)
    seq = c1.select_slider("Sequence length", [16, 32, 64, 128, 256, 512], value=128, key="speed.seq")
    batch = c2.select_slider("Batch", [1, 2, 4, 8, 16, 32, 64], value=8, key="speed.batch")
    reps = c3.number_input("Rounds", 1, 50, 5, key="speed.reps")
    fams = st.multiselect("Families", list(FAMILIES), default=list(FAMILIES), key="speed.families",
                          format_func=lambda k: FAMILIES[k].label)
    go = st.form_submit_button("Measure", type="primary")

if go:
    try:
        cfg = SpeedConfig(families=tuple(fams), seq_len=int(seq), batch=int(batch), repeats=int(reps), device=device)
        job = runner().submit("Speed", lambda ctx: measure_speed(cfg, ctx.progress),
                              resource="gpu" if device == "cuda" else "cpu", owner=state.session_id())
        state.job_ids("speed").append(job.id)
    except ValueError as e:
        st.error(str(e))


def show(job) -> None:
    res = job.result
    st.success(f"Measured on {res.device} ({res.device_name}): batch {res.batch} × {res.seq_len} tokens, "
               f"{res.repeats} rounds, in {job.elapsed:,.1f}s.")
    a, b = st.columns(2)
    a.plotly_chart(speed_chart(res), width="stretch", key=f"speed.lat.{job.id}")
    b.plotly_chart(throughput_chart(res), width="stretch", key=f"speed.thr.{job.id}")
    st.subheader("Against the seeds' claims")
    st.dataframe(pd.DataFrame([{"comparison": pair, "measured speedup": f"{m:.2f}×", "seeds claim": text,
                                "claimed": f"~{c:g}×"} for pair, m, text, c in res.comparisons()]),
                 hide_index=True, width="stretch")
    st.dataframe(pd.DataFrame([{"family": r.label, "params (M)": round(r.params / 1e6, 1), "layers": r.layers,
                                "ms / batch": round(r.latency_ms, 1), "± ms": round(r.latency_std_ms, 1),
                                "sequences / s": round(r.throughput, 1)} for r in res.rows]),
                 hide_index=True, width="stretch")


ids = state.job_ids("speed")
if ids:
    job_panel(ids[-1], show, key="speed")
else:
    st.info("Choose the shape and press **Measure**. Four base-size models take a few seconds to a minute on a CPU.")

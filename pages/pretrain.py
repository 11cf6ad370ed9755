"""Pretraining lab: pretrain a small model with switchable objectives, watch its curves, compare runs."""
import plotly.graph_objects as go
import streamlit as st

from app import state
from app.jobs_ui import job_panel, runner
from core.jobs import DONE
from core.models import FAMILIES
from core.pretrain.corpus import CorpusError
from core.pretrain.lab import LabRequest, job, limits, prepare, switches
from core.pretrain.train import PretrainError

PAGE = "pretrain"
lim = limits()
st.title("Pretraining lab")
st.caption(f"Pretrain a small encoder on this server with each family's objectives. Limits here: "
           f"{lim.max_steps} steps, size up to '{lim.max_size}'. Runs sit side by side below; a finished run "
           "can be picked in the sidebar (this session only).")

fam = st.selectbox("Family", list(FAMILIES), format_func=lambda k: FAMILIES[k].label, key=state.key(PAGE, "family"))
sw = switches(fam)
with st.form("pretrain.form"):
    c1, c2, c3 = st.columns(3)
    masking = c1.radio("MLM masking", ["dynamic", "static"], key=state.key(PAGE, "masking"),
                       help="Static: one mask per sequence for the whole run (BERT). Dynamic: a fresh mask on "
                            "every visit (RoBERTa).")
    whole_word = c1.checkbox("Whole-word masking", key=state.key(PAGE, "wwm"))
    pair = c2.checkbox(f"{sw['pair']} ({sw['pair_label']})" if sw["pair"] else "Sentence-pair head",
                       value=bool(sw["pair"]), disabled=not sw["pair"], key=state.key(PAGE, f"pair.{fam}"),
                       help=sw["pair_note"])
    distill = c2.checkbox("Distil from the bundled mini BERT", disabled=not sw["distill"],
                          key=state.key(PAGE, f"distill.{fam}"))
    size = c3.selectbox("Model size", lim.sizes, key=state.key(PAGE, "size"))
    steps = c3.number_input("Steps", 1, lim.max_steps, min(100, lim.max_steps), key=state.key(PAGE, "steps"))
    upload = st.file_uploader("Corpus (optional): a .txt file, one sentence per line, a blank line between "
                              "documents. Empty: the bundled corpus.", type=None, key=state.key(PAGE, "upload"))
    go_btn = st.form_submit_button("Pretrain", type="primary")

if go_btn:
    try:
        req = LabRequest(family=fam, steps=int(steps), size=size, masking=masking, whole_word=whole_word,
                         pair=pair, distill=distill, upload=upload.getvalue() if upload else None,
                         upload_name=upload.name if upload else "upload.txt")
        cfg = prepare(req)
        n = len(state.job_ids(PAGE)) + 1
        name = f"run {n}: {FAMILIES[fam].label} {size}, {steps} steps"
        j = runner().submit(name, job(cfg), resource="gpu" if cfg.device == "cuda" else "cpu",
                            owner=state.session_id())
        state.job_ids(PAGE).append(j.id)
    except (PretrainError, CorpusError) as e:
        st.error(str(e))

CURVES = {"mlm_acc": "MLM accuracy (train batch)", "heldout_top5": "held-out top-5",
          "nsp_acc": "NSP accuracy (train batch)", "sop_acc": "SOP accuracy (train batch)"}


def curves(jobs, metric: str) -> go.Figure:
    """One line per run for ``metric`` against the step."""
    fig = go.Figure()
    for j in jobs:
        pts = [(m["step"], m[metric]) for m in j.metrics if metric in m]
        if pts:
            fig.add_scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines+markers", name=j.name)
    fig.update_layout(title=CURVES.get(metric, metric), xaxis_title="step", height=300, margin=dict(t=40, b=10),
                      legend=dict(orientation="h"))
    return fig


def live(j) -> None:
    a, b = st.columns(2)
    a.plotly_chart(curves([j], "mlm_loss"), width="stretch", key=f"pretrain.loss.{j.id}.{len(j.metrics)}")
    pair_key = next((k for k in ("nsp_acc", "sop_acc") if any(k in m for m in j.metrics)), "mlm_acc")
    b.plotly_chart(curves([j], pair_key), width="stretch", key=f"pretrain.pair.{j.id}.{len(j.metrics)}")
    samples = next((m["samples"] for m in reversed(j.metrics) if m.get("samples")), None)
    if samples:
        st.caption("Masked held-out sentences: gold tokens vs the model's top guess, at the latest evaluation")
        st.dataframe([{"text": s["text"], "gold": " ".join(s["gold"]), "guess": " ".join(s["pred"])}
                      for s in samples], hide_index=True, width="stretch")


def done(j) -> None:
    r = j.result
    f = r.final
    label = f"pretrained: {j.name}"
    state.register_session_model(label, r.family, r.out, "pretrained")
    msg = (f"{j.name}: held-out top-1 {f['mlm_top1']:.1%}, top-5 {f['mlm_top5']:.1%} "
           f"(unigram baseline {f['unigram_top5']:.1%})")
    if "pair_acc" in f:
        msg += f", pair accuracy {f['pair_acc']:.1%}"
    st.success(msg + f" in {r.wall_s:,.0f}s. Pick **{label}** in the sidebar to use it.")
    live(j)


ids = state.job_ids(PAGE)
if not ids:
    st.info("Choose a family and objectives, then press **Pretrain**. A tiny model takes about a minute on a CPU.")
for jid in reversed(ids[-3:]):
    with st.container(border=True):
        job_panel(jid, done, live, key=f"pretrain.{jid}")

finished = [j for j in (runner().get(i) for i in ids) if j is not None and j.status == DONE]
if len(finished) > 1:
    st.subheader("Runs side by side")
    st.caption("NSP (BERT) and SOP (ALBERT) side by side: does NSP get easy fast while SOP stays harder?")
    c = st.columns(2)
    for k, metric in enumerate(("heldout_top5", "nsp_acc", "sop_acc", "mlm_acc")):
        if any(metric in m for j in finished for m in j.metrics):
            c[k % 2].plotly_chart(curves(finished, metric), width="stretch", key=f"pretrain.cmp.{metric}")

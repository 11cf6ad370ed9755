"""Fine-tune: a short classification fine-tune of the sidebar's model, with live curves, results and run comparison."""
from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

from app import state
from app import render_finetune as view
from app.jobs_ui import job_panel, runner
from core.finetune import MAX_STEPS_LIMIT, FinetuneConfig, job_fn, job_resource, runs_root
from core.models import FAMILIES

K = view.K
st.title("Fine-tune")
st.caption("Teach the sidebar's model a classification task in a few minutes: it trains a fresh copy (the shared "
           "model is never touched) in a background job; you can leave the page, cancel, resume, and compare runs.")
runs: list[dict] = st.session_state.setdefault(K("runs"), [])
spec = state.current_spec()

st.subheader("1 · Data")
data = view.data_picker()

st.subheader("2 · Settings")
if spec is None:
    st.error(st.session_state.get(state.SPEC_ERROR) or "Pick a model in the sidebar.")
else:
    st.markdown(f"Model: **{spec.checkpoint}** ({FAMILIES[spec.family].label}) on `{spec.device}` — change it in "
                "the sidebar.")
with st.form(K("form")):
    c = st.columns(4)
    epochs = c[0].number_input("Epochs", 1, 50, 3, key=K("epochs"))
    max_steps = c[1].number_input("Max steps (0 = all epochs)", 0, MAX_STEPS_LIMIT, 0, key=K("max_steps"))
    lr = c[2].select_slider("Learning rate", [1e-5, 2e-5, 3e-5, 5e-5, 1e-4, 3e-4, 1e-3, 3e-3], 3e-5,
                            format_func=lambda v: f"{v:.0e}", key=K("lr"),
                            help="BERT's paper: 2e-5 to 5e-5. Tiny random models need far more (1e-3).")
    batch = c[3].select_slider("Batch size", [4, 8, 16, 32, 64], 16, key=K("batch"))
    c = st.columns(4)
    max_len = c[0].select_slider("Max length (tokens)", [32, 64, 128, 256, 512], 128, key=K("max_len"))
    warmup = c[1].number_input("Warmup ratio", 0.0, 0.5, 0.1, 0.05, key=K("warmup"))
    wd = c[2].number_input("Weight decay", 0.0, 0.3, 0.01, 0.01, key=K("wd"))
    clip = c[3].number_input("Gradient clipping (0 = off)", 0.0, 10.0, 1.0, 0.5, key=K("clip"))
    c = st.columns(4)
    pooling = c[0].radio("Pooling", ["cls", "mean"], key=K("pooling"), horizontal=True,
                         format_func=lambda p: "[CLS] (the family's head)" if p == "cls" else "mean of tokens",
                         help="[CLS] saves a standard *ForSequenceClassification folder; mean pooling saves the "
                              "encoder plus a separate linear head (pooling_head.safetensors).")
    freeze_emb = c[1].checkbox("Freeze embeddings", key=K("freeze_emb"))
    freeze_n = c[2].number_input("Freeze first N layers", 0, 48, 0, key=K("freeze_n"))
    seed = c[3].number_input("Seed", 0, 2**31 - 1, 42, key=K("seed"))
    c = st.columns(4)
    patience = c[0].number_input("Early-stopping patience (0 = off)", 0, 20, 2, key=K("patience"))
    evals = c[1].number_input("Evaluations per epoch", 1, 20, 1, key=K("evals"))
    rows = c[2].number_input("Training rows to use (0 = all)", 0, 100_000, 0, key=K("rows"))
    test_rows = c[3].number_input("Held-out rows to use (0 = all)", 0, 100_000, 0, key=K("test_rows"))
    start = st.form_submit_button("Start fine-tuning", type="primary")

if start:
    try:
        if spec is None or data is None:
            raise ValueError("Choose a valid model in the sidebar and data above first.")
        cfg = FinetuneConfig(spec.family, spec.checkpoint, epochs=int(epochs), max_steps=int(max_steps), lr=float(lr),
                             batch_size=int(batch), max_length=int(max_len), warmup_ratio=float(warmup),
                             weight_decay=float(wd), grad_clip=float(clip), seed=int(seed),
                             freeze_embeddings=freeze_emb, freeze_layers=int(freeze_n), pooling=pooling,
                             patience=int(patience), evals_per_epoch=int(evals), device=spec.device)
        run_data = data.subset(int(rows) or None, int(test_rows) or None)
        name = f"run{len(runs) + 1}-{spec.family}"
        out = runs_root(state.session_id()) / f"{name}-{time.strftime('%H%M%S')}"
        job = runner().submit(f"Fine-tune {name}", job_fn(cfg, run_data, out), resource=job_resource(cfg),
                              owner=state.session_id())
        runs.append(dict(name=name, job_id=job.id, cfg=cfg, data=run_data, out=str(out), result=None))
    except ValueError as e:
        st.error(str(e))

st.subheader("3 · Runs")
if not runs:
    st.info("No runs yet in this session. Pick data and settings, then start one.")
for run in reversed(runs):
    job = runner().get(run["job_id"])
    if run["result"] is None and job is not None and job.status == "done":
        run["result"] = job.result  # kept in the session: later errors cannot lose it
        state.register_session_model(f"{run['name']} ({run['data'].name})", run["cfg"].family,
                                     job.result.model_dir, kind="fine-tuned")
        st.rerun()  # once, so the sidebar picker (drawn before this page) lists the new model
    with st.expander(f"{run['name']} · {run['cfg'].checkpoint} · {run['data'].name}", expanded=run is runs[-1]):
        if run["result"] is not None:
            view.result_view(run["name"], run["result"])
            continue

        def resume(r=run) -> None:
            j = runner().submit(f"Fine-tune {r['name']} (resumed)", job_fn(r["cfg"], r["data"], r["out"], resume=True),
                                resource=job_resource(r["cfg"]), owner=state.session_id())
            r["job_id"] = j.id

        def finished(j, r=run) -> None:
            st.rerun()  # the result is picked up above and kept in the session

        job_panel(run["job_id"], on_done=finished, on_running=view.live, key=K(f"job.{run['name']}"))
        if job is not None and job.status == "cancelled" and (Path(run["out"]) / "checkpoint").exists():
            st.button("Resume from where it stopped", key=K(f"resume.{run['name']}"), on_click=resume)

done = [(r["name"], r["result"]) for r in runs if r["result"] is not None]
if done:
    st.subheader("4 · Compare runs")
    view.compare(done)

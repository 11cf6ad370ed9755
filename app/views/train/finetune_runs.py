"""The Fine-tune page's runs: starting one as a job of the session, then each run's panel (live curves, Cancel,
Resume, the out-of-memory offer), its result once done (registered as a model of the session and recorded once in the
report), and the comparison of finished runs."""

from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

from app.kit import state
from app.kit.i18n import t
from app.kit.jobs_panel import job_panel, runner
from app.views.train import finetune_charts as charts
from app.views.train import finetune_report as run_report
from app.views.train import finetune_results as results
from app.views.train.finetune import K, is_oom_error, oom_offer
from core.train.finetune import job_fn, job_resource, runs_root
from core.train.finetune_config import FinetuneConfig, apply_remedy


def submit(runs: list[dict], cfg: FinetuneConfig, run_data) -> None:
    """Start a run of ``cfg`` on ``run_data`` as a job of this session, and add it to ``runs`` (the page's list)."""
    name = f"run{len(runs) + 1}-{cfg.family}"
    out = runs_root(state.session_id()) / f"{name}-{time.strftime('%H%M%S')}"
    job = runner().submit(
        t("finetune.job_name", name=name),
        job_fn(cfg, run_data, out),
        resource=job_resource(cfg),
        owner=state.session_id(),
    )
    runs.append(dict(name=name, job_id=job.id, cfg=cfg, data=run_data, out=str(out), result=None))


def runs_section(runs: list[dict]) -> None:
    """Every run of the session, newest first, then the comparison of the finished ones."""
    st.subheader(t("finetune.h_runs"))
    if not runs:
        st.info(t("finetune.no_runs"))
    for run in reversed(runs):
        job = runner().get(run["job_id"])
        if run["result"] is None and job is not None and job.status == "done":
            run["result"] = job.result  # kept in the session: later errors cannot lose it
            state.register_session_model(
                f"{run['name']} ({run['data'].name})",
                run["cfg"].family,
                job.result.model_dir,
                kind="fine-tuned-token" if run["cfg"].task == "token" else "fine-tuned",
            )
            run_report.record_run(job.id, run["name"], job.result, len(run["data"].train))  # once, when it finishes
            st.rerun()  # once, so the sidebar picker (drawn before this page) lists the new model
        with st.expander(f"{run['name']} · {run['cfg'].checkpoint} · {run['data'].name}", expanded=run is runs[-1]):
            if run["result"] is not None:
                results.result_view(run["name"], run["result"])
                continue

            def resume(r=run) -> None:
                j = runner().submit(
                    t("finetune.job_name_resumed", name=r["name"]),
                    job_fn(r["cfg"], r["data"], r["out"], resume=True),
                    resource=job_resource(r["cfg"]),
                    owner=state.session_id(),
                )
                r["job_id"] = j.id

            job_panel(
                run["job_id"],
                on_done=lambda j: st.rerun(),
                on_running=charts.live,  # result picked up above
                key=K(f"job.{run['name']}"),
            )
            if job is not None and job.status == "error" and is_oom_error(job.error):
                oom_offer(run, lambda r, remedy: submit(runs, apply_remedy(r["cfg"], remedy), r["data"]))
            if job is not None and job.status == "cancelled" and (Path(run["out"]) / "checkpoint").exists():
                st.button(t("finetune.resume"), key=K(f"resume.{run['name']}"), on_click=resume)

    done = [(r["name"], r["result"]) for r in runs if r["result"] is not None]
    if done:
        st.subheader(t("finetune.h_compare"))
        results.compare(done)

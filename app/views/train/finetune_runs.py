"""The Fine-tune page's runs: each run's panel (live curves, Cancel, Resume, the out-of-memory offer), its result
once done (registered as a model of the session and recorded once in the report) with its slices, and the comparison
of finished runs (two of them slice by slice: finetune_slices). The page starts the jobs (app.kit.finetune_work): it
passes in each run's job, and what Resume, a remedy's restart and a try-it box call (they act inside a run's panel,
on a click)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

import streamlit as st

from app.kit import state
from app.kit.i18n import t
from app.kit.jobs_panel import job_panel
from app.views.train import finetune_datamap as datamap
from app.views.train import finetune_report as run_report
from app.views.train import finetune_results as results
from app.views.train import finetune_slices as slices
from app.views.train.finetune import K, is_oom_error, oom_offer
from app.views.train.finetune_results import Loader
from core.runtime.jobs import Job


def runs_section(
    runs: list[dict],
    jobs: Mapping[int, Job | None],
    resume: Callable[[dict], None],
    restart: Callable[[dict, str], None],
    load: Loader,
) -> None:
    """Every run of the session, newest first, then the comparison of the finished ones. ``jobs``: each run's job by
    id (None: gone); ``resume(run)``, ``restart(run, remedy)``: start a cancelled run again, or a run that ran out of
    memory with a remedy; ``load``: a finished run's classifier (its try-it box)."""
    st.subheader(t("finetune.h_runs"))
    if not runs:
        st.info(t("finetune.no_runs"))
    # one keyword and regex slice every finished sequence run (and the comparison below)
    sliced = any(r["result"] is not None and r["result"].task == "sequence" for r in runs)
    slicing = slices.slicing_form() if sliced else None
    for run in reversed(runs):
        job = jobs.get(run["job_id"])
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
                results.result_view(run["name"], run["result"], load, slicing)
                datamap.finished(run["name"], run["result"], run["data"])
                continue
            job_panel(
                run["job_id"],
                on_done=lambda j: st.rerun(),
                on_running=partial(datamap.live, name=run["name"], data=run["data"]),  # curves, map; result above
                key=K(f"job.{run['name']}"),
            )
            if job is not None and job.status == "error" and is_oom_error(job.error):
                oom_offer(run, restart)
            if job is not None and job.status == "cancelled" and (Path(run["out"]) / "checkpoint").exists():
                st.button(t("finetune.resume"), key=K(f"resume.{run['name']}"), on_click=resume, args=(run,))

    done = [(r["name"], r["result"]) for r in runs if r["result"] is not None]
    if done:
        st.subheader(t("finetune.h_compare"))
        results.compare(done, slicing)

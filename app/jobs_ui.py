"""A job's live panel: progress bar with step/ETA, optional live metrics, Cancel, then the result."""
from __future__ import annotations

from typing import Callable

import streamlit as st

from app.i18n import t

from core.jobs import CANCELLED, DONE, ERROR, QUEUED, Job, JobRunner, runner as _core_runner


@st.cache_resource
def runner() -> JobRunner:
    """The process-wide job runner, shared by every session."""
    return _core_runner()


def _fmt_eta(job: Job) -> str:
    eta = job.eta
    return "" if eta is None else t("common.job_eta", s=f"{eta:,.0f}")


def job_panel(job_id: int, on_done: Callable[[Job], None], on_running: Callable[[Job], None] | None = None,
              key: str = "job") -> None:
    """Poll ``job_id`` every half second; draw progress and Cancel; call ``on_done(job)`` when it has finished."""
    r = runner()
    job = r.get(job_id)
    if job is None:
        st.warning(t("common.job_gone"))
        return

    def _panel() -> None:
        j = r.get(job_id)
        if j.status == QUEUED:
            st.info(t("common.job_queued", place=r.queue_position(j), resource=j.resource.upper(),
                      limit=r.limits[j.resource]))
        if not j.done:
            st.progress(j.progress, text=t("common.progress", name=j.name, message=j.message, s=f"{j.elapsed:,.0f}")
                        + _fmt_eta(j))
            if on_running is not None:
                on_running(j)
            if st.button(t("common.cancel"), key=f"{key}.cancel.{job_id}"):
                r.cancel(job_id)
                st.rerun()
            return
        if j.status == DONE:
            on_done(j)
        elif j.status == ERROR:
            st.error(t("common.job_failed", name=j.name, error=j.error))
            if j.error_detail:
                with st.expander(t("common.details")):
                    st.code(j.error_detail)
        elif j.status == CANCELLED:
            st.warning(t("common.job_cancelled", name=j.name, s=f"{j.elapsed:,.0f}"))
            if on_running is not None:
                on_running(j)

    if job.done:
        _panel()
    else:
        st.fragment(run_every=0.5)(_watch(job_id, _panel))()


def _watch(job_id: int, panel: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        panel()
        j = runner().get(job_id)
        if j is not None and j.done:
            st.rerun()  # redraw the whole page once, without the polling fragment
    return run

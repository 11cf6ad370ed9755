"""A job's live panel (progress bar with step/ETA, optional live metrics, Cancel, then the result) and the "job
section" every page with a background job draws: submit (``submit_job``, or ``start_job`` that shows a refusal),
then the panel of the job made from what the form asks now, or why none shows (``job_section``)."""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import streamlit as st

from app.kit import live, state
from app.kit.i18n import explain, t
from app.kit.render import forget_jobs, job_for, remember_job, stale_note
from core.models import hosted
from core.runtime.backend import runner as _core_runner
from core.runtime.jobs import CANCELLED, DONE, ERROR, QUEUED, Job, JobRunner, NotYourJobError, lane
from core.runtime.run_folders import SessionSweeper
from core.runtime.server_stats import start_writer

SWEEP_EVERY_S = 5.0  # how often closed tabs are looked for (their queued jobs are cancelled after two misses)


def _tab_open(session_id: str) -> bool:
    """Whether the browser tab of a Streamlit session is still connected; True where there is no server to ask
    (AppTest): a session is never taken for closed without a server saying so."""
    from streamlit.runtime import Runtime

    return not Runtime.exists() or Runtime.instance().is_active_session(session_id)


@st.cache_resource
def _shared() -> tuple[JobRunner, SessionSweeper]:
    r = _core_runner()
    sweeper = SessionSweeper(r, _tab_open)
    threading.Thread(target=sweeper.run_forever, args=(SWEEP_EVERY_S,), daemon=True, name="encoderlab-sweeper").start()
    start_writer(r, sweeper)  # ENCODERLAB_STATS_FILE: the tables' sizes for an operator (and bench/soak.py)
    return r, sweeper


def runner() -> JobRunner:
    """The process-wide job runner, shared by every session; remembers which browser tab this session is, so
    that closing it cancels the session's queued jobs."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    r, sweeper = _shared()
    ctx = get_script_run_ctx()
    if ctx is not None:
        sweeper.remember(state.session_id(), ctx.session_id)
    return r


def session_job(job_id: int) -> Job | None:
    """This session's job ``job_id``; None once it is gone, and for another session's (job ids count up: an id
    never reaches another session's job, core.runtime.jobs.JobRunner.get)."""
    return runner().get(job_id, owner=state.session_id())


def cancel_session_job(job_id: int) -> None:
    """Cancel this session's job ``job_id``. Raises NotYourJobError (a LookupError) for another session's job or
    one that is gone."""
    runner().cancel(job_id, owner=state.session_id())


LIVE_POINTS = 400  # per-step metrics a live view draws at most while it polls
# Progress every two seconds: the panel stays live, and redrawing it (in this process and in the browser) costs CPU
# the job itself needs on a small machine: at once a second a watched bert-mini fine-tune ran at 0.76x its unwatched
# speed on 2 cores (tests/e2e/test_concurrency_e2e.py, target >= 0.8x).
POLL_S = 2.0
# The live curves on their own, slower clock: Chromium spends about 0.4 s of CPU redrawing a two-panel plotly
# figure (measured on this 2-core machine: the watching browser used 0.34 CPU-s per second with the curves redrawn
# every 2 s, 0.12 without them), and a CPU job runs at nice 19, so every redraw is taken from the run.
LIVE_S = 6.0


def _thinned(job: Job) -> Job:
    """The job with its per-step metrics thinned to about LIVE_POINTS (the first, every k-th, the last), other
    entries (evaluations) all kept: the live curves look the same, and redrawing them twice a second no longer
    grows with the run (a long run's full curves took the server's time from everyone, the run included)."""
    metrics = list(job.metrics)
    if len(metrics) <= LIVE_POINTS:
        return job
    shape = Counter(frozenset(m) for m in metrics).most_common(1)[0][0]  # the per-step entries' keys
    steps = [i for i, m in enumerate(metrics) if frozenset(m) == shape]
    k = -(-len(steps) // LIVE_POINTS)
    keep = set(steps[::k]) | {steps[-1]} | {i for i, m in enumerate(metrics) if frozenset(m) != shape}
    return dataclasses.replace(job, metrics=[m for i, m in enumerate(metrics) if i in keep])


def _fmt_eta(job: Job) -> str:
    eta = job.eta
    return "" if eta is None else t("common.job_eta", seconds=f"{eta:,.0f}")


def job_panel(
    job_id: int, on_done: Callable[[Job], None], on_running: Callable[[Job], None] | None = None, key: str = "job"
) -> None:
    """Poll ``job_id`` every POLL_S seconds; draw progress and Cancel; call ``on_done(job)`` when it has finished."""
    r = runner()
    job = session_job(job_id)
    if job is None:
        st.warning(t("common.job_gone"))
        return

    def _panel() -> None:
        j = session_job(job_id)
        if j is None:  # gone since the panel was drawn
            st.warning(t("common.job_gone"))
            return
        if j.status == QUEUED and j.interactive:
            st.info(t("common.job_queued_interactive", place=r.queue_position(j), limit=r.limits[lane(j)]))
        elif j.status == QUEUED:
            st.info(
                t(
                    "common.job_queued",
                    place=r.queue_position(j),
                    resource=j.resource.upper(),
                    limit=r.limits[j.resource],
                )
            )
        if not j.done:
            st.progress(
                j.progress,
                text=t("common.progress", name=j.name, message=explain(j.message), seconds=f"{j.elapsed:,.0f}")
                + _fmt_eta(j),
            )
            if st.button(t("common.cancel"), key=f"{key}.cancel.{job_id}"):
                try:
                    cancel_session_job(job_id)
                except NotYourJobError as e:  # gone since the button was drawn
                    st.warning(explain(e))
                    return
                st.rerun()
            return
        if j.status == DONE:
            on_done(j)
        elif j.status == ERROR:
            st.error(t("common.job_failed", name=j.name, error=explain(j.error or "")))
            if j.error_detail and not hosted.enabled():  # a traceback names server paths: not on the hosted demo
                with st.expander(t("common.details")):
                    st.code(j.error_detail)
        elif j.status == CANCELLED:
            st.warning(t("common.job_cancelled", name=j.name, seconds=f"{j.elapsed:,.0f}"))
            if on_running is not None:
                on_running(j)

    def _curves() -> None:
        j = session_job(job_id)
        if j is not None and not j.done:
            on_running(_thinned(j))

    if job.done:
        _panel()
    else:
        live.every(POLL_S)(_watch(job_id, _panel))()
        if on_running is not None:
            live.every(LIVE_S)(_curves)()


def _watch(job_id: int, panel: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        panel()
        j = session_job(job_id)
        if j is not None and j.done:
            st.rerun()  # redraw the whole page once, without the polling fragment

    return run


def submit_job(
    page: str,
    name: str,
    fn: Callable,
    *,
    device: str | None = None,
    resource: str | None = "cpu",
    jobs_key: str | None = None,
    asked: Any = None,
    interactive: bool = False,
) -> Job:
    """Queue ``fn`` as this session's job, listed under ``page`` (state.job_ids); ``device`` ("auto", "cpu",
    "cuda") decides the resource (core.runtime.jobs.resource_for), else ``resource``. With ``jobs_key`` the job is
    remembered as made from ``asked`` (``job_section`` shows it while the form asks the same). ``interactive``: a
    short analysis the person waits for, run in its own lane, never behind training (core.runtime.jobs). Raises
    ValueError (QuotaError: too many jobs for this session)."""
    job = runner().submit(name, fn, resource=resource, owner=state.session_id(), device=device, interactive=interactive)
    state.job_ids(page).append(job.id)
    if jobs_key is not None:
        remember_job(jobs_key, job.id, asked)
    return job


def start_job(jobs_key: str, submit: Callable[[], Job]) -> Job | None:
    """Run ``submit()`` (build the config, then ``submit_job``); a ValueError (a bad setting, QuotaError) is shown
    instead, and no earlier job's result stays under the form. Returns the job, or None."""
    try:
        return submit()
    except ValueError as e:
        forget_jobs(jobs_key)
        st.error(explain(e))
        return None


def job_section(
    jobs_key: str, asked: Any, on_done: Callable[[Job], None], key: str, on_running: Callable[[Job], None] | None = None
) -> bool:
    """The panel of the latest job made from ``asked`` (then ``on_done(job)``); else why no result shows, when the
    session has results of other settings (render.stale_note). Returns whether a job's panel was drawn."""
    jid = job_for(jobs_key, asked)
    if jid is None:
        stale_note(jobs_key)
        return False
    job_panel(jid, on_done, on_running, key=key)
    return True

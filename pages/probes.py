"""Layer probes: a linear probe per task and depth, trained in a background job, plotted against depth with the
majority baselines and the word task's selectivity. Logic in core/represent/probes.py, drawing in app/views/represent/probes.py."""

import hashlib
import time

import streamlit as st

from app.kit import urlstate
from app.kit.flow import end_page
from app.kit.i18n import explain, t
from app.kit.jobs_panel import job_panel, session_job, submit_job
from app.kit.loaders import model_or_error
from app.kit.render import current_result, job_for, stale_note
from app.kit.state import session_id
from app.kit.uploads import upload_box
from app.views.represent.probes import K, show_result, task_name
from core.base.messages import carry
from core.represent.probe_tasks import TASKS, ProbeError, corpus_from_text, corpus_from_upload
from core.represent.probes import (
    DEFAULT_PER_TASK,
    MIN_PER_TASK,
    TIMING_SENTENCES,
    ProbeConfig,
    build_tasks,
    estimate,
    max_per_task,
    model_key,
    probe_job,
    saved_result,
    time_probe_parts,
)
from core.represent.token_vectors import num_depths
from core.runtime.jobs import DONE

SOURCES = ("bundled", "paste", "upload")
TIMINGS = K(
    "estimate.timings"
)  # model spec -> core.represent.probes.ProbeTiming: timed once per model, kept for the session
TIMINGS_KEEP = 8  # at most this many per session; the oldest goes first
SCALES = K("estimate.scales")  # model spec -> a finished run's wall time / its estimate (this session's last run)
PENDING = K("estimate.pending")  # job id -> (model spec, estimated seconds) of a run not yet seen finished


def calibrate() -> None:
    """A finished run's wall time, queued to done (the job's start, its copy of the model and building the tasks
    included), against the seconds estimated for it: later estimates on that model are scaled by it."""
    pending = st.session_state.setdefault(PENDING, {})
    for jid, (spec, est) in list(pending.items()):
        job = session_job(jid)
        if job is not None and not job.done:
            continue
        pending.pop(jid)
        if job is not None and job.status == DONE and job.finished is not None and est > 0:
            st.session_state.setdefault(SCALES, {})[spec] = max(1.0, (job.finished - job.submitted) / est)


def show_estimate(where, lm, tasks, per_task) -> float | None:
    """Under Run: about how many sentences and probe fits these settings make and how long that takes, from a
    forward and a fit timed on this model (core.represent.probes.time_probe_parts, once per model in this session).
    Before a run on this model it is a floor ("or more": the job's start, its model load and building the tasks are
    not timed); after one, it is scaled by what that run took against its estimate ("about"). Returns the unscaled
    seconds (None: no estimate)."""
    try:
        cfg = ProbeConfig(tasks=tuple(tasks), per_task=int(per_task))
    except ProbeError:  # no task picked, say: Run reports it
        return None
    cache = st.session_state.setdefault(TIMINGS, {})
    if lm.spec not in cache:
        cache[lm.spec] = time_probe_parts(lm)
        while len(cache) > TIMINGS_KEEP:
            cache.pop(next(iter(cache)))
    est = estimate(cfg, num_depths(lm), cache[lm.spec])
    scale = st.session_state.get(SCALES, {}).get(lm.spec)
    secs = est.seconds * (scale or 1.0)
    took = (
        t("probes.estimate_s", seconds=f"{secs:.0f}")
        if secs < 90
        else t("probes.estimate_min", minutes=f"{secs / 60:.0f}")
    )
    numbers = dict(n=f"{est.sentences:,}", fits=f"{est.fits:,}", time=took)
    if scale is None:
        where.caption(t("probes.estimate", **numbers), help=t("probes.estimate_help", rows=TIMING_SENTENCES))
    else:
        where.caption(t("probes.estimate_about", **numbers), help=t("probes.estimate_about_help", ratio=f"{scale:.1f}"))
    return est.seconds


st.title(t("probes.title"))
st.caption(t("probes.intro"))
lm = model_or_error(task="base")
if lm is None:
    end_page()

# No form: the estimate under Run follows the tasks and sentences per task as they change (a form would send them
# only on Run). Nothing heavy runs before Run: a change reruns the page, whose timing is kept per model.
st.session_state.setdefault(K("tasks"), list(TASKS))
urlstate.relabel((K("source"), K("tasks")))  # their labels are in the session's language
with st.container(border=True, key=K("form")):
    source = st.radio(
        t("probes.corpus"),
        SOURCES,
        key=K("source"),
        horizontal=True,
        help=t("probes.corpus_help"),
        format_func=lambda s: t(f"probes.corpus_opt.{s}"),
    )
    text = st.text_area(t("probes.paste"), key=K("text"), height=100)
    upload = upload_box(t("probes.upload"), K("upload"), kinds=["txt"], expect=t("uploads.expect.sentences"))
    tasks = st.multiselect(t("probes.tasks"), TASKS, key=K("tasks"), format_func=task_name)
    per_task = st.number_input(
        t("probes.per_task"),
        MIN_PER_TASK,
        max_per_task(),
        DEFAULT_PER_TASK,
        step=100,
        key=K("per_task"),
        help=t("probes.per_task_help"),
    )
    go = st.button(t("probes.run"), type="primary", key=K("run"))
    estimate_slot = st.empty()  # under the button: filled below, once the form is drawn

calibrate()
est_seconds = show_estimate(estimate_slot, lm, tasks, per_task)
raw = text.encode("utf-8") if source == "paste" else upload.data if source == "upload" and upload else b""
want = (lm.spec, model_key(lm), source, hashlib.sha1(raw).hexdigest(), tuple(tasks), int(per_task))
if go and not (source == "upload" and upload and not upload.ok):  # a refused file: its reason is under the box
    st.session_state.pop(K("error"), None)
    try:
        if source == "upload" and upload is None:
            raise ValueError(t("probes.no_upload"))
        corpus = (
            None
            if source == "bundled"
            else (corpus_from_text(text) if source == "paste" else corpus_from_upload(raw, upload.name))
        )
        cfg = ProbeConfig(tasks=tuple(tasks), per_task=int(per_task), corpus=corpus, owner=session_id())
        if corpus is not None:
            build_tasks(cfg)  # a corpus too small for a task says so here, not after a job
        found = saved_result(lm, cfg)
        if found is not None:  # this model on these inputs was probed before: no job
            st.session_state[K("result")], st.session_state[K("result.made_from")] = found, want
        else:
            job = submit_job(
                "probes",
                t("probes.job_name", id=lm.spec.checkpoint),
                probe_job(lm.spec, cfg),
                device=lm.spec.device,
                jobs_key=K("jobs"),
                asked=want,
            )
            if est_seconds and corpus is None:  # the bundled corpus: as estimated (a small corpus gives fewer)
                st.session_state.setdefault(PENDING, {})[job.id] = (lm.spec, est_seconds)
    except ValueError as e:  # ProbeError (bad corpus, settings), QuotaError (too many jobs)
        st.session_state[K("error")] = (want, carry(e))

error = st.session_state.get(K("error"), (None, ""))
res = current_result(K("result"), want)
jid = job_for(K("jobs"), want)
if error[0] == want:
    st.error(explain(error[1]))
elif res is not None:
    st.caption(t("probes.cached", seconds_ago=f"{time.time() - res.created:,.0f}"))
    show_result(res)
elif jid is not None:
    job_panel(jid, lambda j: show_result(j.result), key=K("job"))
else:
    stale_note(K("result"))

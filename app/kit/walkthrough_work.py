"""What the walkthrough's steps ask the page for: the models they read and the jobs they start (#46 §2: views draw,
the page loads and starts work).

A step's ``render`` is a generator, its flow: it draws, and where it needs a model or starts a job it yields one of
the requests below and carries on with the answer (``lm = yield Load(spec, "mlm")``). The page drives the flow
(``drive``), fulfilling each request here at the point where the step asked, so the spinners, warnings and banners
appear where they always did. Views import the request types, ``Flow`` and ``find_job`` (a job's state, to draw);
the loading and the job submitting are this module's."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

import streamlit as st

from app.kit import state
from app.kit.i18n import explain, t
from app.kit.jobs_panel import cancel_session_job, runner, session_job, start_job, submit_job
from app.kit.loaders import get_model, model_or_error
from core.models.spec import LoadedModel, ModelSpec
from core.registry import ModelLoadError
from core.runtime.jobs import Job
from core.train.finetune import job_fn, job_resource, runs_root
from core.walkthrough.checks import distillation_job, lr_pair_plan

PAGE = "walkthrough"  # the page the jobs are listed under (state.job_ids)


@dataclass(frozen=True)
class SidebarModel:
    """The sidebar's model for ``task``, with its source banner; answered with None after the page showed why it
    cannot load (app.kit.loaders.model_or_error)."""

    task: str


@dataclass(frozen=True)
class Load:
    """``spec``'s model for ``task``; answered with None after a warning that says what is missing and how to get
    it."""

    spec: ModelSpec
    task: str
    attentions: bool = False


@dataclass(frozen=True)
class MeasureDistillation:
    """Step 5: start the student-against-teacher measurement (core.walkthrough.checks.distillation_job) as this
    session's job, remembered under ``jobs_key`` as made from ``asked`` (seq, batch, reps, sentences, device); a
    refusal is shown instead. Answered with the job, or None."""

    jobs_key: str
    asked: tuple[int, int, int, int, str]


@dataclass(frozen=True)
class LrPair:
    """Step 6: start the two short fine-tunes of one model (core.walkthrough.checks.lr_pair_plan). Answered with the
    runs by kind ("good", "high"): job id, learning rate, steps, family, checkpoint, and result and error (None
    until the flow collects them). Raises ValueError (a bad setting, or QuotaError on either run: then neither
    runs)."""

    family: str
    checkpoint: str
    lr: float
    steps: int
    device: str


Ask = SidebarModel | Load | MeasureDistillation | LrPair
R = TypeVar("R")
Flow = Generator[Ask, Any, R]  # a step's flow, or a part of one, returning R (``yield from`` it)


def fulfil(ask: Ask) -> Any:
    """Load what ``ask`` asks for, or start its job; the answer the step's flow carries on with."""
    if isinstance(ask, SidebarModel):
        return model_or_error(ask.task)
    if isinstance(ask, Load):
        return load(ask.spec, ask.task, ask.attentions)
    if isinstance(ask, MeasureDistillation):
        return measure_distillation(ask)
    return start_lr_pair(ask)


def drive(flow: Flow[Any], answer: Callable[[Ask], Any] = fulfil) -> None:
    """Run a step's flow to its end, answering each request where it was made (``answer``: ``fulfil``, the page's).
    An exception in answering one is raised in the flow at its ``yield``, as if the step had made the call itself."""
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            ask = flow.send(reply) if error is None else flow.throw(error)
        except StopIteration:
            return
        reply, error = None, None
        try:
            reply = answer(ask)
        except Exception as e:  # raised in the flow, which handles it or lets it through
            error = e


def load(spec: ModelSpec, task: str, attentions: bool = False) -> LoadedModel | None:
    """A cached model, or None after a warning that says what is missing and how to get it."""
    try:
        with st.spinner(t("common.loading", id=spec.checkpoint)):
            return get_model(spec, task, attentions)
    except ModelLoadError as e:
        st.warning(t("walkthrough.missing_model", id=spec.checkpoint, error=explain(e)))
        return None


def measure_distillation(ask: MeasureDistillation) -> Job | None:
    """A background job, as on the Speed page: a room pressing Measure at once waits its turn in the job queue
    instead of timing its runs against each other in the script threads."""
    return start_job(
        ask.jobs_key,
        lambda: submit_job(
            PAGE,
            t("walkthrough.s5.job_name"),
            distillation_job(*ask.asked),
            device=ask.asked[-1],
            jobs_key=ask.jobs_key,
            asked=ask.asked,
        ),
    )


def start_lr_pair(ask: LrPair) -> dict[str, dict]:
    plan = lr_pair_plan(ask.family, ask.checkpoint, ask.lr, ask.steps, ask.device)
    runs: dict[str, dict] = {}
    stamp = time.strftime("%H%M%S")
    r = runner()
    for kind, cfg in plan.runs:
        out = runs_root(state.session_id()) / f"walkthrough-{kind}-{ask.family}-{stamp}"
        fn = job_fn(cfg, plan.data, out)  # two runs at once are safe: model loads take core.models.loading.BUILD_LOCK
        try:
            job = r.submit(
                t(f"walkthrough.s6.job.{kind}", lr=f"{cfg.lr:.0e}"),
                fn,
                resource=job_resource(cfg),
                owner=state.session_id(),
            )
        except ValueError:  # QuotaError on the second run: the pair is the experiment, so drop the first too
            for run in runs.values():
                cancel_session_job(run["job_id"])
            raise
        runs[kind] = dict(
            job_id=job.id,
            lr=cfg.lr,
            steps=ask.steps,
            family=ask.family,
            checkpoint=ask.checkpoint,
            result=None,
            error=None,
        )
    return runs


def find_job(job_id: int) -> Job | None:
    """This session's job ``job_id``, to read its state (None once the runner forgot it)."""
    return session_job(job_id)

"""What the Fine-tune page loads and starts, so that its views (app/views/train) only draw: the data sets its pickers
name, the tokenizer its split table shows, a finished run's classifier, and its jobs (runs, resumed runs, a remedy's
restart, the out-of-memory remedies' measurement)."""

from __future__ import annotations

import time

import streamlit as st

from app.kit import state
from app.kit.i18n import explain, t
from app.kit.jobs_panel import runner, session_job, start_job, submit_job
from app.kit.loaders import bundled_data, finetuned, get_model, glue_data, token_sample
from app.kit.render import as_text
from core.data.datasets_local import DataError, LabelledData
from core.data.token_data import TokenData, words_tokenizer
from core.models.devices import device_for_trained
from core.models.spec import ModelSpec
from core.predict.classify import FinetunedModel
from core.registry import ModelLoadError
from core.runtime.jobs import Job
from core.train import remedies
from core.train.finetune import FinetuneResult, job_fn, job_resource, runs_root
from core.train.finetune_config import FinetuneConfig, apply_remedy


# ---------------------------------------------------------------------------------------------- loading
def labelled_data(bundled: str | None, glue: str | None) -> LabelledData | None:
    """The bundled labelled set keyed ``bundled``, or the GLUE task ``glue`` (downloaded under a spinner), through the
    cached loaders; None when neither is named, or after saying why it cannot be had."""
    try:
        if bundled is not None:
            return bundled_data(bundled)
        if glue is not None:
            with st.spinner(t("finetune.glue_downloading")):
                return glue_data(glue)
    except DataError as e:
        st.error(explain(e))
    return None


def token_sample_data() -> TokenData | None:
    """The bundled token-classification sample; None after saying why it cannot be read."""
    try:
        return token_sample()
    except DataError as e:
        st.error(as_text(explain(e)))  # a data file's message may quote its own line: shown as text
        return None


def split_tokenizer(spec: ModelSpec | None):
    """The sidebar model's tokenizer, able to take pre-split words (the token task's split table); None without a
    model, or after saying why it cannot load."""
    if spec is None:
        return None
    try:
        return words_tokenizer(get_model(spec, "base").tokenizer)
    except (ModelLoadError, ValueError) as e:
        st.error(explain(e))
        return None


def trained_model(result: FinetuneResult) -> FinetunedModel:
    """A finished run's classifier, cached, on the device policy's choice for where it was trained. Raises
    ModelLoadError (the try-it boxes say it)."""
    return finetuned(result.model_dir, device_for_trained(result.device))


# ---------------------------------------------------------------------------------------------- jobs
def jobs_of(runs: list[dict]) -> dict[int, Job | None]:
    """Each run's job as the runner has it now (None: the runner no longer knows it), by job id."""
    return {run["job_id"]: session_job(run["job_id"]) for run in runs}


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


def resume(run: dict) -> None:
    """Continue a cancelled run from its checkpoint, as a new job of the same run."""
    job = runner().submit(
        t("finetune.job_name_resumed", name=run["name"]),
        job_fn(run["cfg"], run["data"], run["out"], resume=True),
        resource=job_resource(run["cfg"]),
        owner=state.session_id(),
    )
    run["job_id"] = job.id


def restart(runs: list[dict], run: dict, remedy: str) -> None:
    """Start ``run`` again, on the same data, with one remedy of core.train.finetune_config.REMEDIES applied."""
    submit(runs, apply_remedy(run["cfg"], remedy), run["data"])


def start_remedies(jobs_key: str, cfg: FinetuneConfig, data, steps: int, asked) -> None:
    """Measure every remedy for ``cfg`` on ``data`` (``steps`` steps each) in a job remembered under ``jobs_key`` as
    made from ``asked``; a refusal (too many jobs) is said in its place."""
    start_job(
        jobs_key,
        lambda: submit_job(
            "finetune",
            t("remedies.job_name"),
            remedies.job(cfg, data, steps),
            device=cfg.device,
            jobs_key=jobs_key,
            asked=asked,
        ),
    )

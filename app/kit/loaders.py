"""Cached loading: models (one copy per process, shared by every session, never mutated in place), fine-tuned
runs' models and the data sets the pages read. Views call these; they never load anything themselves."""

from __future__ import annotations

import threading
from pathlib import Path

import streamlit as st

from app.kit import state
from app.kit.i18n import explain, t
from app.kit.model_choice import awaiting_checkpoint, note_load
from app.kit.render import as_text, runs_on_label, source_name
from core.base.messages import carry, excerpt
from core.base.paths import zoo_dir
from core.data.datasets_local import LabelledData, load_bundled, load_glue
from core.data.token_data import TokenData, load_bundled_tokens
from core.models.devices import resolve_device
from core.models.downloads import DownloadError, download
from core.models.loading import LoadedModel, ModelSpec, Source, load, resolve
from core.predict.classify import FinetunedModel, load_finetuned
from core.predict.fill_mask import FillMaskError, check_mlm
from core.registry import ModelLoadError, bundled_id
from core.runtime.backend import prepare_serving

POLL_S = 0.25  # how often the download's progress bar is redrawn


@st.cache_resource(max_entries=8, show_spinner=False)
def _cached(
    family: str, checkpoint: str, device: str, task: str, attentions: bool, quant: str = "", zoo: str = ""
) -> LoadedModel:
    """``zoo``: only part of the key. A bundled id (encoderlab/NAME) names a folder of the zoo in use
    (ENCODERLAB_ZOO): the same id in another zoo is another model (the tests' tiny zoo beside the real minis in one
    process got the other zoo's cached model)."""
    lm = load(ModelSpec(family, checkpoint, device, quant), task=task, attentions=attentions)
    prepare_serving(lm)  # where predictions run elsewhere (Ray), that tier starts getting ready now
    return lm


def get_model(spec: ModelSpec, task: str = "base", attentions: bool = False) -> LoadedModel:
    """Load through the process-wide cache. Raises ModelLoadError with a message for the page."""
    # Keyed on the device it resolves to: "auto" and "cuda" on a GPU host are one model, not two copies on the GPU.
    zoo = str(zoo_dir()) if spec.checkpoint.startswith("encoderlab/") else ""
    return _cached(
        spec.family, spec.checkpoint, resolve_device(spec.device).torch_device, task, attentions, spec.quant, zoo
    )  # an int8 copy is its own entry, beside the fp32 one


def model_or_error(task: str = "base", attentions: bool = False, spec: ModelSpec | None = None) -> LoadedModel | None:
    """The sidebar's model for ``task``, with a source banner; or None after showing why it cannot load."""
    spec = spec or state.current_spec()
    if spec is None:
        if awaiting_checkpoint():  # the sidebar asks for a folder or Hub id under its box: point there, once
            st.info(t("sidebar.custom_pointer"), icon=":material/arrow_back:")
        else:
            st.error(explain(st.session_state.get(state.SPEC_ERROR) or t("common.pick_model")))
        return None
    try:
        if resolve(spec.checkpoint).source == Source.DOWNLOAD:
            download_with_progress(spec.checkpoint)
        with st.spinner(t("common.loading", id=excerpt(spec.checkpoint))):
            lm = get_model(spec, task, attentions)
    except ModelLoadError as e:
        if spec == state.current_spec():
            note_load(spec, carry(e))  # the sidebar shows the failure, not a weights source
        st.error(explain(e))
        return None
    if spec == state.current_spec() and st.session_state.get("sidebar.load_failed"):
        note_load(spec, None)
    source_banner(lm)
    if lm.path and not Path(lm.path).is_dir():  # deleted or moved since it loaded: the cached copy still answers
        st.warning(t("common.model_folder_gone", id=as_text(excerpt(spec.checkpoint))))
    return lm


def mlm_model_or_error() -> LoadedModel | None:
    """The sidebar's model with its MLM head (model_or_error), or None after saying why: it cannot load, or the
    checkpoint was saved without a trained MLM head (core.predict.fill_mask.check_mlm)."""
    lm = model_or_error(task="mlm")
    if lm is None:
        return None
    try:
        check_mlm(lm)
    except FillMaskError as e:
        st.error(explain(e))
        return None
    return lm


def proposer_or_error(lm: LoadedModel, target: str, proposer: str) -> tuple[bool, LoadedModel | None]:
    """The masked LM that proposes a counterfactual search's words and scores their fluency
    (core.inspect.counterfactual): None where the model is one (a masked word, a sentence pair); the bundled MLM of a
    classifier's family otherwise. When that family has none: HotFlip goes on without fluency (None), the MLM
    proposer cannot, and (False, None) comes after saying why."""
    if target != "class":
        return True, None
    try:
        spec = ModelSpec(lm.spec.family, bundled_id(lm.spec.family), lm.spec.device)
        mlm = get_model(spec, task="mlm")
        check_mlm(mlm)  # a checkpoint saved without a trained MLM head would propose random words
        return True, mlm
    except (ModelLoadError, FillMaskError) as e:
        if proposer != "mlm":
            return True, None
        st.error(t("counterfactual.no_family_mlm", why=explain(e)))
        return False, None


def source_banner(lm: LoadedModel) -> None:
    st.caption(
        t(
            "common.source_banner",
            id=lm.spec.checkpoint,
            family=lm.family.label,
            source=source_name(lm.source),
            device=runs_on_label(lm),
        )
    )  # "cpu, int8" for the int8 copy


def download_with_progress(checkpoint: str) -> None:
    """Download an official checkpoint into the HF cache, drawing a progress bar (size, speed, time left).

    The download runs on its own thread (huggingface_hub reports progress from its download threads, which
    cannot draw in this session); this script run redraws the bar from what it reported. If the user leaves
    the page, the download goes on and the next visit finds the files (or resumes them). Raises ModelLoadError
    with core.models.downloads' message when it cannot finish.
    """
    box: dict = {"progress": None, "error": None, "folder": None}

    def work() -> None:
        try:
            box["folder"] = download(checkpoint, progress=lambda p: box.__setitem__("progress", p))
        except DownloadError as e:
            box["error"] = carry(e)

    th = threading.Thread(target=work, daemon=True, name=f"download {checkpoint}")
    th.start()
    bar = st.progress(0.0, text=t("downloads.start", id=checkpoint))
    while th.is_alive():
        th.join(POLL_S)
        p = box["progress"]
        if p is not None and p.total_bytes:
            bar.progress(p.fraction, text=t("downloads.progress", id=checkpoint, detail=explain(p.describe())))
    if box["error"]:
        bar.empty()
        raise ModelLoadError(box["error"])
    p = box["progress"]
    bar.progress(1.0, text=t("downloads.done", id=checkpoint, mb=f"{(p.total_bytes if p else 0) / 1e6:,.1f}"))


@st.cache_resource(max_entries=4, show_spinner=False)
def finetuned(model_dir: str, device: str) -> FinetunedModel:
    """A fine-tuned run's model (core.predict.classify.load_finetuned), through the process-wide cache."""
    return load_finetuned(model_dir, device)


@st.cache_data(show_spinner=False)
def bundled_data(key: str) -> LabelledData:
    """A bundled labelled data set (core.data.datasets_local.load_bundled)."""
    return load_bundled(key)


@st.cache_data(show_spinner=False)
def glue_data(task: str) -> LabelledData:
    """A GLUE task from the Hub (core.data.datasets_local.load_glue); the caller draws the spinner."""
    return load_glue(task)


@st.cache_data(show_spinner=False)
def token_sample() -> TokenData:
    """The bundled token-classification sample (core.data.token_data.load_bundled_tokens)."""
    return load_bundled_tokens()

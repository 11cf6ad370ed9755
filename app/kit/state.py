"""Session-state keys, initialised in one place and namespaced by page ("page.name")."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import streamlit as st

from app.kit.i18n import DEFAULT_LANG, LANG_KEY, LANGS
from core.models.loading import ModelSpec, Source, resolve
from core.registry import FAMILIES, bundled_families, bundled_id

# Sidebar (shared by every page)
FAMILY = "sidebar.family"
CHECKPOINT = "sidebar.checkpoint"
CUSTOM = "sidebar.custom"
DEVICE = "sidebar.device"
SPEC = "sidebar.spec"
SPEC_ERROR = "sidebar.spec_error"
# Models this session made (fine-tuned or pretrained): label -> SessionModel
SESSION_MODELS = "session.models"
SESSION_ID = "session.id"
# Jobs this session started, by page: "jobs.<page>" -> list of job ids
JOBS_PREFIX = "jobs."


@dataclass(frozen=True)
class SessionModel:
    label: str
    family: str
    path: str
    kind: str  # "fine-tuned" or "pretrained"


DEFAULTS = {
    DEVICE: "auto",
    CUSTOM: "",
    SESSION_MODELS: {},
    SPEC: None,
    SPEC_ERROR: None,
}


def init() -> None:
    """Create every shared key once per session."""
    for k, v in DEFAULTS.items():
        if k not in st.session_state:
            st.session_state[k] = v.copy() if isinstance(v, dict) else v
    if FAMILY not in st.session_state:
        st.session_state[FAMILY] = default_family()
    if SESSION_ID not in st.session_state:
        st.session_state[SESSION_ID] = uuid.uuid4().hex[:12]


def init_language() -> None:
    """The UI language must be known before the navigation is drawn: take it from the link when it has one
    (the sidebar's URL binding runs later in the run and keeps it in step)."""
    if LANG_KEY not in st.session_state:
        url_lang = st.query_params.get("lang")
        st.session_state[LANG_KEY] = url_lang if url_lang in LANGS else DEFAULT_LANG


def default_family() -> str:
    """The first registered family whose bundled model is present here (else the first family)."""
    for fam in bundled_families():
        if resolve(bundled_id(fam.key)).source != Source.UNAVAILABLE:
            return fam.key
    return next(iter(FAMILIES))


def key(page: str, name: str) -> str:
    """A page's own key: state.key("fill_mask", "text") -> "fill_mask.text"."""
    return f"{page}.{name}"


def session_id() -> str:
    init()
    return st.session_state[SESSION_ID]


def current_spec() -> ModelSpec | None:
    """The model picked in the sidebar, or None when the pick is invalid (the sidebar shows why)."""
    return st.session_state.get(SPEC)


def register_session_model(label: str, family: str, path: str, kind: str) -> None:
    """Make a model this session produced selectable in the sidebar picker (this session only)."""
    init()
    st.session_state[SESSION_MODELS][label] = SessionModel(label, family, path, kind)


def session_models(family: str | None = None) -> list[SessionModel]:
    init()
    return [m for m in st.session_state[SESSION_MODELS].values() if family is None or m.family == family]


def job_ids(page: str) -> list[int]:
    return st.session_state.setdefault(JOBS_PREFIX + page, [])

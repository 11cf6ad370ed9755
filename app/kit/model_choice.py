"""What the sidebar's model picker shares with the pages (below the sidebar, so pages and app.kit read it without
importing app.sidebar): the checkpoints it lists, picking one from a page, whether it still waits for a custom id,
and a page's failed load shown where the sidebar shows the weights' source."""

from __future__ import annotations

import threading

import streamlit as st

from app.kit import state
from app.kit.i18n import explain, t
from app.kit.render import as_text
from core.models.downloads import Source
from core.models.loading import ModelSpec, resolve
from core.registry import bundled_id, family

CUSTOM_OPTION = "custom"
AWAITING = "sidebar.awaiting_checkpoint"  # True while custom is picked and its box is still empty
LOAD_FAILED = "sidebar.load_failed"  # ModelSpec -> why loading it failed (this session), shown instead of a source
_SOURCE = threading.local()  # one script run per thread: each session's run keeps its own slot


def known_checkpoints(fam: str) -> list[str]:
    """The family's bundled model, this session's models and the official ids (what the picker lists); the generic
    family has none of its own: a folder or Hub id typed under custom."""
    f = family(fam)
    return [
        *([bundled_id(fam)] if f.bundled else []),
        *(m.path for m in state.session_models(fam)),
        *(c.id for c in f.checkpoints),
    ]


def available(checkpoint: str) -> bool:
    """Whether ``checkpoint`` can be had here: a folder, the zoo, the HF cache, or a download allowed. It asks
    core.models.loading.resolve, which reads the file system and loads nothing, so a view may call it for the lists
    it offers."""
    return resolve(checkpoint).source != Source.UNAVAILABLE


def pick(fam: str, checkpoint: str) -> None:
    """Select ``checkpoint`` in the picker (a widget callback): one it lists, or else through the custom box."""
    st.session_state[state.FAMILY] = fam
    if checkpoint in known_checkpoints(fam):
        st.session_state[state.CHECKPOINT] = checkpoint
    else:  # a folder or Hub id typed in earlier
        st.session_state[state.CHECKPOINT] = CUSTOM_OPTION
        st.session_state[state.CUSTOM] = checkpoint


def awaiting_checkpoint() -> bool:
    """Custom is picked and nothing is typed yet: the sidebar asks for a folder or Hub id under its box, so a page
    shows a short pointer (``sidebar.custom_pointer``) rather than an error of its own."""
    return bool(st.session_state.get(AWAITING))


def source_slot(slot):
    """Remember the sidebar's weights-source placeholder of this run (``note_load`` writes a failure into it)."""
    _SOURCE.slot = slot
    return slot


def note_load(spec: ModelSpec, error: str | None) -> None:
    """A page loaded the sidebar's model (``error`` None) or failed to: the sidebar then shows the failure where it
    showed the source, in this run and in later ones (also on pages that do not load a model)."""
    failed = st.session_state.setdefault(LOAD_FAILED, {})
    slot = getattr(_SOURCE, "slot", None)
    if error is None:
        if failed.pop(spec, None) is not None and slot is not None:
            slot.empty()  # drawn from an earlier run's failure: this run's load worked (a folder put back)
        return
    failed[spec] = error
    if slot is not None:
        slot.error(t("sidebar.load_failed", id=as_text(spec.checkpoint), error=explain(error)))

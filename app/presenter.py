"""Presenter view: large fonts for a projector, configuration widgets folded away, and an optional pinned model.

Pages wrap their option widgets (top-k, thresholds, layer pickers …) in ``with presenter.settings():``. Normally
that is a plain container; in presenter view it is a collapsed expander, so the room sees inputs and results
and the instructor can still open the settings. A pinned model locks the sidebar picker for everyone who opens
the presenter's link.
"""
from __future__ import annotations

import streamlit as st

from app.i18n import t

PRESENT = "ui.present"
PIN = "ui.pin"

# Sizes for a projector at the back of a room: body text, headings and widget labels scale together.
_CSS = """
<style>
html, body, [data-testid="stAppViewContainer"] { font-size: 22px; }
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li,
[data-testid="stCaptionContainer"], label, input, textarea, button { font-size: 1.25rem !important; }
h1 { font-size: 3.2rem !important; } h2 { font-size: 2.4rem !important; } h3 { font-size: 1.9rem !important; }
[data-testid="stMetricValue"] { font-size: 3rem !important; }
</style>
"""


def is_on() -> bool:
    return bool(st.session_state.get(PRESENT, False))


def pinned() -> bool:
    return is_on() and bool(st.session_state.get(PIN, False))


def apply_style() -> None:
    """Large fonts while the presenter view is on (one small <style> block)."""
    if is_on():
        st.html(_CSS)


def settings():
    """Where a page draws its configuration widgets: folded away in presenter view."""
    if is_on():
        return st.expander(t("presenter.settings"), expanded=False)
    return st.container()

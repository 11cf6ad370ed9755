"""Presenter view: large fonts for a projector, configuration widgets folded away, and an optional pinned model.

Pages wrap their option widgets (top-k, thresholds, layer pickers …) in ``with presenter.settings():``. Normally
that is a plain container; in presenter view it is a collapsed expander, so the room sees inputs and results
and the instructor can still open the settings. A pinned model locks the sidebar picker for everyone who opens
the presenter's link.
"""
from __future__ import annotations

import streamlit as st

from app.kit.i18n import t

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
/* The larger labels need a wider sidebar, and a long page name wraps instead of ending in "…". */
section[data-testid="stSidebar"] { width: 360px !important; min-width: 360px !important; }
[data-testid="stSidebarNav"] a span, [data-testid="stSidebar"] label p { white-space: normal !important;
  overflow: visible !important; text-overflow: clip !important; }
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


CHART_FONT = 20  # px: tick labels and legends readable from the back of a room (plotly's default is 12)
CHART_GROWTH = 1.35  # taller charts for the larger text


def scale(fig):
    """A plotly figure for the screen: in presenter view a copy with projector-size fonts (the charts are the
    content); otherwise the figure itself. The caller's figure (also the report's) is never changed."""
    if not is_on():
        return fig
    import plotly.graph_objects as go

    big = go.Figure(fig)
    # Streamlit's chart theme sets the axes' and legend's own sizes, which win over layout.font: set them too.
    big.update_layout(font_size=CHART_FONT, title_font_size=CHART_FONT + 6, hoverlabel_font_size=CHART_FONT,
                      legend_font_size=CHART_FONT, legend_title_font_size=CHART_FONT)
    big.update_xaxes(tickfont_size=CHART_FONT, title_font_size=CHART_FONT)
    big.update_yaxes(tickfont_size=CHART_FONT, title_font_size=CHART_FONT)
    if big.layout.height:
        big.update_layout(height=int(big.layout.height * CHART_GROWTH))
    return big


def settings():
    """Where a page draws its configuration widgets: folded away in presenter view."""
    if is_on():
        return st.expander(t("presenter.settings"), expanded=False)
    return st.container()

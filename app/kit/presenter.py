"""Presenter view: large fonts for a projector, configuration widgets folded away, and an optional pinned model.

Pages wrap their option widgets (top-k, thresholds, layer pickers …) in ``with presenter.settings():``. Normally
that is a plain container; in presenter view it is a collapsed expander, so the room sees inputs and results
and the instructor can still open the settings. A pinned model locks the sidebar picker for everyone who opens
the presenter's link.
"""

from __future__ import annotations

import streamlit as st

from app.kit.fonts import font_updates
from app.kit.i18n import t
from core.base.segment import is_wide

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
/* A page name is markdown in the link (a nowrap block inside a span that does not shrink): "Sentence pair
   (NSP/SOP)" ran past the sidebar's edge. Let it shrink to the link and wrap there. */
[data-testid="stSidebarNav"] a span { min-width: 0 !important; }
[data-testid="stSidebarNav"] a [data-testid="stMarkdownContainer"], [data-testid="stSidebarNav"] a p {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important; }
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


TITLE_WRAP = 38  # width units (a CJK character is two) per line of a chart title: fits a phone's 358 px chart
LEGEND_WRAP = 30  # width units per line of a trace's name in a horizontal legend
TITLE_PX = 17  # px: a chart title's font where the figure sets none (Streamlit's chart theme)


def _units(text: str) -> int:
    return sum(2 if is_wide(c) else 1 for c in text)


def _unbroken(para: str) -> list[str]:
    """The words of ``para`` at its spaces, a space inside (…) or （…） kept: "第 1 个 [MASK]（token 6）：…" broke
    between "token" and "6"."""
    out: list[str] = []
    depth = 0
    for word in para.split(" "):
        if depth > 0 and out:
            out[-1] += " " + word
        else:
            out.append(word)
        depth = max(0, depth + sum(word.count(c) for c in "(（") - sum(word.count(c) for c in ")）"))
    return out


def wrap_text(text: str, width: int) -> str:
    """``text`` broken into lines (plotly's <br>) of at most ``width`` units at spaces outside parentheses, a CJK
    character counting two; a longer word (or a run of CJK text, which has no spaces) is cut between characters.
    Every character stays, in order; existing <br>s are kept."""
    out: list[str] = []
    for para in text.split("<br>"):
        lines = [""]
        for word in _unbroken(para):
            pieces = [word]
            if _units(word) > width:
                pieces = [""]
                for c in word:
                    if pieces[-1] and _units(pieces[-1] + c) > width:
                        pieces.append("")
                    pieces[-1] += c
            for piece in pieces:
                joined = f"{lines[-1]} {piece}" if lines[-1] else piece
                if not lines[-1] or _units(joined) <= width:
                    lines[-1] = joined
                else:
                    lines.append(piece)
        out += lines
    return "<br>".join(out)


def _narrow_fixes(fig) -> dict:
    """Layout changes that keep a figure's text inside it on a phone-wide screen (the server does not know the
    width, so they hold at any width): a long title wrapped (plotly never wraps one; on a phone it ran off the
    right edge), and a horizontal legend below the plot anchored to the figure's bottom instead of a fixed
    distance under the plot, so that plotly's margins make room for both it and the x tick labels (which a
    narrow plot turns and lengthens: the legend, drawn over them, cut them off)."""
    fixes: dict = {}
    title = fig.layout.title.text
    if title and wrap_text(title, TITLE_WRAP) != title:
        fixes["title_text"] = wrap_text(title, TITLE_WRAP)
    legend = fig.layout.legend
    if legend.orientation == "h" and legend.y is not None and legend.y < 0 and legend.yref != "container":
        fixes.update(legend_yref="container", legend_y=0, legend_yanchor="bottom")
    if fig.layout.xaxis.automargin is None and any(
        isinstance(v, str) for tr in fig.data if getattr(tr, "x", None) is not None for v in tr.x[:1]
    ):
        fixes["xaxis_automargin"] = True  # named categories turn on a narrow plot: the last ran off the right edge
    return fixes


def _legend_names(fig) -> dict[int, str]:
    """Long trace names in a horizontal legend, wrapped (a legend entry never wraps: on a phone it was cut off)."""
    if fig.layout.legend.orientation != "h":
        return {}
    return {
        i: wrap_text(tr.name, LEGEND_WRAP)
        for i, tr in enumerate(fig.data)
        if tr.name and wrap_text(tr.name, LEGEND_WRAP) != tr.name
    }


def scale(fig):
    """A plotly figure for the screen: a copy that keeps its text inside it on a phone (``_narrow_fixes``) and, in
    presenter view, has projector-size fonts (the charts are the content); the figure itself where neither
    changes anything. The caller's figure (also the report's) is never changed, but for the font families it
    gets where it names none (``app.kit.fonts``: a CJK face for Chinese labels, which the report uses too)."""
    fonts = font_updates(fig)
    if fonts:  # on the figure itself: a copy of a projector map costs a third of a second; the report names them too
        fig.update_layout(**fonts)
    fixes, names = _narrow_fixes(fig), _legend_names(fig)
    if not is_on() and not fixes and not names:
        return fig
    import plotly.graph_objects as go

    big = go.Figure(fig)
    if fixes:
        big.update_layout(**fixes)
    for i, name in names.items():
        big.data[i].name = name
    if is_on():
        # Streamlit's chart theme sets the axes' and legend's own sizes, which win over layout.font: set them too.
        big.update_layout(
            font_size=CHART_FONT,
            title_font_size=CHART_FONT + 6,
            hoverlabel_font_size=CHART_FONT,
            legend_font_size=CHART_FONT,
            legend_title_font_size=CHART_FONT,
        )
        big.update_xaxes(tickfont_size=CHART_FONT, title_font_size=CHART_FONT)
        big.update_yaxes(tickfont_size=CHART_FONT, title_font_size=CHART_FONT)
        if big.layout.height:
            big.update_layout(height=int(big.layout.height * CHART_GROWTH))
    if "title_text" in fixes:  # room above the plot for every line of the title
        lines = fixes["title_text"].count("<br>") + 1
        need = int(lines * 1.3 * (big.layout.title.font.size or TITLE_PX)) + 16
        if (big.layout.margin.t or 0) < need:
            big.update_layout(margin_t=need)
    return big


def settings():
    """Where a page draws its configuration widgets: folded away in presenter view."""
    if is_on():
        return st.expander(t("presenter.settings"), expanded=False)
    return st.container()

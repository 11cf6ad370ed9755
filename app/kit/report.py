"""The session report: what a participant did (inputs, predictions, figures as PNG) as one offline HTML file.

Pages call ``record(...)`` when they produce a result; the sidebar builds the file on request, with a progress
bar (drawing the figures is most of it), then offers the download. Entries are kept per
browser session (at most MAX_ENTRIES, oldest dropped); an entry recorded again under the same ``entry_id``
replaces the old one, so a page may record from code that reruns.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import html
import logging
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st

from app.kit.fonts import font_updates
from app.kit.i18n import lang, t
from core.base.segment import is_wide

ENTRIES = "report.entries"
MAX_ENTRIES = 100
# app/room/session.py's keys (ROLE, FOLLOWING; app.kit may not import app.room, a test keeps them equal): a follower
# who follows the presenter shows (and records) what the presenter asked for.
ROOM_ROLE, ROOM_FOLLOWING, FOLLOWER = "room.role", "room.following", "follower"


def following_room() -> bool:
    """This run shows what a room's presenter chose (a follower following), not what this session did."""
    return st.session_state.get(ROOM_ROLE) == FOLLOWER and bool(st.session_state.get(ROOM_FOLLOWING))


@dataclass(frozen=True)
class Entry:
    entry_id: str
    page: str  # the page's title, in the language of the moment it was recorded
    title: str
    inputs: dict[str, str]
    rows: tuple[dict[str, Any], ...] = ()  # a result table
    text: str = ""  # or a result sentence
    figures: tuple[str, ...] = field(default=(), repr=False)  # plotly figures as JSON
    at: str = ""
    room: bool = False  # recorded while following a room: the presenter's inputs, not this session's own doing


def record(
    entry_id: str,
    page: str,
    title: str,
    inputs: dict[str, Any],
    *,
    rows: Sequence[dict] = (),
    text: str = "",
    figures: Sequence = (),
) -> None:
    """Add (or replace) one entry of this session's report. ``figures`` are plotly figures."""
    entries: dict[str, Entry] = st.session_state.setdefault(ENTRIES, {})
    entries.pop(entry_id, None)
    entries[entry_id] = Entry(
        entry_id,
        page,
        title,
        {str(k): str(v) for k, v in inputs.items()},
        tuple(dict(r) for r in rows),
        text,
        tuple(f.to_json() for f in figures),
        _dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
        following_room(),
    )
    while len(entries) > MAX_ENTRIES:
        entries.pop(next(iter(entries)))


def record_view(
    kind: str,
    page: str,
    title: str,
    inputs: dict[str, Any],
    made_from: Any,
    *,
    rows: Sequence[dict] = (),
    text: str = "",
    figures: Sequence = (),
) -> None:
    """Record the result a view draws. Its entry id is ``kind`` and a digest of ``made_from`` (what the result was
    made from: model, input, options; language-independent), so the view may call this on every rerun: an entry
    already here is kept as it is (no figure serialised again), a new result adds its own entry."""
    entry_id = f"{kind}:{hashlib.sha1(repr(made_from).encode('utf-8')).hexdigest()[:12]}"
    if entry_id in st.session_state.get(ENTRIES, {}):
        return
    record(entry_id, page, title, inputs, rows=rows, text=text, figures=figures)


def entries() -> list[Entry]:
    return list(st.session_state.get(ENTRIES, {}).values())


def panel_label(items: Sequence[Entry]) -> str:
    """The sidebar panel's title: how many results are recorded, and how many of them a follower only followed
    (a follower's screen runs the presenter's inputs, so it records without doing anything itself)."""
    room = sum(e.room for e in items)
    if room:
        return t("report.panel_room", n=len(items), room=room)
    return t("sidebar.report", n=len(items))


def clear() -> None:
    st.session_state[ENTRIES] = {}


PNG_WIDTH, PNG_HEIGHT = 900, 480
_PNG_CACHE: OrderedDict[str, bytes] = OrderedDict()  # figure JSON digest -> PNG, process-wide
_PNG_CACHE_MAX = 256  # about 256 x 60 kB; the oldest drawing is evicted first
_PNG_LOCK = threading.Lock()
log = logging.getLogger(__name__)


def _text_px(text: str, size: float) -> float:
    """About how wide ``text`` is drawn at font ``size`` (CJK glyphs a full em, others about 0.6 em)."""
    return sum(size if is_wide(c) else 0.6 * size for c in text)


def wrap_title(text: str, room_px: float, size: float = 14) -> str:
    """``text`` broken into lines (plotly's <br>) at spaces so that no line is longer than ``room_px``; a CJK
    title with no spaces is broken between characters."""
    if not text or _text_px(text, size) <= room_px:
        return text
    parts = text.split(" ") if " " in text else list(text)
    sep = " " if " " in text else ""
    lines: list[str] = []
    for part in parts:
        if lines and _text_px(lines[-1] + sep + part, size) <= room_px:
            lines[-1] += sep + part
        else:
            lines.append(part)
    return "<br>".join(lines)


def _fit_y_titles(fig) -> None:
    """A vertical axis title longer than its plot is tall ran out of the figure at both ends (kaleido draws the
    whole title centred on the axis): break it into lines that fit the axis' share of the height."""
    height = fig.layout.height or PNG_HEIGHT
    margin = fig.layout.margin
    plot = height - (margin.t if margin.t is not None else 80) - (margin.b if margin.b is not None else 80)
    for name in [k for k in fig.layout.to_plotly_json() if k.startswith("yaxis")]:
        axis = fig.layout[name]
        title = axis.title.text if axis.title else None
        if not title:
            continue
        domain = axis.domain or (0, 1)
        size = (axis.title.font.size if axis.title.font and axis.title.font.size else None) or 14
        # tick labels along the bottom (rotated token names) take about a third of a short plot
        room = max(60.0, 0.6 * plot * (domain[1] - domain[0]))
        axis.title.text = wrap_title(title, room, size)


def report_figure(fig_json: str):
    """The figure as the report draws it: every axis makes room for its tick labels and title (on screen the
    page's theme does that; kaleido's plain template keeps the figure's tight margins and cuts labels off), at
    the figure's own height so rows keep their spacing."""
    import plotly.io as pio  # lazy: only when a report is built

    fig = pio.from_json(fig_json)
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    fig.update_layout(width=PNG_WIDTH, height=max(fig.layout.height or PNG_HEIGHT, 220), autosize=False)
    fig.update_layout(**font_updates(fig))  # a CJK face for Chinese labels (kaleido's Chromium: app/kit/fonts.py)
    _fit_y_titles(fig)
    return fig


def figure_pngs(fig_jsons: Sequence[str], on_progress=None) -> tuple[list[bytes | None], str | None]:
    """The figures as PNG through kaleido, all in one browser session (starting Chrome/Chromium takes about
    two seconds); figures drawn before come from a cache. Returns the PNGs and, when some could not be drawn,
    why (also logged): the report says so next to each missing figure instead of dropping it."""
    import plotly.io as pio  # lazy: kaleido's figure export, only when a report is built

    keys = [hashlib.sha1(f.encode()).hexdigest() for f in fig_jsons]
    with _PNG_LOCK:
        out: list[bytes | None] = [_PNG_CACHE.get(k) for k in keys]
    todo = [i for i, png in enumerate(out) if png is None]
    error = None
    # Chunks so a long report shows progress; each chunk is one kaleido call (one browser start).
    chunk = 16
    for start in range(0, len(todo), chunk):
        part = todo[start : start + chunk]
        with tempfile.TemporaryDirectory() as tmp:
            paths = [Path(tmp) / f"fig{i}.png" for i in part]
            try:
                figs = [report_figure(fig_jsons[i]) for i in part]
                # the size explicitly: kaleido ignores the layout's and would draw every figure at 700 x 500
                pio.write_images(
                    figs,
                    paths,
                    format="png",
                    width=[f.layout.width for f in figs],
                    height=[f.layout.height for f in figs],
                    scale=1,
                )
            except Exception as e:  # noqa: BLE001 - no Chrome/Chromium here, kaleido missing, or a bad figure
                error = f"{type(e).__name__}: {e}".strip()
                log.warning(
                    "session report: %d figure(s) could not be drawn as PNG: %s",  # i18n: ok (server log)
                    len(part),
                    error,
                )
                continue
            for i, path in zip(part, paths):
                out[i] = path.read_bytes() if path.exists() else None
                if out[i] is not None:
                    with _PNG_LOCK:
                        _PNG_CACHE[keys[i]] = out[i]
                        while len(_PNG_CACHE) > _PNG_CACHE_MAX:
                            _PNG_CACHE.popitem(last=False)
        if on_progress is not None:
            on_progress(min(start + chunk, len(todo)) / len(todo))
    if error is None and any(png is None for png in out):
        error = "kaleido wrote no file"
        log.warning(
            "session report: kaleido wrote no PNG for %d figure(s)",  # i18n: ok (server log)
            sum(png is None for png in out),
        )
    return out, error


_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI","Noto Sans","Noto Sans CJK SC","PingFang SC",sans-serif;
max-width:980px;margin:2em auto;padding:0 1em;color:#222}
h1{margin-bottom:0}.meta{color:#666}section{border-top:1px solid #ddd;margin-top:1.5em;padding-top:.5em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;
vertical-align:top;font-size:14px}th{background:#f4f4f4}img{max-width:100%;border:1px solid #eee}
.page{color:#4C78A8;font-size:13px;text-transform:uppercase;letter-spacing:.05em}
"""


_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")  # Markdown's backslash escapes (render.as_text writes them)
_INLINE = (
    (re.compile(r"`([^`\n]+)`"), r"<code>\1</code>"),
    (re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*"), r"<strong>\1</strong>"),
    (re.compile(r"__(?=\S)(.+?)(?<=\S)__"), r"<strong>\1</strong>"),
    (re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"), r"<em>\1</em>"),
)


def markdown_html(text: str) -> str:
    """The Markdown a page writes into a title, a result sentence or a table cell (bold, italics, code, the
    backslash escapes of user text, line breaks and "- " list lines) as HTML, everything else escaped: the report
    shows the result as the page did, never the raw ``**``."""
    kept: list[str] = []

    def keep(m: re.Match) -> str:  # an escaped character stays literal, out of reach of the patterns below
        kept.append(m.group(1))
        return f"\x00{len(kept) - 1}\x00"

    out = html.escape(_ESCAPED.sub(keep, str(text)), quote=False)
    for pattern, repl in _INLINE:
        out = pattern.sub(repl, out)
    lines = out.split("\n")
    out = "<br>".join(f"• {ln[2:]}" if ln.startswith(("- ", "* ")) else ln for ln in lines)
    return re.sub("\x00(\\d+)\x00", lambda m: html.escape(kept[int(m.group(1))]), out)


def _table(rows: Sequence[dict], markdown: bool = True) -> str:
    """An HTML table; cells written by the pages as Markdown are rendered (``markdown``), a participant's inputs
    are shown exactly as typed."""
    cell = markdown_html if markdown else (lambda v: html.escape(str(v)))
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{cell(r.get(c, ''))}</td>" for c in cols) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def build_html(items: Sequence[Entry], on_progress=None) -> str:
    """The whole report as one self-contained HTML string (figures inlined as base64 PNG). ``on_progress(f)`` is
    called with the share of figures drawn so far."""
    parts = [
        f"<!doctype html><html lang='{lang()}'><head><meta charset='utf-8'>",
        f"<title>{html.escape(t('report.doc_title'))}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(t('report.doc_title'))}</h1>",
        "<p class='meta'>"
        + html.escape(t("report.doc_meta", n=len(items), at=_dt.datetime.now().strftime("%Y-%m-%d %H:%M")))
        + "</p>",
    ]
    drawn, error = figure_pngs([f for e in items for f in e.figures], on_progress)
    pngs = iter(drawn)
    for e in items:
        where = f" · {html.escape(t('report.from_room'))}" if e.room else ""
        parts.append(
            f"<section><div class='page'>{html.escape(e.page)} · {html.escape(e.at)}{where}</div>"
            f"<h2>{markdown_html(e.title)}</h2>"
        )
        if e.inputs:
            parts.append(
                f"<h3>{html.escape(t('report.inputs'))}</h3>"
                + _table([{t("report.field"): k, t("report.value"): v} for k, v in e.inputs.items()], markdown=False)
            )
        if e.text or e.rows:
            parts.append(f"<h3>{html.escape(t('report.results'))}</h3>")
        if e.text:
            parts.append(f"<p>{markdown_html(e.text)}</p>")
        if e.rows:
            parts.append(_table(e.rows))
        for _ in e.figures:
            png = next(pngs)
            if png is None:
                parts.append(f"<p><em>{html.escape(t('report.no_png', error=error or '?'))}</em></p>")
            else:
                parts.append(f"<img alt='figure' src='data:image/png;base64,{base64.b64encode(png).decode()}'>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "".join(parts)

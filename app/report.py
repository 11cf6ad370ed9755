"""The session report: what a participant did (inputs, predictions, figures as PNG) as one offline HTML file.

Pages call ``record(...)`` when they produce a result; the sidebar offers the download. Entries are kept per
browser session (at most MAX_ENTRIES, oldest dropped); an entry recorded again under the same ``entry_id``
replaces the old one, so a page may record from code that reruns.
"""
from __future__ import annotations

import base64
import datetime as _dt
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import streamlit as st

from app.i18n import lang, t

ENTRIES = "report.entries"
MAX_ENTRIES = 100


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


def record(entry_id: str, page: str, title: str, inputs: dict[str, Any], *, rows: Sequence[dict] = (),
           text: str = "", figures: Sequence = ()) -> None:
    """Add (or replace) one entry of this session's report. ``figures`` are plotly figures."""
    entries: dict[str, Entry] = st.session_state.setdefault(ENTRIES, {})
    entries.pop(entry_id, None)
    entries[entry_id] = Entry(entry_id, page, title, {str(k): str(v) for k, v in inputs.items()},
                              tuple(dict(r) for r in rows), text, tuple(f.to_json() for f in figures),
                              _dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S"))
    while len(entries) > MAX_ENTRIES:
        entries.pop(next(iter(entries)))


def entries() -> list[Entry]:
    return list(st.session_state.get(ENTRIES, {}).values())


def clear() -> None:
    st.session_state[ENTRIES] = {}


def figure_pngs(fig_jsons: Sequence[str]) -> list[bytes | None]:
    """The figures as PNG through kaleido, all in one browser session (starting Chrome/Chromium takes about
    two seconds); a list of None when no browser can be started (the report then says so per figure)."""
    import tempfile

    import plotly.io as pio

    if not fig_jsons:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / f"fig{i}.png" for i in range(len(fig_jsons))]
        try:
            pio.write_images([pio.from_json(f) for f in fig_jsons], paths, format="png", width=900, height=480,
                             scale=1)
        except Exception:  # noqa: BLE001 - no Chrome/Chromium on this machine, or kaleido missing
            return [None] * len(fig_jsons)
        return [p.read_bytes() if p.exists() else None for p in paths]


_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI","Noto Sans","Noto Sans CJK SC","PingFang SC",sans-serif;
max-width:980px;margin:2em auto;padding:0 1em;color:#222}
h1{margin-bottom:0}.meta{color:#666}section{border-top:1px solid #ddd;margin-top:1.5em;padding-top:.5em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;
vertical-align:top;font-size:14px}th{background:#f4f4f4}img{max-width:100%;border:1px solid #eee}
.page{color:#4C78A8;font-size:13px;text-transform:uppercase;letter-spacing:.05em}
"""


def _table(rows: Sequence[dict]) -> str:
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def build_html(items: Sequence[Entry]) -> str:
    """The whole report as one self-contained HTML string (figures inlined as base64 PNG)."""
    parts = [f"<!doctype html><html lang='{lang()}'><head><meta charset='utf-8'>",
             f"<title>{html.escape(t('report.doc_title'))}</title><style>{_STYLE}</style></head><body>",
             f"<h1>{html.escape(t('report.doc_title'))}</h1>",
             "<p class='meta'>" + html.escape(t("report.doc_meta", n=len(items),
                                                at=_dt.datetime.now().strftime("%Y-%m-%d %H:%M"))) + "</p>"]
    pngs = iter(figure_pngs([f for e in items for f in e.figures]))
    for e in items:
        parts.append(f"<section><div class='page'>{html.escape(e.page)} · {html.escape(e.at)}</div>"
                     f"<h2>{html.escape(e.title)}</h2>")
        if e.inputs:
            parts.append(f"<h3>{html.escape(t('report.inputs'))}</h3>"
                         + _table([{t("report.field"): k, t("report.value"): v} for k, v in e.inputs.items()]))
        if e.text or e.rows:
            parts.append(f"<h3>{html.escape(t('report.results'))}</h3>")
        if e.text:
            parts.append(f"<p>{html.escape(e.text)}</p>")
        if e.rows:
            parts.append(_table(e.rows))
        for _ in e.figures:
            png = next(pngs)
            if png is None:
                parts.append(f"<p><em>{html.escape(t('report.no_png'))}</em></p>")
            else:
                parts.append(f"<img alt='figure' src='data:image/png;base64,{base64.b64encode(png).decode()}'>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "".join(parts)

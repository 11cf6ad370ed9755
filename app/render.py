"""Renderers shared by pages: plotly figures built from core result dataclasses, and report helpers.

Every label comes from assets/i18n/predict.toml (``predict.params.*``, ``predict.speed.*``).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

import plotly.graph_objects as go
import streamlit as st

from app import report
from app.i18n import t
from core.models import zoo_dir
from core.params import PARTS, ParamBreakdown

PART_COLORS = {"embeddings": "#4C78A8", "encoder": "#F58518", "pooler": "#54A24B", "heads": "#B279A2"}


def params_bar(rows: list[ParamBreakdown]) -> go.Figure:
    """Stacked bar of parameters (millions) per checkpoint, with the seeds' claimed figure as a marker."""
    names = [r.checkpoint for r in rows]
    fig = go.Figure()
    for part in PARTS:
        label = t(f"predict.params.part.{part}")
        fig.add_bar(name=label, x=names, y=[getattr(r, part) / 1e6 for r in rows], marker_color=PART_COLORS[part],
                    hovertemplate="%{x}<br>" + label + ": %{y:.2f}M<extra></extra>")
    claimed = [(r.checkpoint, r.claim_m) for r in rows if r.claim_m is not None]
    if claimed:
        fig.add_scatter(name=t("predict.params.claim"), x=[c for c, _ in claimed], y=[m for _, m in claimed],
                        mode="markers", marker=dict(symbol="line-ew-open", size=28, line=dict(width=3, color="black")),
                        hovertemplate="%{x}<br>" + t("predict.params.claimed") + ": %{y}M<extra></extra>")
    fig.update_layout(barmode="stack", yaxis_title=t("predict.params.y"), legend_title=t("predict.params.legend"),
                      margin=dict(t=30, b=10), height=420)
    return fig


def speed_chart(result) -> go.Figure:
    """Latency (bars) per family from a core.bench.SpeedResult."""
    rows = result.rows
    fig = go.Figure()
    fig.add_bar(x=[r.label for r in rows], y=[r.latency_ms for r in rows], name=t("predict.speed.latency_name"),
                error_y=dict(type="data", array=[r.latency_std_ms for r in rows]),
                text=[f"{r.latency_ms:,.1f} ms" for r in rows], textposition="outside")
    fig.update_layout(yaxis_title=t("predict.speed.latency_y"), margin=dict(t=30, b=10), height=380)
    return fig


def throughput_chart(result) -> go.Figure:
    rows = result.rows
    fig = go.Figure()
    fig.add_bar(x=[r.label for r in rows], y=[r.throughput for r in rows], marker_color="#54A24B",
                text=[f"{r.throughput:,.1f}/s" for r in rows], textposition="outside")
    fig.update_layout(yaxis_title=t("predict.speed.throughput_y"), margin=dict(t=30, b=10), height=380)
    return fig


# ---------------------------------------------------------------------------------------------- session report
def entry_id(kind: str, *ident: Any) -> str:
    """A stable report entry id for a result made from ``ident`` (language-independent values): the same
    inputs give the same id, so recording again replaces the entry instead of adding a copy."""
    return f"{kind}:{hashlib.sha1(repr(ident).encode('utf-8')).hexdigest()[:12]}"


def record_once(state_key: str, eid: str, build: Callable[[], dict]) -> None:
    """Record a result that is shown on every rerun (a finished job, a computed table) only the first time,
    so reruns neither move it to the end of the report nor bring it back after the report was cleared.
    ``state_key``: the page's own set of recorded ids (e.g. "speed.recorded"); ``build()`` returns the keyword
    arguments of report.record (page, title, inputs, rows/text, figures) and runs only when needed."""
    done: set = st.session_state.setdefault(state_key, set())
    if eid in done:
        return
    done.add(eid)
    report.record(eid, **build())


def run_or_error(result_key: str, fn: Callable[[], Any]) -> Any:
    """Call core and keep the result in session state for later reruns; on a ValueError (config errors,
    FillMaskError, PairError, ModelLoadError: each says what to do) show its message instead of a traceback."""
    try:
        st.session_state[result_key] = fn()
    except ValueError as e:
        st.session_state[result_key] = None
        st.error(str(e))
    return st.session_state[result_key]


def shorten(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters with an ellipsis (report titles)."""
    return text if len(text) <= n else text[: n - 1] + "…"


def yes_no(value: bool) -> str:
    return t("predict.yes") if value else t("predict.no")


def bundled_card(checkpoint: str) -> dict:
    """The model card (encoderlab_card.json) of a bundled ``encoderlab/NAME`` checkpoint; {} for any other."""
    if not checkpoint.startswith("encoderlab/"):
        return {}
    try:
        return json.loads((zoo_dir() / checkpoint.split("/", 1)[1] / "encoderlab_card.json").read_text())
    except (OSError, ValueError):
        return {}


def pair_card_caption(checkpoint: str, head: str) -> None:
    """A bundled model's held-out NSP/SOP accuracy from its card, so a mini's scores are read for what they are."""
    card = bundled_card(checkpoint).get("heldout", {})
    if "pair_acc" in card:
        st.caption(t("common.pair_card", id=checkpoint, head=head.upper(), acc=f"{card['pair_acc']:.0%}",
                     majority=f"{card.get('pair_majority', 0.5):.0%}"))

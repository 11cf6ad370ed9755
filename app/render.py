"""Renderers shared by pages: plotly figures built from core result dataclasses."""
from __future__ import annotations

import plotly.graph_objects as go

from core.params import PARTS, ParamBreakdown

PART_COLORS = {"embeddings": "#4C78A8", "encoder": "#F58518", "pooler": "#54A24B", "heads": "#B279A2"}


def params_bar(rows: list[ParamBreakdown]) -> go.Figure:
    """Stacked bar of parameters (millions) per checkpoint, with the seeds' claimed figure as a marker."""
    names = [r.checkpoint for r in rows]
    fig = go.Figure()
    for part in PARTS:
        fig.add_bar(name=part, x=names, y=[getattr(r, part) / 1e6 for r in rows], marker_color=PART_COLORS[part],
                    hovertemplate="%{x}<br>" + part + ": %{y:.2f}M<extra></extra>")
    claimed = [(r.checkpoint, r.claim_m) for r in rows if r.claim_m is not None]
    if claimed:
        fig.add_scatter(name="seeds' claim", x=[c for c, _ in claimed], y=[m for _, m in claimed], mode="markers",
                        marker=dict(symbol="line-ew-open", size=28, line=dict(width=3, color="black")),
                        hovertemplate="%{x}<br>claimed: %{y}M<extra></extra>")
    fig.update_layout(barmode="stack", yaxis_title="parameters (millions)", legend_title="part",
                      margin=dict(t=30, b=10), height=420)
    return fig


def speed_chart(result) -> go.Figure:
    """Latency (bars) per family from a core.bench.SpeedResult."""
    rows = result.rows
    fig = go.Figure()
    fig.add_bar(x=[r.label for r in rows], y=[r.latency_ms for r in rows], name="latency (ms / batch)",
                error_y=dict(type="data", array=[r.latency_std_ms for r in rows]),
                text=[f"{r.latency_ms:,.1f} ms" for r in rows], textposition="outside")
    fig.update_layout(yaxis_title="ms per batch (lower is faster)", margin=dict(t=30, b=10), height=380)
    return fig


def throughput_chart(result) -> go.Figure:
    rows = result.rows
    fig = go.Figure()
    fig.add_bar(x=[r.label for r in rows], y=[r.throughput for r in rows], marker_color="#54A24B",
                text=[f"{r.throughput:,.1f}/s" for r in rows], textposition="outside")
    fig.update_layout(yaxis_title="sequences per second (higher is faster)", margin=dict(t=30, b=10), height=380)
    return fig

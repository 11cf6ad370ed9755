"""The Attention page's plotly figures, built from core.inspect.attention results (maps, the head grid, query/key, statistics, relevance, layer similarity, selections).

Token text reaches plotly only through ``safe()``: plotly reads a few HTML-like tags in labels and hover text,
so ``<``, ``>`` and ``&`` are written as entities and show as plain characters."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.kit.i18n import t
from app.kit.plot_text import plot_text
from core.inspect import attention as A

GRID_CELL = 16  # a thumbnail is at most 16 x 16 (block-averaged)


STATS = ("entropy", "distance", "cls", "sep", "punct", "previous", "next", "self")  # labels: attention.stat.*


def stat_label(name: str) -> str:
    return t(f"attention.stat.{name}")


def safe(text: str) -> str:
    """A token for a plotly label or hover: markup characters become entities, so they show as typed."""
    return plot_text(text)


def _ticks(labels: list[str], offset: int = 0) -> dict:
    step = max(1, math.ceil(len(labels) / 60))
    idx = list(range(0, len(labels), step))
    return dict(tickvals=[i + offset for i in idx], ticktext=[safe(labels[i]) for i in idx], tickfont=dict(size=10))


def heatmap(
    z: np.ndarray, rows: list[str], cols: list[str], title: str, offset: int = 0, zmax: float | None = None
) -> go.Figure:
    """A token x token map; rows attend to columns. ``offset`` is the position of the first token shown."""
    if len(rows) * len(cols) <= 40_000:  # token names in the hover; past ~200 x 200 only positions (payload)
        hover = dict(
            text=[[f"{safe(r)} → {safe(c)}" for c in cols] for r in rows],
            hovertemplate="%{text}<br>%{z:.3f}<extra></extra>",
        )
    else:
        hover = dict(hovertemplate=t("attention.fig.hover_query_key"))
    fig = go.Figure(
        go.Heatmap(
            z=np.round(np.asarray(z, dtype=float), 4),
            x=list(range(offset, offset + len(cols))),
            y=list(range(offset, offset + len(rows))),
            colorscale="Blues",
            zmin=0,
            zmax=zmax,
            **hover,
        )
    )
    fig.update_xaxes(**_ticks(cols, offset), tickangle=-60, side="top")
    fig.update_yaxes(**_ticks(rows, offset), autorange="reversed")
    fig.update_layout(title=title, height=max(360, min(900, 14 * len(rows) + 160)), margin=dict(t=110, l=10, r=10))
    return fig


def pool(m: np.ndarray, size: int) -> np.ndarray:
    """Block-average a square map down to at most size x size."""
    n = m.shape[0]
    if n <= size:
        return m
    edges = np.linspace(0, n, size + 1).astype(int)
    return np.array(
        [[m[edges[i] : edges[i + 1], edges[j] : edges[j + 1]].mean() for j in range(size)] for i in range(size)]
    )


def thumbnail_grid(att: np.ndarray, focus: tuple[int, int]) -> go.Figure:
    """Every head as a small map (layer rows, head columns), one selectable marker per head."""
    n_layers, n_heads = att.shape[:2]
    s = min(att.shape[-1], GRID_CELL)
    step = s + 1
    z = np.full((n_layers * step, n_heads * step), np.nan)
    for layer in range(n_layers):
        for head in range(n_heads):
            thumb = pool(np.asarray(att[layer, head], dtype=float), s)
            z[layer * step : layer * step + s, head * step : head * step + s] = thumb / max(thumb.max(), 1e-9)
    fig = go.Figure(go.Heatmap(z=z, colorscale="Blues", showscale=False, hoverinfo="skip"))
    cx = [h * step + (s - 1) / 2 for _ in range(n_layers) for h in range(n_heads)]
    cy = [layer * step + (s - 1) / 2 for layer in range(n_layers) for _ in range(n_heads)]
    fig.add_scatter(
        x=cx,
        y=cy,
        mode="markers",
        marker=dict(size=28, symbol="square", color="rgba(0,0,0,0)"),
        customdata=[[layer, h] for layer in range(n_layers) for h in range(n_heads)],
        hovertemplate=t("attention.fig.hover_grid"),
        showlegend=False,
    )
    fl, fh = focus
    fig.add_shape(
        type="rect",
        x0=fh * step - 0.8,
        x1=fh * step + s - 0.2,
        y0=fl * step - 0.8,
        y1=fl * step + s - 0.2,
        line=dict(color="#e4572e", width=2),
    )
    fig.update_xaxes(
        tickvals=[h * step + (s - 1) / 2 for h in range(n_heads)],
        ticktext=[str(h) for h in range(n_heads)],
        title=t("attention.fig.head"),
        side="top",
        showgrid=False,
        zeroline=False,
    )
    fig.update_yaxes(
        tickvals=[layer * step + (s - 1) / 2 for layer in range(n_layers)],
        ticktext=[str(layer) for layer in range(n_layers)],
        title=t("attention.fig.layer"),
        autorange="reversed",
        showgrid=False,
        zeroline=False,
        scaleanchor="x",
    )
    fig.update_layout(
        height=max(300, 26 * n_layers + 120),
        margin=dict(t=60, l=10, r=10, b=10),
        dragmode=False,
        clickmode="event+select",
    )
    return fig


QK_STRIP_PX, QK_GAP_PX = 26, 40  # the query strip's height, the gap under it that holds the lower titles
QK_MARGIN = dict(t=50, l=10, r=10, b=10)


def qk_figure(v: A.QKView, labels: list[str], query_label: str) -> go.Figure:
    """The query/key view: q, each k, q*k (whose rows sum to q.k) and the softmax weights."""
    n, d = v.keys.shape
    # Laid out in pixels: the query strip keeps QK_STRIP_PX, and the gap under it holds the lower plots' titles
    # (QK_GAP_PX) with nothing else in it: the strip's dimension numbers are not drawn (the keys' axis below has
    # the same dimensions, numbered), so they cannot run into those titles.
    height = max(360, 16 * n + 140)
    area = height - QK_MARGIN["t"] - QK_MARGIN["b"]
    gap = QK_GAP_PX / area
    strip = QK_STRIP_PX / (area - QK_GAP_PX)
    fig = make_subplots(
        rows=2,
        cols=3,
        row_heights=[strip, 1 - strip],
        column_widths=[0.38, 0.38, 0.24],
        specs=[[{"colspan": 2}, None, None], [{}, {}, {}]],
        vertical_spacing=gap,
        horizontal_spacing=0.04,
        subplot_titles=(
            t("attention.fig.qk_query", token=safe(query_label)),
            t("attention.fig.qk_keys"),
            t("attention.fig.qk_product"),
            t("attention.fig.qk_softmax"),
        ),
    )
    lim = float(np.abs(v.product).max()) or 1.0
    kl = float(np.abs(np.concatenate([v.keys.ravel(), v.query])).max()) or 1.0
    fig.add_heatmap(
        z=v.query[None, :],
        colorscale="RdBu",
        zmid=0,
        zmin=-kl,
        zmax=kl,
        showscale=False,
        row=1,
        col=1,
        hovertemplate=t("attention.fig.hover_dim"),
    )
    ys = list(range(n))
    hov = [safe(tok) for tok in labels]
    fig.add_heatmap(
        z=v.keys,
        y=ys,
        colorscale="RdBu",
        zmid=0,
        zmin=-kl,
        zmax=kl,
        showscale=False,
        row=2,
        col=1,
        text=[[hov[i]] * d for i in ys],
        hovertemplate=t("attention.fig.hover_token_dim"),
    )
    fig.add_heatmap(
        z=v.product,
        y=ys,
        colorscale="PiYG",
        zmid=0,
        zmin=-lim,
        zmax=lim,
        showscale=False,
        row=2,
        col=2,
        text=[[hov[i]] * d for i in ys],
        hovertemplate=t("attention.fig.hover_token_dim"),
    )
    fig.add_bar(
        x=v.weights,
        y=ys,
        orientation="h",
        row=2,
        col=3,
        marker_color="#4C78A8",
        customdata=np.stack([v.scores, v.weights], -1),
        text=hov,
        textposition="none",
        hovertemplate=t("attention.fig.hover_qk_weight"),
    )
    tick = _ticks(list(labels))
    for col in (1, 2, 3):
        fig.update_yaxes(autorange="reversed", row=2, col=col, **(tick if col == 1 else {"showticklabels": False}))
    fig.update_yaxes(showticklabels=False, ticks="", row=1, col=1)
    fig.update_xaxes(showticklabels=False, ticks="", row=1, col=1)
    fig.update_layout(height=height, showlegend=False, margin=QK_MARGIN)
    return fig


def stat_figures(stats: A.HeadStats, name: str) -> tuple[go.Figure, go.Figure]:
    """A statistic as a layer x head map and, Clark-style, as one dot per head along the layers."""
    z = getattr(stats, name)
    n_layers, n_heads = z.shape
    hm = go.Figure(
        go.Heatmap(
            z=z, colorscale="Viridis", hovertemplate=t("attention.fig.hover_layer_head"), colorbar=dict(title="")
        )
    )
    hm.update_xaxes(title=t("attention.fig.head"), dtick=1)
    hm.update_yaxes(title=t("attention.fig.layer"), autorange="reversed", dtick=1)
    hm.update_layout(title=stat_label(name), height=360, margin=dict(t=50, l=10, r=10, b=10))
    sc = go.Figure()
    for layer in range(n_layers):
        sc.add_scatter(
            x=[layer] * n_heads,
            y=z[layer],
            mode="markers",
            marker=dict(size=8, opacity=0.7),
            customdata=list(range(n_heads)),
            showlegend=False,
            hovertemplate=t("attention.fig.hover_layer_dot", layer=layer),
        )
    sc.add_scatter(
        x=list(range(n_layers)), y=z.mean(1), mode="lines", name=t("attention.fig.mean"), line=dict(color="#888888")
    )
    sc.update_xaxes(title=t("attention.fig.layer"), dtick=1)
    sc.update_layout(
        title=t("attention.fig.by_layer", stat=stat_label(name)), height=360, margin=dict(t=50, l=10, r=10, b=10)
    )
    return hm, sc


def relevance_bars(rows: dict[str, np.ndarray], labels: list[str]) -> go.Figure:
    fig = go.Figure()
    for name, values in rows.items():
        fig.add_bar(
            x=list(range(len(labels))),
            y=values,
            name=name,
            text=[safe(tok) for tok in labels],
            textposition="none",
            hovertemplate="%{text}: %{y:.3f}<extra>" + name + "</extra>",
        )
    fig.update_xaxes(**_ticks(labels), tickangle=-60)
    fig.update_layout(
        barmode="group", title=t("attention.fig.relevance"), height=380, margin=dict(t=50, l=10, r=10, b=10)
    )
    return fig


def similarity_figure(sim: np.ndarray, title: str) -> go.Figure:
    fig = go.Figure(
        go.Heatmap(
            z=sim,
            zmin=-1,
            zmax=1,
            colorscale="RdBu",
            reversescale=True,
            hovertemplate=t("attention.fig.hover_layer_vs"),
        )
    )
    fig.update_xaxes(title=t("attention.fig.layer"), dtick=1)
    fig.update_yaxes(title=t("attention.fig.layer"), autorange="reversed", dtick=1)
    fig.update_layout(title=safe(title), height=380, margin=dict(t=50, l=10, r=10, b=10))
    return fig


def per_layer_lines(results: dict[str, A.HeadStats], name: str) -> go.Figure:
    fig = go.Figure()
    for label, s in results.items():
        z = getattr(s, name)
        fig.add_scatter(x=list(range(z.shape[0])), y=z.mean(1), mode="lines+markers", name=safe(label))
    fig.update_xaxes(title=t("attention.fig.layer"), dtick=1)
    fig.update_layout(
        title=t("attention.fig.mean_over_heads", stat=stat_label(name)), height=340, margin=dict(t=50, l=10, r=10, b=10)
    )
    return fig


def selection_bars(values: np.ndarray, labels: list[str], title: str, picked: list[int]) -> go.Figure:
    """One bar per token (or word): the selection's attention; the selected ones in another colour."""
    colors = ["#E45756" if i in picked else "#4C78A8" for i in range(len(labels))]
    fig = go.Figure(
        go.Bar(
            x=list(range(len(labels))),
            y=np.round(np.asarray(values, dtype=float), 4),
            marker_color=colors,
            text=[safe(x) for x in labels],
            textposition="none",
            hovertemplate="%{text}: %{y:.3f}<extra></extra>",
        )
    )
    fig.update_xaxes(**_ticks(labels), tickangle=-60)
    longest = max((len(x) for x in labels), default=1)
    fig.update_layout(title=title, height=360 + 6 * min(longest, 30), margin=dict(t=50, l=10, r=10, b=10))
    return fig

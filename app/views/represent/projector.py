"""Renderers for the Projector page: the point map at one depth (plotly WebGL) and the separation per depth.

Payload, for many points: coordinates go as float32 numpy arrays, which plotly.io.to_json (what st.plotly_chart
sends) writes as base64 typed arrays (``{"dtype": "f4", "bdata": ...}``: 5.3 bytes a coordinate instead of ~19 for
a float64 written out); hover text is the word in its context, a few words each side (fewer above 10k points,
core.represent.projector.SNIPPET_WORDS_MANY), with no markup per point above 10k (plotly's JSON escapes each < > / to 6
bytes: <b>..</b><br> cost 66 bytes a point, more than the snippet); the next word is written once in a trace's
hovertemplate where the trace is that next word, per point (customdata) only otherwise; under colour by layer
only the shown depth's points carry hover text (the other depths are drawn faded, hover off).
bench/projector.py measures the bytes.

User text (the snippets) is escaped: plotly reads <b>, <br>, <a> in hover text as markup and decodes entities,
so plot_text (app.kit.plot_text) shows it as written. Labels come from assets/i18n/projector.toml; every
chart goes through presenter.scale.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, report, state, urlstate
from app.kit.i18n import explain, t
from app.kit.plot_text import plot_text, plot_texts
from app.kit.render import as_text
from core.represent.projector import MANY_POINTS, ColorGroup, Projection, color_groups

PAGE = "projector"
# A qualitative palette (plotly's D3 + extras) for up to 12 groups; "other" is always grey.
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#393b79",
    "#ad494a",
    "#637939",
)
OTHER = "#b0b0b0"
HEIGHT = 620
MARKER_SIZES = ((1_000, 9, 5), (10_000, 6, 3), (None, 4, 2))  # (up to n points, 2-D size, 3-D size)


def K(name: str) -> str:
    return state.key(PAGE, name)


def depth_label(d: int) -> str:
    return t("projector.embeddings") if d == 0 else t("projector.layer", n=d)


def group_label(g: ColorGroup) -> str:
    if g.kind == "word":
        return str(g.value)
    if g.kind == "end":
        return t("projector.end")
    if g.kind == "other":
        return t("projector.other", n=g.value)
    if g.kind == "cluster":
        return t("projector.cluster", n=int(g.value) + 1)
    return depth_label(int(g.value))


def hover_texts(p: Projection, idx: np.ndarray) -> list[str]:
    """The hover of each point: its word inside its context, the word in bold (up to MANY_POINTS points; above,
    in [brackets]: plotly's JSON writes each < > / as a 6-byte escape, so <b></b> costs 42 bytes a point)."""
    esc = plot_text
    if len(p) <= MANY_POINTS:
        return [f"{esc(p.left[i])}<b>{esc(p.words[i])}</b>{esc(p.right[i])}" for i in idx]
    return [f"{esc(p.left[i])}[{esc(p.words[i])}]{esc(p.right[i])}" for i in idx]


def _hover(p: Projection, g: ColorGroup | None, idx: np.ndarray) -> dict:
    """text / customdata / hovertemplate of one trace: the next word is written once in the template when the
    trace is one next word, else per point in customdata."""
    nxt = t("projector.next")
    if g is not None and g.kind in ("word", "end"):
        name = plot_text(g.value) if g.kind == "word" else t("projector.end")
        return dict(text=hover_texts(p, idx), hovertemplate=f"%{{text}}<br>{nxt}: {name}<extra></extra>")
    end = t("projector.end")
    return dict(
        text=hover_texts(p, idx),
        customdata=plot_texts(p.next_words[i] or end for i in idx),
        hovertemplate=f"%{{text}}<br>{nxt}: %{{customdata}}<extra>%{{fullData.name}}</extra>",
    )


def _trace(dims: int, xyz: np.ndarray, **kw):
    if dims == 3:
        return go.Scatter3d(x=xyz[:, 0], y=xyz[:, 1], z=xyz[:, 2], mode="markers", **kw)
    return go.Scattergl(x=xyz[:, 0], y=xyz[:, 1], mode="markers", **kw)


def _marker(dims: int, n: int, color: str, opacity: float) -> dict:
    """Bigger dots for a few points (a word's two dozen occurrences), small ones for a 50k sample."""
    size = next((s3 if dims == 3 else s2) for cap, s2, s3 in MARKER_SIZES if cap is None or n <= cap)
    return dict(size=size, color=color, opacity=opacity, line=dict(width=0))


def map_figure(p: Projection, depth: int, color: str) -> go.Figure:
    """The points at ``depth`` coloured by ``color`` (one WebGL trace per legend group). Colour by layer draws
    every depth of the joint map, ``depth`` in full and the others faded."""
    fig = go.Figure()
    groups = color_groups(p, color, depth)
    n = len(p)
    if color == "layer":
        pts = p.joint
        for j, g in enumerate(groups):
            shown = int(g.value) == depth
            kw = _hover(p, None, np.arange(n)) if shown else dict(hoverinfo="skip")
            fig.add_trace(
                _trace(
                    p.dims,
                    pts[g.index],
                    name=plot_text(group_label(g)),
                    marker=_marker(p.dims, n, PALETTE[j % len(PALETTE)], 0.9 if shown else 0.18),
                    **kw,
                )
            )
        lim = float(np.abs(pts).max()) * 1.05
    else:
        pts = p.at(depth)
        colors = iter(PALETTE)
        for g in groups:
            c = OTHER if g.kind == "other" else next(colors, OTHER)
            fig.add_trace(
                _trace(
                    p.dims,
                    pts[g.index],
                    name=plot_text(group_label(g)),
                    marker=_marker(p.dims, n, c, 0.8),
                    **_hover(p, g if color == "next_word" else None, g.index),
                )
            )
        lim = float(np.abs(p.coords).max()) * 1.05  # the same axes at every depth: the slider moves the points
    title = (
        t("projector.title_word", word=plot_text(p.word), depth=depth_label(depth), method=p.method.upper())
        if p.what == "word"
        else t("projector.title_sample", n=f"{n:,}", depth=depth_label(depth), method=p.method.upper())
    )
    axis = dict(range=[-lim, lim], zeroline=False, showticklabels=False)  # the coordinates have no units to read
    names = [t(f"projector.axis.{p.method}", n=i) for i in (1, 2, 3)]  # PC 1, UMAP 1, t-SNE 1, ...
    fig.update_layout(
        title=dict(text=title),
        height=HEIGHT,
        margin=dict(t=50, b=10, l=10, r=10),
        legend=dict(title=dict(text=t(f"projector.color_opt.{color}")), itemsizing="constant"),
        uirevision=f"{p.checkpoint}|{p.dims}",
    )  # keep the user's zoom when the depth changes
    if p.dims == 3:
        fig.update_layout(
            scene=dict(
                xaxis=dict(axis, title=dict(text=names[0])),
                yaxis=dict(axis, title=dict(text=names[1])),
                zaxis=dict(axis, title=dict(text=names[2])),
                aspectmode="cube",
            )
        )
    else:
        fig.update_layout(
            xaxis=dict(axis, title=dict(text=names[0])),
            yaxis=dict(axis, title=dict(text=names[1]), scaleanchor="x", scaleratio=1),
        )
    return fig


def separation_figure(p: Projection, depth: int) -> go.Figure:
    """Silhouette of the k-means clusters and next-word agreement per depth, the chance level dashed."""
    x = [depth_label(d) for d in p.depths]
    fig = go.Figure()
    fig.add_scatter(
        x=x,
        y=list(p.agreement),
        name=t("projector.agreement"),
        mode="lines+markers",
        line=dict(color="#4C78A8"),
        hovertemplate="%{x}: %{y:.1%}<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=[p.agreement_chance] * len(x),
        name=t("projector.chance"),
        mode="lines",
        line=dict(color="#4C78A8", dash="dot"),
        hovertemplate="%{y:.1%}<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=list(p.silhouette),
        name=t("projector.silhouette", n_clusters=p.k),
        mode="lines+markers",
        line=dict(color="#F58518"),
        hovertemplate="%{x}: %{y:.2f}<extra></extra>",
    )
    fig.add_vline(x=p.depths.index(depth), line=dict(color="#999", width=1, dash="dash"))
    fig.update_layout(
        title=t("projector.sep_title"),
        height=300,
        xaxis_title=t("projector.depth"),
        yaxis=dict(rangemode="tozero"),
        margin=dict(t=50, b=10),
        legend=dict(orientation="h", y=-0.35),
    )
    return fig


def show_projection(p: Projection) -> None:
    """Summary, notes, colour and depth pickers (no recompute: every depth is in ``p``), the map, the numbers."""
    what = (
        (
            t("projector.summary_word", word=as_text(p.word), n=f"{len(p):,}")
            if p.occurrences == len(p)
            else t("projector.summary_word_of", word=as_text(p.word), n=f"{len(p):,}", found=f"{p.occurrences:,}")
        )
        if p.what == "word"
        else t("projector.summary_sample", n=f"{len(p):,}")
    )
    st.caption(
        t(
            "projector.summary",
            what=what,
            sentences=f"{p.sentences_read:,}",
            n_clusters=p.k,
            method=p.method.upper(),
            seconds=f"{p.seconds:,.1f}",
        )
    )
    for note in p.notes:
        st.info(explain(note))
    if st.session_state.get(K("depth")) not in p.depths:  # an earlier map of another model had other depths
        st.session_state[K("depth")] = p.depths[-1]
    urlstate.relabel((K("color"), K("depth")))  # their labels are in the session's language
    c1, c2 = st.columns([1, 2])
    with c1:
        color = st.radio(
            t("projector.color"),
            ("next_word", "cluster", "layer"),
            key=K("color"),
            horizontal=True,
            format_func=lambda c: t(f"projector.color_opt.{c}"),
        )
    with c2:
        depth = st.select_slider(
            t("projector.depth"),
            options=list(p.depths),
            key=K("depth"),
            format_func=depth_label,
            help=t("projector.depth_help"),
        )
    if color == "layer" and p.joint is None:
        st.info(t("projector.need_joint"))
        color = "next_word"
    fig = map_figure(p, depth, color)
    st.plotly_chart(presenter.scale(fig), width="stretch", key=K("map"), config={"displaylogo": False})
    i = p.depths.index(depth)
    line = t(
        "projector.depth_line",
        depth=depth_label(depth),
        agree=f"{p.agreement[i]:.0%}",
        chance=f"{p.agreement_chance:.0%}",
        sil=f"{p.silhouette[i]:.2f}",
        n_clusters=p.k,
    )
    if p.explained is not None:
        line += " " + t("projector.explained", share=f"{p.explained[i]:.0%}", dims=p.dims)
    st.markdown(line)
    sep = separation_figure(p, depth)
    st.plotly_chart(presenter.scale(sep), width="stretch", key=K("sep"))
    report.record_view(
        "projector",
        t("nav.projector"),
        t("report.projector_title", what=what),
        {
            t("report.in.model"): p.checkpoint,
            t("report.in.corpus"): p.corpus,
            t("report.in.method"): p.method.upper(),
            t("report.in.depth"): depth_label(depth),
        },
        (p.checkpoint, p.what, p.word, p.corpus, p.method, p.dims, p.depths, len(p), depth, color),
        text=line,
        figures=[fig, sep],
        rows=[
            {
                t("report.col.depth"): depth_label(d),
                t("report.col.agreement"): f"{p.agreement[i]:.0%}",
                t("report.col.silhouette"): f"{p.silhouette[i]:.2f}",
            }
            for i, d in enumerate(p.depths)
        ],
    )
    st.caption(t("projector.sep_caption", n_clusters=p.k))

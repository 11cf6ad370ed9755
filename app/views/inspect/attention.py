"""Renderers for the Attention page: plotly figures from core.inspect.attention results, and the page's sections.

Token text reaches plotly only through ``safe()``: plotly reads a few HTML-like tags in labels and hover text,
so ``<``, ``>`` and ``&`` are written as entities and show as plain characters.

Every label comes from assets/i18n/attention.toml (``t("attention....")``). The widgets that define the view are
kept in the URL (app/kit/urlstate.py): ``option_fields()`` do not depend on the result; ``filter_fields(r)`` and
``focus_fields(...)`` do (token count, layers, heads), so the page binds them once the result is known, before
their widgets are drawn. Option widgets sit in ``presenter.settings()``: folded away in presenter view.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app.kit import presenter, state, urlstate
from app.views.inspect.bertviz_embed import build_view, fit_payload
from app.kit.i18n import t, t_or
from app.kit.render import as_text
from core.inspect import attention as A

PAGE = "attention"
GRID_CELL = 16  # a thumbnail is at most 16 x 16 (block-averaged)
STATS = ("entropy", "distance", "cls", "sep", "punct", "previous", "next", "self")  # labels: attention.stat.*
VIEW_KINDS = ("head", "model")
FORMATS = ("png", "svg")
DEFAULT_RANGE = 128  # tokens shown at first; the bertviz payload stays light


def K(name: str) -> str:
    return state.key(PAGE, name)


def option_labels(options, label):
    """A format_func whose labels are fixed now, in this run's language: AppTest formats options again after
    the run, where the session's language can no longer be read. An option not listed shows as itself."""
    table = {o: label(o) for o in options}
    return lambda o: table.get(o, str(o))


def stat_label(name: str) -> str:
    return t(f"attention.stat.{name}")


def pattern_label(name: str) -> str:
    return t_or(f"attention.pattern.{name}", A.PATTERNS.get(name, name))


# ---------------------------------------------------------------------------------------------- URL fields
@dataclass(frozen=True)
class RangeField(urlstate.Field):
    """A token range ``start,end`` (end excluded): two ints with lo <= start < end <= hi."""

    def parse(self, raw: str) -> tuple[int, int]:
        value = super().parse(raw)
        if len(value) != 2 or value[0] >= value[1]:
            raise ValueError(raw)
        return int(value[0]), int(value[1])


def option_fields() -> tuple[urlstate.Field, ...]:
    """View options that do not depend on the result: bound before anything is computed."""
    return (urlstate.Field(K("view"), choices=VIEW_KINDS), urlstate.Field(K("stat"), choices=STATS),
            urlstate.Field(K("pattern"), choices=tuple(A.PATTERNS)),
            urlstate.Field(K("threshold"), "float", lo=0.0, hi=1.0), urlstate.Field(K("fmt"), choices=FORMATS))


def filter_fields(r: A.AttentionResult) -> tuple[urlstate.Field, ...]:
    """Token range, layers and heads: their bounds are the result's (bind after reset_view_state)."""
    return (RangeField(K("range"), "ints", lo=0, hi=r.n_tokens),
            urlstate.Field(K("layers"), "ints", choices=tuple(range(r.n_layers))),
            urlstate.Field(K("heads"), "ints", choices=tuple(range(r.n_heads))))


def focus_fields(r: A.AttentionResult, lo: int, hi: int, layers: list[int],
                 heads: list[int]) -> tuple[urlstate.Field, ...]:
    """The focused head of each tab and the rollout options: their choices are the filters' values."""
    return (urlstate.Field(K("layer"), "int", choices=tuple(layers)),
            urlstate.Field(K("head"), "int", choices=tuple(heads)),
            urlstate.Field(K("qk.layer"), "int", choices=tuple(layers)),
            urlstate.Field(K("qk.head"), "int", choices=tuple(heads)),
            urlstate.Field(K("qk.token"), "int", choices=tuple(range(lo, hi))),
            urlstate.Field(K("mix.layer"), "int", choices=tuple(range(r.n_layers))),
            urlstate.Field(K("flow"), "bool"))


def settings_box(label: str, expanded: bool = False):
    """An expander of option widgets; in presenter view the settings expander itself (expanders do not nest)."""
    if presenter.is_on():
        return presenter.settings()
    return st.expander(label, expanded=expanded)


VIEW_KEYS = ("range", "layers", "heads", "layer", "head", "qk.layer", "qk.head", "qk.token", "mix.layer", "flow",
             "w.sel.words", "w.sel.tokens")


def reset_view_state() -> None:
    """Forget the view widgets' values (a new result may have other tokens, layers or heads)."""
    for name in VIEW_KEYS:
        st.session_state.pop(K(name), None)


def _keep(name: str, options: list) -> None:
    """Drop a widget's stored value when the filters no longer offer it (it falls back to the first option)."""
    if K(name) in st.session_state and st.session_state[K(name)] not in options:
        del st.session_state[K(name)]


def safe(text: str) -> str:
    """A token for a plotly label or hover: markup characters become entities, so they show as typed."""
    return html.escape(text, quote=False)


def dark_theme() -> bool:
    """The app's theme is dark. On a session's first run the browser has not reported it yet (type None):
    fall back to the configured base theme."""
    kind = getattr(getattr(st.context, "theme", None), "type", None)
    if kind is None:
        kind = st.get_option("theme.base")
    return kind == "dark"


def chart_config(name: str) -> dict:
    """Plotly config: the modebar camera downloads PNG or SVG, as chosen on the Export tab."""
    fmt = st.session_state.get(K("fmt"), "png")
    return {"displaylogo": False, "toImageButtonOptions": {"format": fmt, "filename": f"attention-{name}", "scale": 2}}


def show(fig: go.Figure, name: str, **kw):
    return st.plotly_chart(presenter.scale(fig), width="stretch", key=K("fig." + name), config=chart_config(name),
                           **kw)


# ---------------------------------------------------------------------------------------------- figures
def _ticks(labels: list[str], offset: int = 0) -> dict:
    step = max(1, math.ceil(len(labels) / 60))
    idx = list(range(0, len(labels), step))
    return dict(tickvals=[i + offset for i in idx], ticktext=[safe(labels[i]) for i in idx], tickfont=dict(size=10))


def heatmap(z: np.ndarray, rows: list[str], cols: list[str], title: str, offset: int = 0,
            zmax: float | None = None) -> go.Figure:
    """A token x token map; rows attend to columns. ``offset`` is the position of the first token shown."""
    if len(rows) * len(cols) <= 40_000:  # token names in the hover; past ~200 x 200 only positions (payload)
        hover = dict(text=[[f"{safe(r)} → {safe(c)}" for c in cols] for r in rows],
                     hovertemplate="%{text}<br>%{z:.3f}<extra></extra>")
    else:
        hover = dict(hovertemplate=t("attention.fig.hover_query_key"))
    fig = go.Figure(go.Heatmap(z=np.round(np.asarray(z, dtype=float), 4), x=list(range(offset, offset + len(cols))),
                               y=list(range(offset, offset + len(rows))), colorscale="Blues", zmin=0, zmax=zmax,
                               **hover))
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
    return np.array([[m[edges[i]:edges[i + 1], edges[j]:edges[j + 1]].mean() for j in range(size)]
                     for i in range(size)])


def thumbnail_grid(att: np.ndarray, focus: tuple[int, int]) -> go.Figure:
    """Every head as a small map (layer rows, head columns), one selectable marker per head."""
    n_layers, n_heads = att.shape[:2]
    s = min(att.shape[-1], GRID_CELL)
    step = s + 1
    z = np.full((n_layers * step, n_heads * step), np.nan)
    for layer in range(n_layers):
        for head in range(n_heads):
            thumb = pool(np.asarray(att[layer, head], dtype=float), s)
            z[layer * step:layer * step + s, head * step:head * step + s] = thumb / max(thumb.max(), 1e-9)
    fig = go.Figure(go.Heatmap(z=z, colorscale="Blues", showscale=False, hoverinfo="skip"))
    cx = [h * step + (s - 1) / 2 for _ in range(n_layers) for h in range(n_heads)]
    cy = [layer * step + (s - 1) / 2 for layer in range(n_layers) for _ in range(n_heads)]
    fig.add_scatter(x=cx, y=cy, mode="markers", marker=dict(size=28, symbol="square", color="rgba(0,0,0,0)"),
                    customdata=[[layer, h] for layer in range(n_layers) for h in range(n_heads)],
                    hovertemplate=t("attention.fig.hover_grid"), showlegend=False)
    fl, fh = focus
    fig.add_shape(type="rect", x0=fh * step - 0.8, x1=fh * step + s - 0.2, y0=fl * step - 0.8, y1=fl * step + s - 0.2,
                  line=dict(color="#e4572e", width=2))
    fig.update_xaxes(tickvals=[h * step + (s - 1) / 2 for h in range(n_heads)], ticktext=[str(h) for h in range(n_heads)],
                     title=t("attention.fig.head"), side="top", showgrid=False, zeroline=False)
    fig.update_yaxes(tickvals=[layer * step + (s - 1) / 2 for layer in range(n_layers)],
                     ticktext=[str(layer) for layer in range(n_layers)], title=t("attention.fig.layer"),
                     autorange="reversed",
                     showgrid=False, zeroline=False, scaleanchor="x")
    fig.update_layout(height=max(300, 26 * n_layers + 120), margin=dict(t=60, l=10, r=10, b=10), dragmode=False,
                      clickmode="event+select")
    return fig


def qk_figure(v: A.QKView, labels: list[str], query_label: str) -> go.Figure:
    """The query/key view: q, each k, q*k (whose rows sum to q.k) and the softmax weights."""
    n, d = v.keys.shape
    fig = make_subplots(rows=2, cols=3, row_heights=[0.06, 0.94], column_widths=[0.38, 0.38, 0.24],
                        specs=[[{"colspan": 2}, None, None], [{}, {}, {}]], vertical_spacing=0.07,
                        horizontal_spacing=0.04,
                        subplot_titles=(t("attention.fig.qk_query", token=safe(query_label)),
                                        t("attention.fig.qk_keys"), t("attention.fig.qk_product"),
                                        t("attention.fig.qk_softmax")))
    lim = float(np.abs(v.product).max()) or 1.0
    kl = float(np.abs(np.concatenate([v.keys.ravel(), v.query])).max()) or 1.0
    fig.add_heatmap(z=v.query[None, :], colorscale="RdBu", zmid=0, zmin=-kl, zmax=kl, showscale=False, row=1, col=1,
                    hovertemplate=t("attention.fig.hover_dim"))
    ys = list(range(n))
    hov = [safe(tok) for tok in labels]
    fig.add_heatmap(z=v.keys, y=ys, colorscale="RdBu", zmid=0, zmin=-kl, zmax=kl, showscale=False, row=2, col=1,
                    text=[[hov[i]] * d for i in ys], hovertemplate=t("attention.fig.hover_token_dim"))
    fig.add_heatmap(z=v.product, y=ys, colorscale="PiYG", zmid=0, zmin=-lim, zmax=lim, showscale=False, row=2, col=2,
                    text=[[hov[i]] * d for i in ys], hovertemplate=t("attention.fig.hover_token_dim"))
    fig.add_bar(x=v.weights, y=ys, orientation="h", row=2, col=3, marker_color="#4C78A8",
                customdata=np.stack([v.scores, v.weights], -1), text=hov, textposition="none",
                hovertemplate=t("attention.fig.hover_qk_weight"))
    tick = _ticks(list(labels))
    for col in (1, 2, 3):
        fig.update_yaxes(autorange="reversed", row=2, col=col, **(tick if col == 1 else {"showticklabels": False}))
    fig.update_yaxes(showticklabels=False, row=1, col=1)
    fig.update_layout(height=max(360, 16 * n + 140), showlegend=False, margin=dict(t=50, l=10, r=10, b=10))
    return fig


def stat_figures(stats: A.HeadStats, name: str) -> tuple[go.Figure, go.Figure]:
    """A statistic as a layer x head map and, Clark-style, as one dot per head along the layers."""
    z = getattr(stats, name)
    n_layers, n_heads = z.shape
    hm = go.Figure(go.Heatmap(z=z, colorscale="Viridis", hovertemplate=t("attention.fig.hover_layer_head"),
                              colorbar=dict(title="")))
    hm.update_xaxes(title=t("attention.fig.head"), dtick=1)
    hm.update_yaxes(title=t("attention.fig.layer"), autorange="reversed", dtick=1)
    hm.update_layout(title=stat_label(name), height=360, margin=dict(t=50, l=10, r=10, b=10))
    sc = go.Figure()
    for layer in range(n_layers):
        sc.add_scatter(x=[layer] * n_heads, y=z[layer], mode="markers", marker=dict(size=8, opacity=0.7),
                       customdata=list(range(n_heads)), showlegend=False,
                       hovertemplate=t("attention.fig.hover_layer_dot", layer=layer))
    sc.add_scatter(x=list(range(n_layers)), y=z.mean(1), mode="lines", name=t("attention.fig.mean"),
                   line=dict(color="#888888"))
    sc.update_xaxes(title=t("attention.fig.layer"), dtick=1)
    sc.update_layout(title=t("attention.fig.by_layer", stat=stat_label(name)), height=360,
                     margin=dict(t=50, l=10, r=10, b=10))
    return hm, sc


def relevance_bars(rows: dict[str, np.ndarray], labels: list[str]) -> go.Figure:
    fig = go.Figure()
    for name, values in rows.items():
        fig.add_bar(x=list(range(len(labels))), y=values, name=name, text=[safe(tok) for tok in labels],
                    textposition="none",
                    hovertemplate="%{text}: %{y:.3f}<extra>" + name + "</extra>")
    fig.update_xaxes(**_ticks(labels), tickangle=-60)
    fig.update_layout(barmode="group", title=t("attention.fig.relevance"), height=380,
                      margin=dict(t=50, l=10, r=10, b=10))
    return fig


def similarity_figure(sim: np.ndarray, title: str) -> go.Figure:
    fig = go.Figure(go.Heatmap(z=sim, zmin=-1, zmax=1, colorscale="RdBu", reversescale=True,
                               hovertemplate=t("attention.fig.hover_layer_vs")))
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
    fig.update_layout(title=t("attention.fig.mean_over_heads", stat=stat_label(name)), height=340,
                      margin=dict(t=50, l=10, r=10, b=10))
    return fig


# ---------------------------------------------------------------------------------------------- sections
@st.cache_data(max_entries=6, show_spinner=False)
def cached_view(kind: str, att: np.ndarray, labels: tuple[str, ...], b_start: int | None, layers: tuple[int, ...],
                heads: tuple[int, ...], dark: bool, title: str = "Attention"):
    return build_view(kind, att, list(labels), b_start, list(layers), list(heads), dark=dark, title=title)


@st.cache_data(max_entries=8, show_spinner=False)
def cached_flow(att: np.ndarray, rows: tuple[int, ...] | None) -> np.ndarray:
    return A.flow(att, rows=None if rows is None else list(rows))


def filters(r: A.AttentionResult) -> tuple[int, int, list[int], list[int]] | None:
    """Token range, layers and heads (bound to the URL, then drawn in the settings); None when nothing is picked."""
    urlstate.bind(filter_fields(r))
    st.session_state.setdefault(K("range"), (0, min(r.n_tokens, DEFAULT_RANGE)))
    st.session_state.setdefault(K("layers"), list(range(r.n_layers)))
    st.session_state.setdefault(K("heads"), list(range(r.n_heads)))
    with settings_box(t("attention.filters"), expanded=r.n_tokens > DEFAULT_RANGE):
        if r.n_tokens > 1:
            lo, hi = st.slider(t("attention.range"), 0, r.n_tokens, key=K("range"), help=t("attention.range_help"))
        else:
            lo, hi = 0, 1
        layers = st.multiselect(t("attention.layers"), list(range(r.n_layers)), key=K("layers"))
        heads = st.multiselect(t("attention.heads"), list(range(r.n_heads)), key=K("heads"))
    if hi - lo < 1:
        lo, hi = (hi - 1, hi) if hi > 0 else (0, 1)
    if not layers or not heads:
        st.warning(t("attention.pick_layer_head"))
        return None
    return lo, hi, layers, heads


def bind_focus(r: A.AttentionResult, lo: int, hi: int, layers: list[int], heads: list[int]) -> None:
    """The tabs' own pickers, from the URL (their choices are the filters' values), with their defaults."""
    urlstate.bind(focus_fields(r, lo, hi, layers, heads))
    st.session_state.setdefault(K("mix.layer"), r.n_layers - 1)


def bertviz_section(r: A.AttentionResult, lo: int, hi: int, layers: list[int], heads: list[int]) -> None:
    st.session_state.setdefault(K("view"), "head")
    kind = st.segmented_control(t("attention.view"), list(VIEW_KINDS), key=K("view"), required=True,
                                format_func=option_labels(VIEW_KINDS, lambda k: t(f"attention.view_kind.{k}")))
    kind = kind or "head"
    b = r.sentence_b_start if r.sentence_b_start is not None and lo < r.sentence_b_start < hi else None
    shipped, heads_shipped = fit_payload(layers, heads, hi - lo, b is not None)
    cut = []
    if len(shipped) < len(layers):
        cut.append(t("attention.cut_layers", shown=", ".join(map(str, shipped)), n=len(layers)))
    if len(heads_shipped) < len(heads):
        cut.append(t("attention.cut_heads", shown=", ".join(map(str, heads_shipped)), n=len(heads)))
    if cut:
        st.info(t("attention.cut", n=hi - lo, what=t("attention.and").join(cut)))
    sub = r.attentions[:, :, lo:hi, lo:hi]
    with st.spinner(t("attention.building_view")):
        view = cached_view(kind, sub, tuple(r.labels[lo:hi]), None if b is None else b - lo, tuple(shipped),
                           tuple(heads_shipped), dark_theme(), t("attention.view_title"))
    st.iframe(view.html, height=view.height, alt=f"bertviz {kind} view")  # i18n: ok (the iframe's title, not shown)
    rows = t("attention.view_rows_cut") if (lo, hi) != (0, r.n_tokens) else t("attention.view_all_tokens")
    st.caption(t("attention.view_caption", kind=t(f"attention.view_kind.{kind}"), mb=f"{view.size_bytes / 1e6:.2f}",
                 rows=rows))
    st.download_button(t("attention.download_view"), lambda: view.html.encode("utf-8"),
                       file_name=f"attention-{kind}-view.html", mime="text/html", key=K("dl.html"))


def focus_from_grid() -> None:
    """on_select callback of the thumbnail grid: focus the clicked head."""
    sel = st.session_state.get(K("fig.grid"))
    points = (sel or {}).get("selection", {}).get("points", []) if sel else []
    for p in points:
        cd = p.get("customdata")
        if cd is not None and len(cd) == 2:
            st.session_state[K("layer")], st.session_state[K("head")] = int(cd[0]), int(cd[1])
            return


def heatmap_section(r: A.AttentionResult, lo: int, hi: int, layers: list[int], heads: list[int]) -> go.Figure:
    """The focused head's map and the grid of every head; returns the focused map (for the report)."""
    _keep("layer", layers)
    _keep("head", heads)
    with presenter.settings():
        c1, c2, _ = st.columns([1, 1, 3])
        layer = c1.selectbox(t("attention.layer"), layers, key=K("layer"))
        head = c2.selectbox(t("attention.head"), heads, key=K("head"))
    labels = list(r.labels[lo:hi])
    focused = heatmap(r.attentions[layer, head, lo:hi, lo:hi], labels, labels,
                      t("attention.fig.head_title", layer=layer, head=head), lo)
    show(focused, "heatmap")
    st.markdown(t("attention.all_heads"))
    sub = r.attentions[:, :, lo:hi, lo:hi][np.ix_(layers, heads)]
    fig = thumbnail_grid(sub, (layers.index(layer), heads.index(head)))
    fig.update_xaxes(ticktext=[str(h) for h in heads])
    fig.update_yaxes(ticktext=[str(x) for x in layers])
    fig.data[1].customdata = [[layers[i], heads[j]] for i in range(len(layers)) for j in range(len(heads))]
    show(fig, "grid", on_select=focus_from_grid, selection_mode="points")
    return focused


def qk_section(r: A.AttentionResult, lo: int, hi: int, layers: list[int], heads: list[int]) -> None:
    if r.queries is None or r.keys is None:
        st.warning(r.qk_note or t("attention.no_qk"))
        return
    st.caption(t("attention.qk_intro"))
    for name, opts in (("qk.layer", layers), ("qk.head", heads), ("qk.token", list(range(lo, hi)))):
        _keep(name, opts)
    left, right = st.columns([1, 1])
    with left, presenter.settings():
        c1, c2 = st.columns(2)
        layer = c1.selectbox(t("attention.layer"), layers, key=K("qk.layer"))
        head = c2.selectbox(t("attention.head"), heads, key=K("qk.head"))
    q = right.selectbox(t("attention.query_token"), list(range(lo, hi)), key=K("qk.token"),
                     format_func=lambda i: f"{i}: {r.labels[i]}")
    v = A.qk_view(r.queries, r.keys, layer, head, q)
    keys = A.QKView(query=v.query, keys=v.keys[lo:hi], product=v.product[lo:hi], scores=v.scores[lo:hi],
                    weights=v.weights[lo:hi])
    show(qk_figure(keys, list(r.labels[lo:hi]), r.labels[q]), "qk")


def stats_section(r: A.AttentionResult, stats: A.HeadStats) -> go.Figure:
    """Head statistics and the pattern finder; returns the statistic's layer x head map (for the report)."""
    st.caption(t("attention.stats_intro"))
    with presenter.settings():
        name = st.selectbox(t("attention.statistic"), list(STATS), key=K("stat"),
                            format_func=option_labels(STATS, stat_label))
    hm, sc = stat_figures(stats, name)
    c1, c2 = st.columns(2)
    with c1:
        show(hm, "stat.map")
    with c2:
        show(sc, "stat.layers")
    st.markdown(t("attention.find_heads"))
    st.session_state.setdefault(K("threshold"), 0.5)
    with presenter.settings():
        c1, c2 = st.columns([2, 2])
        pattern = c1.selectbox(t("attention.pattern_pick"), list(A.PATTERNS), key=K("pattern"),
                               format_func=option_labels(A.PATTERNS, pattern_label))
        thr = c2.slider(t("attention.threshold"), 0.0, 1.0, step=0.05, key=K("threshold"),
                        help=t("attention.threshold_help"))
    hits = A.find_heads(stats, pattern, thr)
    if not hits:
        best = stats.share(pattern)
        bl, bh = np.unravel_index(int(np.argmax(best)), best.shape)
        st.info(t("attention.no_hits", thr=f"{thr:.2f}", layer=bl, head=bh, score=f"{best[bl, bh]:.2f}"))
        return hm
    cols = (t("attention.col.layer"), t("attention.col.head"), t("attention.col.score"))
    st.dataframe([dict(zip(cols, (m.layer, m.head, round(m.score, 3)))) for m in hits], hide_index=True,
                 key=K("hits"), height=min(400, 35 * len(hits) + 40))
    return hm


def mixing_section(r: A.AttentionResult, lo: int, hi: int) -> None:
    st.caption(t("attention.mix_intro"))
    labels = list(r.labels[lo:hi])
    st.session_state.setdefault(K("mix.layer"), r.n_layers - 1)
    with presenter.settings():
        layer = st.selectbox(t("attention.mix_layer"), list(range(r.n_layers)), key=K("mix.layer"))
    raw = r.attentions[layer].astype(np.float64).mean(0)
    roll = A.rollout(r.attentions)
    c1, c2 = st.columns(2)
    with c1:
        show(heatmap(raw[lo:hi, lo:hi], labels, labels, t("attention.fig.raw", layer=layer), lo), "raw")
    with c2:
        show(heatmap(roll[lo:hi, lo:hi], labels, labels, t("attention.fig.rollout"), lo), "rollout")
    cls = r.cls_index
    bars = {t("attention.fig.raw_bar", layer=layer): A.relevance(raw, cls),
            t("attention.fig.rollout_bar"): A.relevance(roll, cls)}
    full = (lo, hi) == (0, r.n_tokens)
    n = r.n_tokens if full else hi - lo
    if n > A.FLOW_MAX_TOKENS:
        st.info(t("attention.flow_limit", max=A.FLOW_MAX_TOKENS, n=r.n_tokens))
    elif st.toggle(t("attention.flow") if full else t("attention.flow_range", lo=lo, last=hi - 1), key=K("flow")):
        att = r.attentions if full else A.restrict(r.attentions, lo, hi)
        cls_local = cls - lo
        fl = None
        with st.spinner(t("attention.solving_flow")):
            if n <= A.FLOW_MAP_MAX_TOKENS:
                fl = cached_flow(att, None)
                show(heatmap(fl, labels, labels, t("attention.fig.flow"), lo), "flow")
            elif 0 <= cls_local < n:
                fl = cached_flow(att, (cls_local,))
                st.caption(t("attention.flow_map_limit", max=A.FLOW_MAP_MAX_TOKENS))
        if fl is not None and 0 <= cls_local < n:
            name = t("attention.fig.flow_bar")
            bars[name] = np.full(r.n_tokens, np.nan)
            bars[name][lo:hi] = A.relevance(fl, cls_local)
        if not full:
            st.caption(t("attention.flow_range_note"))
    show(relevance_bars({k: np.asarray(v)[lo:hi] for k, v in bars.items()}, labels), "relevance")


WORD_LEVELS = ("words", "tokens")
MEAN_HEADS = -1  # the head picker's "mean of the heads" option


def selection_bars(values: np.ndarray, labels: list[str], title: str, picked: list[int]) -> go.Figure:
    """One bar per token (or word): the selection's attention; the selected ones in another colour."""
    colors = ["#E45756" if i in picked else "#4C78A8" for i in range(len(labels))]
    fig = go.Figure(go.Bar(x=list(range(len(labels))), y=np.round(np.asarray(values, dtype=float), 4),
                           marker_color=colors, text=[safe(x) for x in labels], textposition="none",
                           hovertemplate="%{text}: %{y:.3f}<extra></extra>"))
    fig.update_xaxes(**_ticks(labels), tickangle=-60)
    longest = max((len(x) for x in labels), default=1)
    fig.update_layout(title=title, height=360 + 6 * min(longest, 30), margin=dict(t=50, l=10, r=10, b=10))
    return fig


@st.cache_data(max_entries=8, show_spinner=False)
def cached_word_groups(_tokenizer, checkpoint: str, config: A.AttentionConfig):
    """core.inspect.attention_views.word_groups for one model (named by ``checkpoint``; the tokenizer is not hashed)."""
    from core.inspect.attention_views import word_groups

    return word_groups(_tokenizer, config)


def words_section(r: A.AttentionResult, config: A.AttentionConfig, tokenizer) -> None:
    """Word-level attention (pieces merged) and the attention of several tokens or words at once."""
    from core.inspect.attention_views import DIRECTIONS, HOW, SelectionConfig, selection_attention, word_attention

    st.caption(t("attention.w.intro"))
    st.session_state.setdefault(K("w.level"), "words")
    st.session_state.setdefault(K("w.how"), "mean")
    _keep("w.layer", list(range(r.n_layers)))
    _keep("w.head", [MEAN_HEADS, *range(r.n_heads)])
    with presenter.settings():
        c1, c2, c3 = st.columns([2, 1, 1])
        level = c1.segmented_control(t("attention.w.level"), list(WORD_LEVELS), key=K("w.level"), required=True,
                                     format_func=option_labels(WORD_LEVELS, lambda x: t(f"attention.w.level_opt.{x}")))
        layer = c2.selectbox(t("attention.layer"), list(range(r.n_layers)), key=K("w.layer"))
        head = c3.selectbox(t("attention.head"), [MEAN_HEADS, *range(r.n_heads)], key=K("w.head"),
                            format_func=option_labels([MEAN_HEADS], lambda _: t("attention.w.mean_heads")))
    level = level or "words"
    a = r.attentions[layer].astype(np.float64)  # (heads, seq, seq)
    a = (a.mean(0) if head == MEAN_HEADS else a[head])[None, None]  # (1, 1, seq, seq)
    which = t("attention.w.mean_heads_title", layer=layer) if head == MEAN_HEADS else \
        t("attention.fig.head_title", layer=layer, head=head)
    if level == "words":
        try:
            g = cached_word_groups(tokenizer, r.checkpoint, config)
            m = word_attention(a, g)[0, 0]
        except ValueError as e:  # a slow tokenizer (no word ids), or groups of another text
            st.error(str(e))
            return
        labels = list(g.words)
        merged = [i for i in g.merged()]
        if merged:
            shown = ", ".join(f"{g.words[i]} ({len(g.groups[i])})" for i in merged[:12])
            st.caption(t("attention.w.merged", words=g.n_words, tokens=g.n_tokens, n=len(merged),
                         shown=as_text(shown) + (" …" if len(merged) > 12 else "")))
        else:
            st.caption(t("attention.w.none_merged", n=g.n_tokens))
        title = t("attention.w.word_title", which=which)
    else:
        m = a[0, 0]
        labels = list(r.labels)
        title = t("attention.w.token_title", which=which)
    fig = heatmap(m, labels, labels, title)
    longest = max((len(x) for x in labels), default=1)
    fig.update_xaxes(side="bottom")  # long words rotated above the map would run into the title
    fig.update_layout(height=fig.layout.height + 6 * min(longest, 30) - 50, margin=dict(t=50, l=10, r=10, b=10))
    show(fig, f"w.map.{level}")
    st.markdown(t("attention.w.select_intro"))
    sel_key = K(f"w.sel.{level}")
    if any(i not in range(len(labels)) for i in st.session_state.get(sel_key) or ()):
        st.session_state.pop(sel_key, None)
    with presenter.settings():
        c1, c2, c3 = st.columns([3, 1, 1])
        picked = c1.multiselect(t("attention.w.select"), list(range(len(labels))), key=sel_key,
                                format_func=lambda i: f"{i}: {labels[i]}", placeholder=t("attention.w.select_ph"))
        how = c2.radio(t("attention.w.how"), list(HOW), key=K("w.how"), format_func=option_labels(
            HOW, lambda x: t(f"attention.w.how_opt.{x}")))
        direction = c3.radio(t("attention.w.direction"), list(DIRECTIONS), key=K("w.direction"),
                             format_func=option_labels(DIRECTIONS, lambda x: t(f"attention.w.direction_opt.{x}")))
    if not picked:
        st.info(t("attention.w.pick"))
        return
    vec = selection_attention(m[None, None], SelectionConfig(tuple(picked), how, direction))[0, 0]
    names = ", ".join(labels[i] for i in sorted(picked))
    show(selection_bars(vec, labels, t(f"attention.w.sel_title.{direction}.{how}", which=which,
                                       sel=safe(names if len(names) <= 60 else names[:59] + "…")), sorted(picked)),
         f"w.sel.{level}")
    st.caption(t(f"attention.w.sel_caption.{direction}.{how}", n=len(picked)))


def export_section(r: A.AttentionResult) -> None:
    with presenter.settings():
        st.radio(t("attention.fmt"), list(FORMATS), key=K("fmt"), horizontal=True)
    st.download_button(t("attention.download_npz"), lambda: A.to_npz(r), file_name="attention.npz",
                       mime="application/octet-stream", key=K("dl.npz"))
    st.caption(t("attention.npz_caption", shape=str(r.attentions.shape)))


def compare_options() -> list[tuple[str, str]]:
    """(family, checkpoint) pairs to compare against: every bundled model, this session's, the official ones."""
    from core.registry import FAMILIES, bundled_families, bundled_id

    opts = [(f.key, bundled_id(f.key)) for f in bundled_families()]
    opts += [(m.family, m.path) for m in state.session_models()]
    opts += [(c.family, c.id) for f in FAMILIES.values() for c in f.checkpoints]
    return opts


def compare_picker(r: A.AttentionResult) -> tuple[tuple[str, str], bool]:
    """The model to compare with (by default one whose layers differ in kind: shared against not shared) and
    whether Compare was pressed."""
    from core.registry import family

    st.caption(t("attention.compare_intro"))
    opts = [o for o in compare_options() if o != (r.family, r.checkpoint)]
    shared = family(r.family).shared_layers
    default = next((i for i, o in enumerate(opts) if family(o[0]).shared_layers != shared), 0)
    c1, c2 = st.columns([3, 1])
    choice = c1.selectbox(t("attention.compare_with"), opts, index=default, key=K("cmp.model"),
                          format_func=lambda o: f"{family(o[0]).label} · {o[1]}")
    return choice, c2.button(t("attention.compare"), key=K("cmp.run"), type="primary")


def compare_view(sides: tuple[A.ModelAttention, A.ModelAttention]) -> None:
    """Two models' layer similarity and per-layer head statistics, side by side."""
    cols = st.columns(2)
    for i, (col, side) in enumerate(zip(cols, sides)):
        res = side.result
        with col:
            st.metric(t("attention.next_layer_corr", model=side.label), f"{side.adjacent:.3f}",
                      help=t("attention.model_shape", layers=res.n_layers, heads=res.n_heads, n=res.n_tokens))
            show(similarity_figure(side.similarity, side.label), "cmp.sim" + ("" if i == 0 else ".other"))
    with presenter.settings():
        name = st.selectbox(t("attention.stat_per_layer"), list(STATS), key=K("cmp.stat"),
                            format_func=option_labels(STATS, stat_label))
    show(per_layer_lines({side.label: side.stats for side in sides}, name), "cmp.lines")


def record(r: A.AttentionResult, config: A.AttentionConfig, lo: int, hi: int, heatmap_fig: go.Figure,
           stats_fig: go.Figure) -> None:
    """This result in the session report (one entry per model and text; redrawing replaces it)."""
    import hashlib

    from app.kit import report

    digest = hashlib.sha1(repr((r.checkpoint, config.text, config.pair, config.text_b)).encode()).hexdigest()[:12]
    inputs = {t("attention.report.model"): r.checkpoint, t("attention.report.text"): config.text}
    if config.pair:
        inputs[t("attention.report.text_b")] = config.text_b
    inputs[t("attention.report.tokens")] = f"{lo}–{hi - 1}"
    inputs[t("attention.report.focus")] = t("attention.fig.head_title", layer=st.session_state.get(K("layer")),
                                            head=st.session_state.get(K("head")))
    report.record(f"attention:{digest}", page=t("nav.attention"), title=t("attention.report.title"), inputs=inputs,
                  text=t("attention.summary", n=r.n_tokens, layers=r.n_layers, heads=r.n_heads, max=r.max_tokens),
                  figures=[heatmap_fig, stats_fig])

"""Renderers for the Attention page: plotly figures from core.attention results, and the page's sections.

Token text reaches plotly only through ``safe()``: plotly reads a few HTML-like tags in labels and hover text,
so ``<``, ``>`` and ``&`` are written as entities and show as plain characters.
"""
from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app import state
from app.bertviz_embed import build_view, fit_payload
from core import attention as A

PAGE = "attention"
GRID_CELL = 16  # a thumbnail is at most 16 x 16 (block-averaged)
STAT_LABELS = {"entropy": "entropy (bits)", "distance": "mean attention distance (tokens)", "cls": "share on [CLS]",
               "sep": "share on [SEP]", "punct": "share on punctuation", "previous": "share on the previous token",
               "next": "share on the next token", "self": "share on the token itself"}


def K(name: str) -> str:
    return state.key(PAGE, name)


VIEW_KEYS = ("range", "layers", "heads", "layer", "head", "qk.layer", "qk.head", "qk.token", "mix.layer", "flow")


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
    return st.plotly_chart(fig, width="stretch", key=K("fig." + name), config=chart_config(name), **kw)


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
        hover = dict(hovertemplate="query %{y} → key %{x}<br>%{z:.3f}<extra></extra>")
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
            t = pool(np.asarray(att[layer, head], dtype=float), s)
            z[layer * step:layer * step + s, head * step:head * step + s] = t / max(t.max(), 1e-9)
    fig = go.Figure(go.Heatmap(z=z, colorscale="Blues", showscale=False, hoverinfo="skip"))
    cx = [h * step + (s - 1) / 2 for _ in range(n_layers) for h in range(n_heads)]
    cy = [layer * step + (s - 1) / 2 for layer in range(n_layers) for _ in range(n_heads)]
    fig.add_scatter(x=cx, y=cy, mode="markers", marker=dict(size=28, symbol="square", color="rgba(0,0,0,0)"),
                    customdata=[[layer, h] for layer in range(n_layers) for h in range(n_heads)],
                    hovertemplate="layer %{customdata[0]}, head %{customdata[1]}<extra></extra>", showlegend=False)
    fl, fh = focus
    fig.add_shape(type="rect", x0=fh * step - 0.8, x1=fh * step + s - 0.2, y0=fl * step - 0.8, y1=fl * step + s - 0.2,
                  line=dict(color="#e4572e", width=2))
    fig.update_xaxes(tickvals=[h * step + (s - 1) / 2 for h in range(n_heads)], ticktext=[str(h) for h in range(n_heads)],
                     title="head", side="top", showgrid=False, zeroline=False)
    fig.update_yaxes(tickvals=[layer * step + (s - 1) / 2 for layer in range(n_layers)],
                     ticktext=[str(layer) for layer in range(n_layers)], title="layer", autorange="reversed",
                     showgrid=False, zeroline=False, scaleanchor="x")
    fig.update_layout(height=max(300, 26 * n_layers + 120), margin=dict(t=60, l=10, r=10, b=10), dragmode=False,
                      clickmode="event+select")
    return fig


def qk_figure(v: A.QKView, labels: list[str], query_label: str) -> go.Figure:
    """The query/key view: q, each k, q*k (whose rows sum to q.k) and the softmax weights."""
    n, d = v.keys.shape
    fig = make_subplots(rows=2, cols=3, row_heights=[0.06, 0.94], column_widths=[0.38, 0.38, 0.24],
                        specs=[[{"colspan": 2}, None, None], [{}, {}, {}]], vertical_spacing=0.07,
                        horizontal_spacing=0.04, subplot_titles=(f"query q of {safe(query_label)}", "keys k",
                                                                 "q × k (elementwise)", "softmax(q·k/√d)"))
    lim = float(np.abs(v.product).max()) or 1.0
    kl = float(np.abs(np.concatenate([v.keys.ravel(), v.query])).max()) or 1.0
    fig.add_heatmap(z=v.query[None, :], colorscale="RdBu", zmid=0, zmin=-kl, zmax=kl, showscale=False, row=1, col=1,
                    hovertemplate="dim %{x}: %{z:.3f}<extra></extra>")
    ys = list(range(n))
    hov = [safe(t) for t in labels]
    fig.add_heatmap(z=v.keys, y=ys, colorscale="RdBu", zmid=0, zmin=-kl, zmax=kl, showscale=False, row=2, col=1,
                    text=[[hov[i]] * d for i in ys], hovertemplate="%{text} dim %{x}: %{z:.3f}<extra></extra>")
    fig.add_heatmap(z=v.product, y=ys, colorscale="PiYG", zmid=0, zmin=-lim, zmax=lim, showscale=False, row=2, col=2,
                    text=[[hov[i]] * d for i in ys], hovertemplate="%{text} dim %{x}: %{z:.3f}<extra></extra>")
    fig.add_bar(x=v.weights, y=ys, orientation="h", row=2, col=3, marker_color="#4C78A8",
                customdata=np.stack([v.scores, v.weights], -1), text=hov, textposition="none",
                hovertemplate="%{text}<br>q·k/√d = %{customdata[0]:.3f}<br>weight %{customdata[1]:.3f}<extra></extra>")
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
    hm = go.Figure(go.Heatmap(z=z, colorscale="Viridis", hovertemplate="layer %{y}, head %{x}: %{z:.3f}<extra></extra>",
                              colorbar=dict(title="")))
    hm.update_xaxes(title="head", dtick=1)
    hm.update_yaxes(title="layer", autorange="reversed", dtick=1)
    hm.update_layout(title=STAT_LABELS[name], height=360, margin=dict(t=50, l=10, r=10, b=10))
    sc = go.Figure()
    for layer in range(n_layers):
        sc.add_scatter(x=[layer] * n_heads, y=z[layer], mode="markers", marker=dict(size=8, opacity=0.7),
                       customdata=list(range(n_heads)), showlegend=False,
                       hovertemplate=f"layer {layer}, head %{{customdata}}: %{{y:.3f}}<extra></extra>")
    sc.add_scatter(x=list(range(n_layers)), y=z.mean(1), mode="lines", name="mean", line=dict(color="#888888"))
    sc.update_xaxes(title="layer", dtick=1)
    sc.update_layout(title=f"{STAT_LABELS[name]} by layer", height=360, margin=dict(t=50, l=10, r=10, b=10))
    return hm, sc


def relevance_bars(rows: dict[str, np.ndarray], labels: list[str]) -> go.Figure:
    fig = go.Figure()
    for name, values in rows.items():
        fig.add_bar(x=list(range(len(labels))), y=values, name=name, text=[safe(t) for t in labels], textposition="none",
                    hovertemplate="%{text}: %{y:.3f}<extra>" + name + "</extra>")
    fig.update_xaxes(**_ticks(labels), tickangle=-60)
    fig.update_layout(barmode="group", title="relevance to [CLS] (each row sums to 1)", height=380,
                      margin=dict(t=50, l=10, r=10, b=10))
    return fig


def similarity_figure(sim: np.ndarray, title: str) -> go.Figure:
    fig = go.Figure(go.Heatmap(z=sim, zmin=-1, zmax=1, colorscale="RdBu", reversescale=True,
                               hovertemplate="layer %{y} vs %{x}: %{z:.3f}<extra></extra>"))
    fig.update_xaxes(title="layer", dtick=1)
    fig.update_yaxes(title="layer", autorange="reversed", dtick=1)
    fig.update_layout(title=safe(title), height=380, margin=dict(t=50, l=10, r=10, b=10))
    return fig


def per_layer_lines(results: dict[str, A.HeadStats], name: str) -> go.Figure:
    fig = go.Figure()
    for label, s in results.items():
        z = getattr(s, name)
        fig.add_scatter(x=list(range(z.shape[0])), y=z.mean(1), mode="lines+markers", name=safe(label))
    fig.update_xaxes(title="layer", dtick=1)
    fig.update_layout(title=f"{STAT_LABELS[name]}, mean over heads", height=340, margin=dict(t=50, l=10, r=10, b=10))
    return fig


# ---------------------------------------------------------------------------------------------- sections
@st.cache_data(max_entries=6, show_spinner=False)
def cached_view(kind: str, att: np.ndarray, labels: tuple[str, ...], b_start: int | None, layers: tuple[int, ...],
                heads: tuple[int, ...], dark: bool):
    return build_view(kind, att, list(labels), b_start, list(layers), list(heads), dark=dark)


@st.cache_data(max_entries=8, show_spinner=False)
def cached_flow(att: np.ndarray, rows: tuple[int, ...] | None) -> np.ndarray:
    return A.flow(att, rows=None if rows is None else list(rows))


def bertviz_section(r: A.AttentionResult, lo: int, hi: int, layers: list[int], heads: list[int]) -> None:
    kind = st.segmented_control("View", ["head", "model"], key=K("view"), default="head", required=True,
                                format_func=lambda k: {"head": "Head view", "model": "Model view"}[k])
    b = r.sentence_b_start if r.sentence_b_start is not None and lo < r.sentence_b_start < hi else None
    shipped, heads_shipped = fit_payload(layers, heads, hi - lo, b is not None)
    cut = []
    if len(shipped) < len(layers):
        cut.append(f"layer(s) {', '.join(map(str, shipped))} of the {len(layers)} picked")
    if len(heads_shipped) < len(heads):
        cut.append(f"head(s) {', '.join(map(str, heads_shipped))} of the {len(heads)} picked")
    if cut:
        st.info(f"To keep the page light ({hi - lo}² weights per head), the view holds {' and '.join(cut)}. Pick "
                "fewer layers or heads, or a shorter token range, to see the others.")
    sub = r.attentions[:, :, lo:hi, lo:hi]
    with st.spinner("Building the view …"):
        view = cached_view(kind, sub, tuple(r.labels[lo:hi]), None if b is None else b - lo, tuple(shipped),
                           tuple(heads_shipped), dark_theme())
    st.iframe(view.html, height=view.height, alt=f"bertviz {kind} view")
    st.caption(f"bertviz {kind} view, offline (vendored d3/jQuery/require.js inlined) · {view.size_bytes / 1e6:.2f} MB "
               "· weights rounded to 3 decimals · " + ("rows are cut to the token range, so they may sum to < 1"
                                                         if (lo, hi) != (0, r.n_tokens) else "all tokens"))
    st.download_button("Download this view as standalone HTML", lambda: view.html.encode("utf-8"),
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


def heatmap_section(r: A.AttentionResult, lo: int, hi: int, layers: list[int], heads: list[int]) -> None:
    _keep("layer", layers)
    _keep("head", heads)
    c1, c2, _ = st.columns([1, 1, 3])
    layer = c1.selectbox("Layer", layers, key=K("layer"))
    head = c2.selectbox("Head", heads, key=K("head"))
    labels = list(r.labels[lo:hi])
    show(heatmap(r.attentions[layer, head, lo:hi, lo:hi], labels, labels, f"layer {layer}, head {head}", lo),
         "heatmap")
    st.markdown("**All heads** — click a thumbnail to focus that head (each is scaled to its own maximum).")
    sub = r.attentions[:, :, lo:hi, lo:hi][np.ix_(layers, heads)]
    fig = thumbnail_grid(sub, (layers.index(layer), heads.index(head)))
    fig.update_xaxes(ticktext=[str(h) for h in heads])
    fig.update_yaxes(ticktext=[str(x) for x in layers])
    fig.data[1].customdata = [[layers[i], heads[j]] for i in range(len(layers)) for j in range(len(heads))]
    show(fig, "grid", on_select=focus_from_grid, selection_mode="points")


def qk_section(r: A.AttentionResult, lo: int, hi: int, layers: list[int], heads: list[int]) -> None:
    if r.queries is None or r.keys is None:
        st.warning(r.qk_note or "q and k were not captured for this run.")
        return
    st.caption("Where one head's weights come from: the query of one token against every key. Each row of q × k "
               "sums to q·k; scaled by 1/√d and softmaxed, it gives the head's attention (it matches the model's).")
    for name, opts in (("qk.layer", layers), ("qk.head", heads), ("qk.token", list(range(lo, hi)))):
        _keep(name, opts)
    c1, c2, c3 = st.columns([1, 1, 2])
    layer = c1.selectbox("Layer", layers, key=K("qk.layer"))
    head = c2.selectbox("Head", heads, key=K("qk.head"))
    q = c3.selectbox("Query token", list(range(lo, hi)), key=K("qk.token"),
                     format_func=lambda i: f"{i}: {r.labels[i]}")
    v = A.qk_view(r.queries, r.keys, layer, head, q)
    keys = A.QKView(query=v.query, keys=v.keys[lo:hi], product=v.product[lo:hi], scores=v.scores[lo:hi],
                    weights=v.weights[lo:hi])
    show(qk_figure(keys, list(r.labels[lo:hi]), r.labels[q]), "qk")


def stats_section(r: A.AttentionResult, stats: A.HeadStats) -> None:
    st.caption("Statistics over all tokens of the text, per head (Clark et al. 2019, 'What does BERT look at?').")
    name = st.selectbox("Statistic", list(STAT_LABELS), key=K("stat"), format_func=STAT_LABELS.get)
    hm, sc = stat_figures(stats, name)
    c1, c2 = st.columns(2)
    with c1:
        show(hm, "stat.map")
    with c2:
        show(sc, "stat.layers")
    st.markdown("**Find heads by pattern**")
    c1, c2 = st.columns([2, 2])
    pattern = c1.selectbox("Heads that …", list(A.PATTERNS), key=K("pattern"), format_func=A.PATTERNS.get)
    thr = c2.slider("Minimum score", 0.0, 1.0, 0.5, 0.05, key=K("threshold"),
                    help="Share of each query's attention (for 'broad': entropy / log2(tokens)).")
    hits = A.find_heads(stats, pattern, thr)
    if not hits:
        best = stats.share(pattern)
        bl, bh = np.unravel_index(int(np.argmax(best)), best.shape)
        st.info(f"No head scores ≥ {thr:.2f}. The best is layer {bl}, head {bh} with {best[bl, bh]:.2f}.")
        return
    st.dataframe([{"layer": m.layer, "head": m.head, "score": round(m.score, 3)} for m in hits], hide_index=True,
                 key=K("hits"), height=min(400, 35 * len(hits) + 40))


def mixing_section(r: A.AttentionResult, lo: int, hi: int) -> None:
    st.caption("Abnar & Zuidema 2020. Both add the residual connection (0.5·A + 0.5·I per layer, heads averaged). "
               "Rollout multiplies the layers; flow treats them as a network of pipes and solves a max-flow problem "
               "per token pair, so it is limited by length.")
    labels = list(r.labels[lo:hi])
    last = r.n_layers - 1
    layer = st.selectbox("Raw attention of layer", list(range(r.n_layers)), index=last, key=K("mix.layer"))
    raw = r.attentions[layer].astype(np.float64).mean(0)
    roll = A.rollout(r.attentions)
    c1, c2 = st.columns(2)
    with c1:
        show(heatmap(raw[lo:hi, lo:hi], labels, labels, f"raw: layer {layer}, mean of heads", lo), "raw")
    with c2:
        show(heatmap(roll[lo:hi, lo:hi], labels, labels, "rollout (all layers)", lo), "rollout")
    cls = r.cls_index
    bars = {f"raw (layer {layer})": A.relevance(raw, cls), "rollout": A.relevance(roll, cls)}
    full = (lo, hi) == (0, r.n_tokens)
    n = r.n_tokens if full else hi - lo
    if n > A.FLOW_MAX_TOKENS:
        st.info(f"Attention flow is limited to {A.FLOW_MAX_TOKENS} tokens (the text has {r.n_tokens}); pick a token "
                f"range of at most {A.FLOW_MAX_TOKENS} tokens to compute it on that range.")
    elif st.toggle("Compute attention flow" + ("" if full else f" on tokens {lo}–{hi - 1}"), key=K("flow")):
        att = r.attentions if full else A.restrict(r.attentions, lo, hi)
        cls_local = cls - lo
        fl = None
        with st.spinner("Solving max-flow problems …"):
            if n <= A.FLOW_MAP_MAX_TOKENS:
                fl = cached_flow(att, None)
                show(heatmap(fl, labels, labels, "attention flow", lo), "flow")
            elif 0 <= cls_local < n:
                fl = cached_flow(att, (cls_local,))
                st.caption(f"The full flow map is limited to {A.FLOW_MAP_MAX_TOKENS} tokens: [CLS]'s row only.")
        if fl is not None and 0 <= cls_local < n:
            bars["flow"] = np.full(r.n_tokens, np.nan)
            bars["flow"][lo:hi] = A.relevance(fl, cls_local)
        if not full:
            st.caption("Flow on a range: attention leaving the range is dropped and rows are renormalised.")
    show(relevance_bars({k: np.asarray(v)[lo:hi] for k, v in bars.items()}, labels), "relevance")


def export_section(r: A.AttentionResult) -> None:
    st.radio("Figure download format (the camera icon on each chart)", ["png", "svg"], key=K("fmt"), horizontal=True)
    st.download_button("Download raw attention (.npz)", lambda: A.to_npz(r), file_name="attention.npz",
                       mime="application/octet-stream", key=K("dl.npz"))
    st.caption(f"attentions: float16 array (layers, heads, seq, seq) = {r.attentions.shape}; queries/keys "
               "(layers, heads, seq, head_dim); tokens; cls/sep/punct masks; sentence_b_start (-1: none). "
               "The standalone HTML of the bertviz view is on the bertviz tab.")


def compare_options() -> list[tuple[str, str]]:
    """(family, checkpoint) pairs to compare against: every bundled model, this session's, the official ones."""
    from core.models import FAMILIES, bundled_id

    opts = [(f, bundled_id(f)) for f in FAMILIES]
    opts += [(m.family, m.path) for m in state.session_models()]
    opts += [(c.family, c.id) for f in FAMILIES.values() for c in f.checkpoints]
    return opts


def compare_section(r: A.AttentionResult, stats: A.HeadStats, config: A.AttentionConfig) -> None:
    from app.loaders import get_model
    from core.models import FAMILIES, ModelLoadError, ModelSpec

    st.caption("A second model on the same text. Tokenizers differ, so the models are compared through per-layer "
               "statistics and each one's layer-to-layer similarity (mean over heads of the correlation between "
               "head h's maps in two layers: 1 = same pattern, 0 = unrelated). ALBERT reuses one layer's weights at every depth: are its heads alike "
               "from layer to layer?")
    opts = [o for o in compare_options() if o != (r.family, r.checkpoint)]
    default = next((i for i, o in enumerate(opts) if o[0] == ("bert" if r.family == "albert" else "albert")), 0)
    c1, c2 = st.columns([3, 1])
    choice = c1.selectbox("Compare with", opts, index=default, key=K("cmp.model"),
                          format_func=lambda o: f"{FAMILIES[o[0]].label} · {o[1]}")
    run_key = (choice, r.checkpoint, config)
    if c2.button("Compare", key=K("cmp.run"), type="primary"):
        try:
            spec = ModelSpec(choice[0], choice[1], st.session_state.get(state.DEVICE, "auto"))
            with st.spinner(f"Loading {choice[1]} …"):
                other = A.compute_attention(get_model(spec, "base", attentions=True), config)
            st.session_state[K("cmp.result")] = (run_key, other)
        except (ModelLoadError, ValueError) as e:
            st.error(f"{choice[1]}: {e}")
            return
    saved = st.session_state.get(K("cmp.result"))
    if not saved or saved[0] != run_key:
        return
    other = saved[1]
    other_stats = A.head_stats(other.attentions, other.cls_mask, other.sep_mask, other.punct_mask)
    cols = st.columns(2)
    for col, res in zip(cols, (r, other)):
        sim = A.layer_similarity(res.attentions)
        label = f"{FAMILIES[res.family].label} · {res.checkpoint}"
        with col:
            st.metric(f"{label}: next-layer correlation", f"{A.adjacent_similarity(sim):.3f}",
                      help=f"{res.n_layers} layers × {res.n_heads} heads, {res.n_tokens} tokens")
            show(similarity_figure(sim, label), "cmp.sim" + ("" if res is r else ".other"))
    name = st.selectbox("Statistic per layer", list(STAT_LABELS), key=K("cmp.stat"), format_func=STAT_LABELS.get)
    show(per_layer_lines({f"{FAMILIES[x.family].label} · {x.checkpoint}": s
                          for x, s in ((r, stats), (other, other_stats))}, name), "cmp.lines")

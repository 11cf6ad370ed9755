"""Renderers for the Attention page: its sections (filters, bertviz view, maps, query/key, statistics, mixing,
words, export, compare) and their URL fields; the figures are in attention_figures.py.

Every label comes from assets/i18n/attention.toml (``t("attention....")``). The widgets that define the view are
kept in the URL (app/kit/urlstate.py): ``option_fields()`` do not depend on the result; ``filter_fields(r)`` and
``focus_fields(...)`` do (token count, layers, heads), so the page binds them once the result is known, before
their widgets are drawn. Option widgets sit in ``presenter.settings()``: folded away in presenter view.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, report, state, urlstate
from app.kit.cache import attention_flow, attention_layer_map, attention_mixing, attention_qk, attention_word_groups
from app.kit.download_button import download
from app.kit.exports import attention_npz
from app.kit.i18n import explain, t, t_or
from app.kit.render import as_text
from app.views.inspect.attention_figures import (
    STATS,
    heatmap,
    per_layer_lines,
    qk_figure,
    relevance_bars,
    safe,
    selection_bars,
    similarity_figure,
    stat_figures,
    stat_label,
    thumbnail_grid,
)
from app.views.inspect.bertviz_embed import CONTROLS, LAYOUTS, build_view, default_layout, fit_payload
from core.inspect import attention as A
from core.inspect.attention_views import DIRECTIONS, HOW, SelectionConfig, selection_attention
from core.models.spec import ModelSpec
from core.registry import FAMILIES, bundled_families, bundled_id, family

PAGE = "attention"
VIEW_KINDS = ("head", "model")
TABS = ("bertviz", "heatmaps", "qk", "stats", "mixing", "words", "compare", "ablation", "importance", "export")
FORMATS = ("png", "svg")
DEFAULT_RANGE = 128  # tokens shown at first; the bertviz payload stays light


def K(name: str) -> str:
    return state.key(PAGE, name)


def option_labels(options, label):
    """A format_func whose labels are fixed now, in this run's language: AppTest formats options again after
    the run, where the session's language can no longer be read. An option not listed shows as itself."""
    table = {o: label(o) for o in options}
    return lambda o: table.get(o, str(o))


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
    return (
        urlstate.Field(K("view"), choices=VIEW_KINDS),
        urlstate.Field(K("stat"), choices=STATS),
        urlstate.Field(K("pattern"), choices=tuple(A.PATTERNS)),
        urlstate.Field(K("threshold"), "float", lo=0.0, hi=1.0),
        urlstate.Field(K("fmt"), choices=FORMATS),
        urlstate.Field(K("tab"), choices=TABS),  # the tab a link opens (the walkthrough's link to value zeroing)
    )


def filter_fields(r: A.AttentionResult) -> tuple[urlstate.Field, ...]:
    """Token range, layers and heads: their bounds are the result's (bind after reset_view_state)."""
    return (
        RangeField(K("range"), "ints", lo=0, hi=r.n_tokens),
        urlstate.Field(K("layers"), "ints", choices=tuple(range(r.n_layers))),
        urlstate.Field(K("heads"), "ints", choices=tuple(range(r.n_heads))),
    )


def focus_fields(
    r: A.AttentionResult, lo: int, hi: int, layers: list[int], heads: list[int]
) -> tuple[urlstate.Field, ...]:
    """The focused head of each tab and the rollout options: their choices are the filters' values."""
    return (
        urlstate.Field(K("layer"), "int", choices=tuple(layers)),
        urlstate.Field(K("head"), "int", choices=tuple(heads)),
        urlstate.Field(K("qk.layer"), "int", choices=tuple(layers)),
        urlstate.Field(K("qk.head"), "int", choices=tuple(heads)),
        urlstate.Field(K("qk.token"), "int", choices=tuple(range(lo, hi))),
        urlstate.Field(K("mix.layer"), "int", choices=tuple(range(r.n_layers))),
        urlstate.Field(K("flow"), "bool"),
    )


def settings_box(label: str, expanded: bool = False):
    """An expander of option widgets; in presenter view the settings expander itself (expanders do not nest)."""
    if presenter.is_on():
        return presenter.settings()
    return st.expander(label, expanded=expanded)


VIEW_KEYS = (
    "range",
    "layers",
    "heads",
    "layer",
    "head",
    "qk.layer",
    "qk.head",
    "qk.token",
    "mix.layer",
    "flow",
    "w.sel.words",
    "w.sel.tokens",
    "layout",
)


def reset_view_state() -> None:
    """Forget the view widgets' values (a new result may have other tokens, layers or heads)."""
    for name in VIEW_KEYS:
        st.session_state.pop(K(name), None)


def _keep(name: str, options: list) -> None:
    """Drop a widget's stored value when the filters no longer offer it (it falls back to the first option)."""
    if K(name) in st.session_state and st.session_state[K(name)] not in options:
        del st.session_state[K(name)]


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
    return st.plotly_chart(presenter.scale(fig), width="stretch", key=K("fig." + name), config=chart_config(name), **kw)


# ---------------------------------------------------------------------------------------------- figures


# ---------------------------------------------------------------------------------------------- sections
@st.cache_data(max_entries=6, show_spinner=False)
def cached_view(
    kind: str,
    att: np.ndarray,
    labels: tuple[str, ...],
    b_start: int | None,
    layers: tuple[int, ...],
    heads: tuple[int, ...],
    dark: bool,
    title: str = "Attention",
    layout: str = "vertical",
    controls: tuple[tuple[str, str], ...] = (),
):
    return build_view(
        kind,
        att,
        list(labels),
        b_start,
        list(layers),
        list(heads),
        dark=dark,
        title=title,
        layout=layout,
        controls=controls,
    )


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
    kind = st.segmented_control(
        t("attention.view"),
        list(VIEW_KINDS),
        key=K("view"),
        required=True,
        format_func=option_labels(VIEW_KINDS, lambda k: t(f"attention.view_kind.{k}")),
    )
    kind = kind or "head"
    layout = "vertical"
    if kind == "head":  # a long CJK sentence opens across the page (bertviz #18); reset with each new result
        config = st.session_state.get(K("config"))
        st.session_state.setdefault(K("layout"), default_layout(list(r.labels[lo:hi]), getattr(config, "text", "")))
        urlstate.relabel((K("layout"),))  # its labels are in the session's language
        with presenter.settings():
            layout = (
                st.segmented_control(
                    t("attention.bertviz.layout"),
                    list(LAYOUTS),
                    key=K("layout"),
                    required=True,
                    help=t("attention.bertviz.layout_help"),
                    format_func=option_labels(LAYOUTS, lambda x: t(f"attention.bertviz.layout_opt.{x}")),
                )
                or "vertical"
            )
        if layout == "horizontal":
            st.caption(t("attention.bertviz.horizontal_caption"))
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
        view = cached_view(
            kind,
            sub,
            tuple(r.labels[lo:hi]),
            None if b is None else b - lo,
            tuple(shipped),
            tuple(heads_shipped),
            dark_theme(),
            t("attention.view_title"),
            layout,
            tuple((c, t(f"attention.bertviz.control.c{i}")) for i, c in enumerate(CONTROLS)),
        )
    st.iframe(view.html, height=view.height, alt=f"bertviz {kind} view")  # i18n: ok (the iframe's title, not shown)
    rows = t("attention.view_rows_cut") if (lo, hi) != (0, r.n_tokens) else t("attention.view_all_tokens")
    st.caption(
        t("attention.view_caption", kind=t(f"attention.view_kind.{kind}"), mb=f"{view.size_bytes / 1e6:.2f}", rows=rows)
    )
    download(
        st,
        t("attention.download_view"),
        lambda: view.html.encode("utf-8"),
        f"attention-{kind}-view.html",
        "text/html",
        K("dl.html"),
    )


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
    focused = heatmap(
        r.attentions[layer, head, lo:hi, lo:hi],
        labels,
        labels,
        t("attention.fig.head_title", layer=layer, head=head),
        lo,
    )
    show(focused, "heatmap")
    st.markdown(t("attention.all_heads"))
    sub = r.attentions[:, :, lo:hi, lo:hi][np.ix_(layers, heads)]
    fig = thumbnail_grid(sub, (layers.index(layer), heads.index(head)))
    fig.update_xaxes(ticktext=[str(h) for h in heads])
    fig.update_yaxes(ticktext=[str(x) for x in layers])
    fig.data[1].customdata = [[layers[i], heads[j]] for i in range(len(layers)) for j in range(len(heads))]
    show(fig, "grid", on_select=focus_from_grid, selection_mode="points")
    return focused


def qk_section(
    r: A.AttentionResult,
    lo: int,
    hi: int,
    layers: list[int],
    heads: list[int],
    spec: ModelSpec,
    config: A.AttentionConfig,
) -> None:
    """How one head's attention of one query token comes out of q and k (``spec``, ``config``: what ``r`` was made
    from, the cache's key)."""
    if r.queries is None or r.keys is None:
        st.warning(explain(r.qk_note) or t("attention.no_qk"))
        return
    st.caption(t("attention.qk_intro"))
    for name, opts in (("qk.layer", layers), ("qk.head", heads), ("qk.token", list(range(lo, hi)))):
        _keep(name, opts)
    left, right = st.columns([1, 1])
    with left, presenter.settings():
        c1, c2 = st.columns(2)
        layer = c1.selectbox(t("attention.layer"), layers, key=K("qk.layer"))
        head = c2.selectbox(t("attention.head"), heads, key=K("qk.head"))
    q = right.selectbox(
        t("attention.query_token"), list(range(lo, hi)), key=K("qk.token"), format_func=lambda i: f"{i}: {r.labels[i]}"
    )
    v = attention_qk(r.queries, r.keys, spec, config, layer, head, q)
    keys = A.QKView(
        query=v.query, keys=v.keys[lo:hi], product=v.product[lo:hi], scores=v.scores[lo:hi], weights=v.weights[lo:hi]
    )
    show(qk_figure(keys, list(r.labels[lo:hi]), r.labels[q]), "qk")


def stats_section(r: A.AttentionResult, stats: A.HeadStats) -> go.Figure:
    """Head statistics and the pattern finder; returns the statistic's layer x head map (for the report)."""
    st.caption(t("attention.stats_intro"))
    with presenter.settings():
        name = st.selectbox(
            t("attention.statistic"), list(STATS), key=K("stat"), format_func=option_labels(STATS, stat_label)
        )
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
        pattern = c1.selectbox(
            t("attention.pattern_pick"),
            list(A.PATTERNS),
            key=K("pattern"),
            format_func=option_labels(A.PATTERNS, pattern_label),
        )
        thr = c2.slider(
            t("attention.threshold"), 0.0, 1.0, step=0.05, key=K("threshold"), help=t("attention.threshold_help")
        )
    hits = A.find_heads(stats, pattern, thr)
    if not hits:
        best = stats.share(pattern)
        bl, bh = np.unravel_index(int(np.argmax(best)), best.shape)
        st.info(t("attention.no_hits", threshold=f"{thr:.2f}", layer=bl, head=bh, score=f"{best[bl, bh]:.2f}"))
        return hm
    cols = (t("attention.col.layer"), t("attention.col.head"), t("attention.col.score"))
    st.dataframe(
        [dict(zip(cols, (m.layer, m.head, round(m.score, 3)))) for m in hits],
        hide_index=True,
        key=K("hits"),
        height=min(400, 35 * len(hits) + 40),
    )
    return hm


def mixing_section(r: A.AttentionResult, lo: int, hi: int, spec: ModelSpec, config: A.AttentionConfig) -> None:
    """Raw attention against rollout (and flow, on request), and each token's share in [CLS] under each (``spec``,
    ``config``: what ``r`` was made from, the cache's key)."""
    st.caption(t("attention.mix_intro"))
    labels = list(r.labels[lo:hi])
    st.session_state.setdefault(K("mix.layer"), r.n_layers - 1)
    with presenter.settings():
        layer = st.selectbox(t("attention.mix_layer"), list(range(r.n_layers)), key=K("mix.layer"))
    cls = r.cls_index
    mix = attention_mixing(r.attentions, spec, config, layer, cls)
    c1, c2 = st.columns(2)
    with c1:
        show(heatmap(mix.raw[lo:hi, lo:hi], labels, labels, t("attention.fig.raw", layer=layer), lo), "raw")
    with c2:
        show(heatmap(mix.rollout[lo:hi, lo:hi], labels, labels, t("attention.fig.rollout"), lo), "rollout")
    bars = {
        t("attention.fig.raw_bar", layer=layer): mix.raw_relevance,
        t("attention.fig.rollout_bar"): mix.rollout_relevance,
    }
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
                fl = attention_flow(att, None)
                show(heatmap(fl, labels, labels, t("attention.fig.flow"), lo), "flow")
            elif 0 <= cls_local < n:
                fl = attention_flow(att, (cls_local,))
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


def words_section(r: A.AttentionResult, config: A.AttentionConfig, tokenizer, spec: ModelSpec) -> None:
    """Word-level attention (pieces merged) and the attention of several tokens or words at once (``spec``: the
    model ``r`` was made with, the cache's key)."""
    st.caption(t("attention.w.intro"))
    st.session_state.setdefault(K("w.level"), "words")
    st.session_state.setdefault(K("w.how"), "mean")
    _keep("w.layer", list(range(r.n_layers)))
    _keep("w.head", [MEAN_HEADS, *range(r.n_heads)])
    urlstate.relabel(K(x) for x in ("w.level", "w.head", "w.how", "w.direction"))  # labels in the session's language
    with presenter.settings():
        c1, c2, c3 = st.columns([2, 1, 1])
        level = c1.segmented_control(
            t("attention.w.level"),
            list(WORD_LEVELS),
            key=K("w.level"),
            required=True,
            format_func=option_labels(WORD_LEVELS, lambda x: t(f"attention.w.level_opt.{x}")),
        )
        layer = c2.selectbox(t("attention.layer"), list(range(r.n_layers)), key=K("w.layer"))
        head = c3.selectbox(
            t("attention.head"),
            [MEAN_HEADS, *range(r.n_heads)],
            key=K("w.head"),
            format_func=option_labels([MEAN_HEADS], lambda _: t("attention.w.mean_heads")),
        )
    level = level or "words"
    one = None if head == MEAN_HEADS else head
    which = (
        t("attention.w.mean_heads_title", layer=layer)
        if head == MEAN_HEADS
        else t("attention.fig.head_title", layer=layer, head=head)
    )
    if level == "words":
        try:
            g = attention_word_groups(tokenizer, r.checkpoint, config)
            m = attention_layer_map(r.attentions, g, spec, config, layer, one, words=True)
        except ValueError as e:  # a slow tokenizer (no word ids), or groups of another text
            st.error(explain(e))
            return
        labels = list(g.words)
        merged = [i for i in g.merged()]
        if merged:
            shown = ", ".join(f"{g.words[i]} ({len(g.groups[i])})" for i in merged[:12])
            st.caption(
                t(
                    "attention.w.merged",
                    words=g.n_words,
                    tokens=g.n_tokens,
                    n=len(merged),
                    shown=as_text(shown) + (" …" if len(merged) > 12 else ""),
                )
            )
        else:
            st.caption(t("attention.w.none_merged", n=g.n_tokens))
        title = t("attention.w.word_title", which=which)
    else:
        m = attention_layer_map(r.attentions, None, spec, config, layer, one, words=False)
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
        picked = c1.multiselect(
            t("attention.w.select"),
            list(range(len(labels))),
            key=sel_key,
            format_func=lambda i: f"{i}: {labels[i]}",
            placeholder=t("attention.w.select_ph"),
        )
        how = c2.radio(
            t("attention.w.how"),
            list(HOW),
            key=K("w.how"),
            format_func=option_labels(HOW, lambda x: t(f"attention.w.how_opt.{x}")),
        )
        direction = c3.radio(
            t("attention.w.direction"),
            list(DIRECTIONS),
            key=K("w.direction"),
            format_func=option_labels(DIRECTIONS, lambda x: t(f"attention.w.direction_opt.{x}")),
        )
    if not picked:
        st.info(t("attention.w.pick"))
        return
    vec = selection_attention(m[None, None], SelectionConfig(tuple(picked), how, direction))[0, 0]
    names = ", ".join(labels[i] for i in sorted(picked))
    show(
        selection_bars(
            vec,
            labels,
            t(
                f"attention.w.sel_title.{direction}.{how}",
                which=which,
                tokens=safe(names if len(names) <= 60 else names[:59] + "…"),
            ),
            sorted(picked),
        ),
        f"w.sel.{level}",
    )
    st.caption(t(f"attention.w.sel_caption.{direction}.{how}", n=len(picked)))


def export_section(r: A.AttentionResult) -> None:
    with presenter.settings():
        st.radio(t("attention.fmt"), list(FORMATS), key=K("fmt"), horizontal=True)
    download(
        st,
        t("attention.download_npz"),
        lambda: attention_npz(r),
        "attention.npz",
        "application/octet-stream",
        K("dl.npz"),
    )
    st.caption(t("attention.npz_caption", shape=str(r.attentions.shape)))


def compare_options() -> list[tuple[str, str]]:
    """(family, checkpoint) pairs to compare against: every bundled model, this session's, the official ones."""
    opts = [(f.key, bundled_id(f.key)) for f in bundled_families()]
    opts += [(m.family, m.path) for m in state.session_models()]
    opts += [(c.family, c.id) for f in FAMILIES.values() for c in f.checkpoints]
    return opts


def compare_picker(r: A.AttentionResult) -> tuple[tuple[str, str], bool]:
    """The model to compare with (by default one whose layers differ in kind: shared against not shared) and
    whether Compare was pressed."""
    st.caption(t("attention.compare_intro"))
    opts = [o for o in compare_options() if o != (r.family, r.checkpoint)]
    shared = family(r.family).shared_layers
    default = next((i for i, o in enumerate(opts) if family(o[0]).shared_layers != shared), 0)
    c1, c2 = st.columns([3, 1])
    choice = c1.selectbox(
        t("attention.compare_with"),
        opts,
        index=default,
        key=K("cmp.model"),
        format_func=lambda o: f"{family(o[0]).label} · {o[1]}",
    )
    return choice, c2.button(t("attention.compare"), key=K("cmp.run"), type="primary")


def compare_view(sides: tuple[A.ModelAttention, A.ModelAttention]) -> None:
    """Two models' layer similarity and per-layer head statistics, side by side."""
    cols = st.columns(2)
    for i, (col, side) in enumerate(zip(cols, sides)):
        res = side.result
        with col:
            st.metric(
                t("attention.next_layer_corr", model=side.label),
                f"{side.adjacent:.3f}",
                help=t("attention.model_shape", layers=res.n_layers, heads=res.n_heads, n=res.n_tokens),
            )
            show(similarity_figure(side.similarity, side.label), "cmp.sim" + ("" if i == 0 else ".other"))
    urlstate.relabel((K("cmp.stat"),))  # its labels are in the session's language
    with presenter.settings():
        name = st.selectbox(
            t("attention.stat_per_layer"), list(STATS), key=K("cmp.stat"), format_func=option_labels(STATS, stat_label)
        )
    show(per_layer_lines({side.label: side.stats for side in sides}, name), "cmp.lines")


def record(
    r: A.AttentionResult, config: A.AttentionConfig, lo: int, hi: int, heatmap_fig: go.Figure, stats_fig: go.Figure
) -> None:
    """This result in the session report (one entry per model and text; redrawing replaces it)."""
    digest = hashlib.sha1(repr((r.checkpoint, config.text, config.pair, config.text_b)).encode()).hexdigest()[:12]
    inputs = {t("attention.report.model"): r.checkpoint, t("attention.report.text"): config.text}
    if config.pair:
        inputs[t("attention.report.text_b")] = config.text_b
    inputs[t("attention.report.tokens")] = f"{lo}–{hi - 1}"
    inputs[t("attention.report.focus")] = t(
        "attention.fig.head_title", layer=st.session_state.get(K("layer")), head=st.session_state.get(K("head"))
    )
    report.record(
        f"attention:{digest}",
        page=t("nav.attention"),
        title=t("attention.report.title"),
        inputs=inputs,
        text=t("attention.summary", n=r.n_tokens, layers=r.n_layers, heads=r.n_heads, max=r.max_tokens),
        figures=[
            go.Figure(heatmap_fig).update_layout(  # axis titles; keys below, clear of the title
                xaxis_title=t("report.attention_x"),
                yaxis_title=t("report.attention_y"),
                xaxis_side="bottom",
                margin_t=60,
            ),
            stats_fig,
        ],
    )

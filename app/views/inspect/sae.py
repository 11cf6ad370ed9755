"""The Features page's drawing (pages/features.py trains and loads; core/inspect/sae_features.py computes): the
training settings, the SAE's quality against the issue's targets, and three tabs: a feature's top contexts, density
and logit effects with a search by token; the features on each token of a sentence; and Fill-mask steered by one
feature, before and after."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, state, urlstate
from app.kit.download_button import download
from app.kit.exports import tokens_html
from app.kit.i18n import explain, t
from app.kit.plot_text import plot_texts
from core.inspect import sae_features as SF
from core.inspect.sae import MAX_EXPANSION, SAEConfig, SAEError
from core.inspect.sae_store import Browse, SAEReport
from core.models.spec import LoadedModel

EXPANSIONS = (4, 8, 16)
KS = (16, 32, 64)
TARGETS = {"variance_explained": 0.85, "dead_share": 0.10, "loss_recovered": 0.80}  # the issue's, shown beside


def K(name: str) -> str:
    return state.key("features", name)


FIELDS = (
    urlstate.Field(K("layer"), "int", lo=1, hi=100),
    urlstate.Field(K("expansion"), "int", choices=EXPANSIONS),
    urlstate.Field(K("k"), "int", choices=KS),
    urlstate.Field(K("steps"), "int", lo=50, hi=5000),
    urlstate.Field(K("feature"), "int", lo=0, hi=MAX_EXPANSION * 4096),
    urlstate.Field(K("search"), max_len=50),
    urlstate.Field(K("sentence")),
    urlstate.Field(K("steer_text")),
    urlstate.Field(K("value"), "float", lo=0.0, hi=1000.0),
    urlstate.Field(K("fmt"), choices=("png", "svg")),
    urlstate.Field(K("source"), choices=("corpus", "mine")),
)


@dataclass(frozen=True)
class TrainAsk:
    cfg: SAEConfig | None
    go: bool
    error: str = ""


SOURCES = ("corpus", "mine")


def settings(n_layers: int, lang: str) -> TrainAsk:
    """The training settings (layer, features, k, steps, and the text: the bundled corpus or the person's sentences,
    one per line, the last fifth held out); the config they make."""
    st.session_state.setdefault(K("layer"), max(1, n_layers // 2))
    st.session_state.setdefault(K("expansion"), 8)
    st.session_state.setdefault(K("k"), 32)
    st.session_state.setdefault(K("steps"), SAEConfig(layer=1).steps)
    with presenter.settings():
        c1, c2, c3, c4 = st.columns(4)
        layer = c1.number_input(t("features.layer"), 1, n_layers, key=K("layer"), help=t("features.settings_help"))
        expansion = c2.selectbox(t("features.expansion"), EXPANSIONS, key=K("expansion"))
        k = c3.selectbox(t("features.k"), KS, key=K("k"))
        steps = c4.number_input(t("features.steps"), 50, 5000, step=250, key=K("steps"))
        source = st.segmented_control(
            t("features.source"),
            list(SOURCES),
            key=K("source"),
            required=True,
            default="corpus",
            format_func=lambda x: t(f"features.source_opt.{x}"),
        )
    texts: tuple[str, ...] = ()
    if source == "mine":
        raw = st.text_area(t("features.texts"), key=K("texts"), height=140, help=t("features.texts_help"))
        texts = tuple(line for line in raw.splitlines() if line.strip())
        if not texts:  # an empty box is not the corpus
            return TrainAsk(None, False, t("features.texts_needed"))
    try:
        cfg = SAEConfig(layer=int(layer), expansion=int(expansion), k=int(k), steps=int(steps), lang=lang, texts=texts)
    except SAEError as e:
        return TrainAsk(None, False, explain(e))
    return TrainAsk(cfg, False)


def train_button() -> bool:
    return st.button(t("features.train"), type="primary", key=K("train"))


def quality(report: SAEReport) -> None:
    """The SAE's figures on held-out text, each beside its target."""
    q = report.quality
    st.subheader(t("features.quality"))
    c1, c2, c3, c4 = st.columns(4)
    c1.metric(t("features.fve"), f"{q['variance_explained']:.3f}", help=t("features.fve_help"))
    c2.metric(t("features.l0"), f"{q['l0']:.1f}")
    c3.metric(t("features.dead"), f"{q['dead_share']:.1%}", help=t("features.dead_help"))
    rec = q["loss_recovered"]
    c4.metric(t("features.recovered"), "—" if rec != rec else f"{rec:.1%}", help=t("features.recovered_help"))
    st.caption(
        t("features.losses", clean=f"{q['loss_clean']:.3f}", sae=f"{q['loss_sae']:.3f}", zero=f"{q['loss_zero']:.3f}")
        + " "
        + t(
            "features.trained",
            features=f"{report.features:,}",
            tokens=f"{report.train_tokens:,}",
            seconds=f"{sum(report.seconds.values()):,.0f}",
        )
    )


# ---------------------------------------------------------------------------------------------- browse
def chart(fig: go.Figure, name: str, where=st) -> None:
    """A figure whose modebar camera downloads PNG or SVG, as chosen on the page (plotly's own export)."""
    fmt = st.session_state.get(K("fmt"), "png")
    config = {"displaylogo": False, "toImageButtonOptions": {"format": fmt, "filename": f"sae-{name}", "scale": 2}}
    where.plotly_chart(presenter.scale(fig), key=K(f"fig.{name}"), width="stretch", config=config)


def image_format() -> None:
    st.session_state.setdefault(K("fmt"), "png")
    st.segmented_control(t("features.format"), ["png", "svg"], key=K("fmt"), required=True, format_func=str.upper)


def _bars(items: list[tuple[str, float]], title: str, colour: str) -> go.Figure:
    fig = go.Figure(
        go.Bar(
            x=[round(v, 4) for _, v in items],
            y=plot_texts(f"{i + 1}·{p}" for i, (p, _) in enumerate(items)),
            orientation="h",
            marker_color=colour,
        )
    )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title=t("features.fig.logit_axis"))
    fig.update_layout(title=title, height=360, margin=dict(t=50, l=10, r=10, b=40))
    return fig


def density_figure(browse: Browse, feature: int) -> go.Figure:
    """Every feature's firing share on a log axis, the open feature's marked."""
    d = np.asarray(browse.density, dtype=float)
    live = np.log10(d[d > 0])
    fig = go.Figure(go.Histogram(x=np.round(live, 4), nbinsx=40, marker_color="#9ecae1"))
    if d[feature] > 0:
        fig.add_vline(x=float(np.log10(d[feature])), line_color="#d62728", line_width=3)
    fig.update_xaxes(
        title=t("features.fig.density_x"), tickvals=[-4, -3, -2, -1, 0], ticktext=["0.01%", "0.1%", "1%", "10%", "100%"]
    )
    fig.update_yaxes(title=t("features.fig.density_y"))
    fig.update_layout(title=t("features.fig.density"), height=300, margin=dict(t=50, l=60, r=10, b=40))
    return fig


def browse_tab(lm: LoadedModel, sae, browse: Browse) -> list[go.Figure]:
    """A search by token, then the open feature: density, top contexts, logit effects."""
    n = sae.features
    st.session_state.setdefault(K("feature"), int(np.argmax(browse.ctx_activation[:, 0])))
    if st.session_state[K("feature")] >= n:  # a link's feature from a larger SAE
        st.warning(t("features.feature_out_of_range", feature=st.session_state[K("feature")], last=n - 1))
        st.session_state[K("feature")] = 0
    c1, c2 = st.columns([1, 2])
    feature = int(c1.number_input(t("features.feature"), 0, n - 1, key=K("feature")))
    query = c2.text_input(t("features.search"), key=K("search"), placeholder=t("features.search_placeholder"))
    if query.strip():
        hits = SF.search(lm, browse, query)
        if not hits:
            st.info(t("features.search_none", query=query.strip()))
        else:
            st.dataframe(
                pd.DataFrame(
                    hits,
                    columns=[
                        t("features.search_col.feature"),
                        t("features.search_col.count"),
                        t("features.search_col.strength"),
                    ],
                ).round(3),
                hide_index=True,
                height=min(400, 38 + 35 * len(hits)),
                key=K("hits"),
            )
    m1, m2 = st.columns(2)
    m1.metric(t("features.density"), f"{browse.density[feature]:.3%}", help=t("features.density_help"))
    m2.metric(t("features.mean_act"), f"{browse.mean_activation[feature]:.3f}")
    figs = [density_figure(browse, feature)]
    chart(figs[0], "density")
    st.markdown(f"**{t('features.contexts')}**")
    ctx = SF.contexts(lm, sae, browse, feature)
    if not ctx:
        st.info(t("features.no_contexts"))
    for c in ctx:
        marks = np.zeros(len(c.pieces))
        marks[c.position] = c.activation
        st.html(tokens_html(c.pieces, marks) + f"<small>{c.activation:.3f}</small>")
    try:
        up, down = SF.logit_effects(lm, sae, browse, feature)
    except SAEError as e:
        st.error(explain(e))
        return figs
    b1, b2 = st.columns(2)
    figs += [_bars(up, t("features.fig.promoted"), "#1a9850"), _bars(down, t("features.fig.suppressed"), "#d73027")]
    chart(figs[1], "up", b1)
    chart(figs[2], "down", b2)
    st.caption(t("features.effects_note"))
    tok = lm.tokenizer  # what a click needs (not the model)
    download(
        st, t("features.csv"), lambda: browse_csv(tok, browse, id(browse)), "sae-features.csv", "text/csv", K("csv")
    )
    return figs


@st.cache_data(max_entries=4, show_spinner=False)
def browse_csv(_tok, _browse: Browse, browse_id: int) -> str:
    """Every feature's density, mean activation and top contexts' tokens and activations (made once per loaded SAE:
    ``browse_id`` names it; the loaded SAEs are kept by core.inspect.sae_store)."""
    tok, browse = _tok, _browse
    rows = []
    for f in range(len(browse.density)):
        fired = browse.ctx_activation[f] > 0
        rows.append(
            {
                "feature": f,
                "density": float(browse.density[f]),
                "mean_activation": float(browse.mean_activation[f]),
                "top_tokens": " | ".join(tok.convert_ids_to_tokens(browse.ctx_token[f][fired].tolist())),
                "top_activations": " | ".join(f"{a:.3f}" for a in browse.ctx_activation[f][fired]),
            }
        )
    buf = io.StringIO()
    pd.DataFrame(rows).to_csv(buf, index=False)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------- my sentence
def sentence_tab(lm: LoadedModel, sae, layer: int) -> go.Figure | None:
    """The features on each token of the person's sentence; one token's as bars, and a button to open one."""
    text = st.text_input(t("features.sentence"), key=K("sentence"))
    if not text.strip():
        return None
    pieces, rows = SF.token_features(lm, sae, layer, text)
    labels = [f"{i}·{p}" for i, p in enumerate(pieces)]
    pick = st.segmented_control(
        t("features.piece"),
        range(len(pieces)),
        format_func=lambda i: labels[i],
        key=K("piece"),
        default=min(1, len(pieces) - 1),
    )
    i = int(pick if pick is not None else 0)
    feats = rows[i]
    fig = go.Figure(go.Bar(x=[f"#{f}" for f, _ in feats], y=[round(a, 4) for _, a in feats], marker_color="#1f77b4"))
    fig.update_xaxes(type="category", title=t("features.feature"))
    fig.update_yaxes(title=t("features.fig.activation"))
    fig.update_layout(
        title=t("features.fig.token_features", piece=pieces[i]), height=320, margin=dict(t=50, l=60, r=10, b=40)
    )
    chart(fig, "token")
    if feats:
        row = st.container(horizontal=True)
        for f, _ in feats:
            row.button(f"{t('features.open_feature')} #{f}", key=K(f"open.{f}"), on_click=_open, args=(f,))
    return fig


def _open(feature: int) -> None:
    st.session_state[K("feature")] = feature


# ---------------------------------------------------------------------------------------------- steering
def steer_tab(lm: LoadedModel, sae, layer: int, browse: Browse) -> None:
    """Fill-mask before and after clamping the open feature (0: off)."""
    feature = int(st.session_state.get(K("feature"), 0))
    top = round(3 * float(max(browse.ctx_activation[feature].max(), 1.0)), 1)
    st.session_state.setdefault(K("value"), 0.0)
    if st.session_state[K("value")] > top:  # a link's, or a stronger feature's, value: the slider's top
        st.session_state[K("value")] = top
    c1, c2 = st.columns([3, 2])
    text = c1.text_input(t("features.steer_text"), key=K("steer_text"))
    value = c2.slider(t("features.steer_value"), 0.0, top, key=K("value"), help=t("features.steer_help"))
    st.caption(t("features.steer_feature", feature=feature))
    try:
        res = SF.steer(lm, sae, layer, text, feature, float(value))
    except SAEError as e:
        st.error(explain(e))
        return
    for n, words in enumerate(res.words):
        before, after = res.before[n], res.after[n]
        if len(res.masks) > 1:
            st.markdown(f"**{t('features.mask_n', n=n + 1)}**")
        top_b, top_a = int(np.argmax(before)), int(np.argmax(after))
        c1, c2 = st.columns(2)
        c1.metric(t("features.top_before"), f"{words[top_b]} · {before[top_b]:.1%}")
        c2.metric(t("features.top_after", feature=feature, value=f"{value:g}"), f"{words[top_a]} · {after[top_a]:.1%}")
        chart(steer_figure(words, before, after), f"steer.{n}")


def steer_figure(words: tuple[str, ...], before: tuple[float, ...], after: tuple[float, ...]) -> go.Figure:
    """Each word's probability before and after the edit, side by side (as head ablation shows its change)."""
    x = plot_texts(words)
    fig = go.Figure(
        [
            go.Bar(name=t("features.before"), x=x, y=[round(100 * p, 2) for p in before], marker_color="#9ecae1"),
            go.Bar(name=t("features.after_short"), x=x, y=[round(100 * p, 2) for p in after], marker_color="#1f77b4"),
        ]
    )
    fig.update_xaxes(type="category", title=t("features.col.word"))
    fig.update_yaxes(title=t("features.col.prob"), ticksuffix="%")
    fig.update_layout(barmode="group", height=340, margin=dict(t=30, l=60, r=10, b=40))
    return fig

"""Value zeroing on the Attention page's context-mixing tab (core.inspect.value_zeroing): the map of one layer beside
raw attention and rollout, in tokens or in words (pieces merged as the Words view merges them), how far it agrees with
gradient-based token importance in each layer (Spearman), and the map as CSV."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, urlstate
from app.kit.cache import attention_word_groups, value_zeroing_of
from app.kit.download_button import download
from app.kit.i18n import explain, t
from app.views.inspect.attention import K, option_labels, show
from app.views.inspect.attention_figures import heatmap
from core.inspect import attention as A
from core.inspect.value_zeroing import GRADIENT_MAX_TOKENS, ValueZeroingResult, word_mixing
from core.models.spec import LoadedModel
from core.registry import ModelLoadError

LEVELS = ("tokens", "words")


def fields() -> tuple[urlstate.Field, ...]:
    """The section's options in the URL: on or off, and tokens or words."""
    return (urlstate.Field(K("vz"), "bool"), urlstate.Field(K("vz.level"), choices=LEVELS))


def section(r: A.AttentionResult, lo: int, hi: int, lm: LoadedModel, config: A.AttentionConfig) -> None:
    """The value-zeroing map of the layer picked above for raw attention (``r``: the page's result, ``lo:hi`` its
    token range; ``lm`` and ``config``: what ``r`` was made from)."""
    st.subheader(t("attention.vz.title"))
    st.caption(t("attention.vz.intro"))
    st.session_state.setdefault(K("vz.level"), "tokens")
    with presenter.settings():
        on = st.toggle(t("attention.vz.toggle"), key=K("vz"))
    if not on:
        return
    try:
        with st.spinner(t("attention.vz.running", n=r.n_layers)):
            res = value_zeroing_of(lm, lm.spec, config)
    except (ModelLoadError, ValueError) as e:  # the generic family (no value projection), a text too long
        st.error(explain(e))
        return
    layer = min(int(st.session_state.get(K("mix.layer"), r.n_layers - 1)), res.n_layers - 1)
    with presenter.settings():
        level = st.segmented_control(
            t("attention.vz.level"),
            list(LEVELS),
            key=K("vz.level"),
            required=True,
            format_func=option_labels(LEVELS, lambda x: t(f"attention.w.level_opt.{x}")),
        )
    if level == "words":
        try:
            g = attention_word_groups(lm.tokenizer, r.checkpoint, config)
            m, labels, offset = word_mixing(res.mixing[layer : layer + 1], g)[0], list(g.words), 0
        except ValueError as e:  # a slow tokenizer (no word ids)
            st.error(explain(e))
            return
    else:
        m, labels, offset = res.mixing[layer][lo:hi, lo:hi], list(r.labels[lo:hi]), lo
    c1, c2 = st.columns(2)
    with c1:
        show(heatmap(m, labels, labels, t("attention.vz.fig_map", layer=layer), offset), f"vz.{level or 'tokens'}")
        st.caption(t("attention.vz.map_note"))
    with c2:
        if res.spearman is None:
            st.info(t("attention.vz.no_gradient", n=len(res.tokens), max=GRADIENT_MAX_TOKENS))
        else:
            show(spearman_bars(res, layer), "vz.spearman")
            st.caption(t("attention.vz.spearman_note"))
    download(
        st,
        t("attention.vz.csv"),
        lambda: map_csv(m, labels, offset),
        f"value-zeroing-layer{layer}-{level or 'tokens'}.csv",
        "text/csv",
        K("vz.csv"),
    )


def spearman_bars(res: ValueZeroingResult, layer: int) -> go.Figure:
    """Per layer, the mean Spearman correlation of value zeroing's rows with gradient x input's; the picked layer
    stands out."""
    rho = np.asarray(res.spearman, dtype=float)
    colours = ["#1f77b4" if i == layer else "#9ecae1" for i in range(len(rho))]
    fig = go.Figure(
        go.Bar(
            x=list(range(len(rho))),
            y=np.round(rho, 3),
            marker_color=colours,
            hovertemplate=t("attention.vz.spearman_hover") + "<extra></extra>",
        )
    )
    fig.update_xaxes(title=t("attention.layer"), dtick=1)
    fig.update_yaxes(title=t("attention.vz.spearman_axis"), range=[-1, 1])
    fig.update_layout(title=t("attention.vz.fig_spearman"), height=360, margin=dict(t=60, l=70, r=10, b=40))
    return fig


def map_csv(m: np.ndarray, labels: list[str], offset: int) -> str:
    """The map as CSV: rows and columns named "position: token" (a token may appear twice)."""
    names = [f"{offset + i}: {x}" for i, x in enumerate(labels)]
    buf = io.StringIO()
    pd.DataFrame(np.round(np.asarray(m, dtype=float), 6), index=names, columns=names).to_csv(buf)
    return buf.getvalue()

"""Which explanation to trust: the faithfulness of every attribution method beside its saliency map
(core.inspect.faithfulness), a table and the deletion curves for one input, and the methods ranked over a batch.

Comprehensiveness (the probability lost when the top tokens go; higher is more faithful) and sufficiency (the
probability lost when only they stay; lower is more faithful) are each shown against a random ranking and the
method's ranking reversed, so a number is read against what chance and the opposite order give."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app.kit import presenter
from app.kit.i18n import t
from app.kit.plot_text import plot_texts
from core.inspect.faithfulness import Faithfulness, Ranking

RANDOM_COLOUR = "#888888"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2")


def removal_note(removal: str, mask_token: str) -> str:
    """How a token was removed, in the session's language."""
    return t(f"faithfulness.removal_note.{removal}", mask=mask_token)


COLUMNS = ("method", "comp", "comp_rev", "suff", "suff_rev")
NONE = "—"  # random has no reversed ranking of its own (reversed, a random order is another random order)


def _num(value: float) -> str:
    return f"{value:.3f}"


def table_rows(f: Faithfulness, label) -> list[dict]:
    """One row per method (its AOPCs, and its ranking reversed), then random's: keyed by COLUMNS, as text (3
    decimals; a dash where random has no reversed column)."""
    rows = []
    for c in f.methods:
        rev = f.reversed_of(c.key)
        rows.append(
            dict(
                method=label(c.key),
                comp=_num(c.aopc_comp),
                comp_rev=_num(rev.aopc_comp) if rev else NONE,
                suff=_num(c.aopc_suff),
                suff_rev=_num(rev.aopc_suff) if rev else NONE,
            )
        )
    random = dict(comp=_num(f.random.aopc_comp), suff=_num(f.random.aopc_suff), comp_rev=NONE, suff_rev=NONE)
    rows.append(dict(method=t("faithfulness.random", seeds=f.seeds), **random))
    return rows


def column_labels() -> dict:
    """The table's headers in the session's language (both "reversed" columns read the same under their metric);
    the widths follow the content, so a long method name is not cut."""
    return {
        "method": st.column_config.TextColumn(t("faithfulness.col.method")),
        "comp": st.column_config.TextColumn(t("faithfulness.col.comp")),
        "comp_rev": st.column_config.TextColumn(t("faithfulness.col.reversed")),
        "suff": st.column_config.TextColumn(t("faithfulness.col.suff")),
        "suff_rev": st.column_config.TextColumn(t("faithfulness.col.reversed")),
    }


def curves(f: Faithfulness, label) -> go.Figure:
    """The deletion curve (the probability as the top tokens go) and the keep-only curve (as only they stay), per
    method, with random (its band: one standard deviation across seeds) and each method's reversed ranking dashed.
    The levels sit evenly along x (1, 5, 10, 20, 50% would crowd at the left of a linear axis)."""
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=(t("faithfulness.fig.deletion"), t("faithfulness.fig.keep")), shared_yaxes=True
    )
    x = ["0%"] + [f"{100 * lv:g}%" for lv in f.levels]
    for col, part in ((1, "comp"), (2, "suff")):
        first = col == 1

        def ys(curve, part=part):
            return [f.p_x] + [f.p_x - v for v in getattr(curve, part)]

        lo = [f.p_x] + [f.p_x - m - s for m, s in zip(getattr(f.random, part), getattr(f.random_sd, part))]
        hi = [f.p_x] + [f.p_x - m + s for m, s in zip(getattr(f.random, part), getattr(f.random_sd, part))]
        fig.add_trace(
            go.Scatter(
                x=x + x[::-1],
                y=hi + lo[::-1],
                fill="toself",
                mode="lines",
                line=dict(width=0),
                hoverinfo="skip",
                fillcolor="rgba(136,136,136,0.2)",
                showlegend=False,
            ),
            row=1,
            col=col,
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=ys(f.random),
                name=t("faithfulness.random", seeds=f.seeds),
                legendgroup="random",
                line=dict(color=RANDOM_COLOUR, dash="dot"),
                showlegend=first,
            ),
            row=1,
            col=col,
        )
        for i, c in enumerate(f.methods):
            colour = PALETTE[i % len(PALETTE)]
            name = plot_texts([label(c.key)])[0]
            fig.add_trace(
                go.Scatter(x=x, y=ys(c), name=name, legendgroup=c.key, line=dict(color=colour), showlegend=first),
                row=1,
                col=col,
            )
            rev = f.reversed_of(c.key)
            if rev is not None:
                fig.add_trace(
                    go.Scatter(
                        x=x,
                        y=ys(rev),
                        name=t("faithfulness.reversed_of", method=name),
                        legendgroup=c.key,
                        line=dict(color=colour, dash="dash", width=1),
                        marker=dict(size=4),
                        showlegend=False,
                    ),
                    row=1,
                    col=col,
                )
    fig.add_trace(  # one legend entry for every dashed line
        go.Scatter(
            x=[None], y=[None], mode="lines", name=t("faithfulness.dashed"), line=dict(color="#555555", dash="dash")
        )
    )
    fig.update_xaxes(title_text=t("faithfulness.fig.x"), type="category")
    fig.update_yaxes(title_text=t("faithfulness.fig.y"), rangemode="tozero", row=1, col=1)
    fig.update_layout(height=400, margin=dict(t=40, b=10), legend=dict(orientation="h", y=-0.25))
    return fig


def show(f: Faithfulness | None, label, mask_token: str, key: str) -> go.Figure | None:
    """The faithfulness table and curves of one attribution run; returns the figure drawn (for the report)."""
    if f is None:
        return None
    st.subheader(t("faithfulness.h"))
    st.caption(
        t("faithfulness.intro", p_x=f"{f.p_x:.1%}", removable=f.removable, ks=", ".join(str(k) for k in f.ks))
        + " "
        + removal_note(f.removal, mask_token)
    )
    # presenter view's large text leaves room for three columns: the reversed rankings stay in the curves and the CSV
    shown = ("method", "comp", "suff") if presenter.is_on() else COLUMNS
    st.dataframe(
        table_rows(f, label), column_config=column_labels(), column_order=shown, hide_index=True, key=f"{key}.table"
    )
    st.caption(t("faithfulness.how_to_read"))
    fig = curves(f, label)
    st.plotly_chart(presenter.scale(fig), key=f"{key}.curves")
    return fig


def ranking_rows(r: Ranking, label) -> list[dict]:
    return [
        {
            t("faithfulness.col.method"): label(m.key),
            t("faithfulness.col.inputs"): m.inputs,
            t("faithfulness.col.comp"): f"{m.comp:.3f} ± {m.comp_sd:.3f}",
            t("faithfulness.col.comp_random"): round(m.random_comp, 3),
            t("faithfulness.col.suff"): f"{m.suff:.3f} ± {m.suff_sd:.3f}",
            t("faithfulness.col.suff_random"): round(m.random_suff, 3),
        }
        for m in r.methods
    ]


def show_ranking(r: Ranking | None, label, key: str) -> None:
    """Over a batch: which method was the most comprehensive and which the most sufficient, with every method's
    mean AOPCs and random's on the same inputs."""
    if r is None:
        return
    st.subheader(t("faithfulness.h_batch"))
    st.success(
        t(
            "faithfulness.verdict",
            inputs=r.inputs,
            comprehensive=label(r.most_comprehensive),
            sufficient=label(r.most_sufficient),
        )
    )
    st.dataframe(ranking_rows(r, label), hide_index=True, key=f"{key}.ranking")
    st.caption(t("faithfulness.how_to_read"))

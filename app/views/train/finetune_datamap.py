"""The Fine-tune page's data map (Dataset Cartography, Swayamdipta et al. 2020; core.train.datamap): every training
example's confidence in its gold label against how much that confidence varied across epochs, coloured by how often
the model was right, with the easy-to-learn, ambiguous and hard-to-learn regions named.

Drawn live while a sequence run goes (the map each finished epoch's progress carries) and for the finished run.
Clicking a point shows its text and label (the chart's selection event, kept per run in the session, so the pick
stays while the live map redraws); the examples with the lowest confidence, where wrong labels gather, are listed
under it. A finished run's map downloads as CSV (core's, one row per example with its per-epoch probabilities) and
as PNG (app.kit.exports, drawn the way the session report draws figures); the chart's camera button saves a PNG too.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.kit import exports, presenter
from app.kit.download_button import download
from app.kit.i18n import t
from app.kit.plot_text import plot_text
from app.views.train import finetune_charts as charts
from app.views.train.finetune import K
from core.data.datasets_local import LabelledData
from core.train.datamap import CONFIDENCE_SPLIT, DataMap
from core.train.finetune import FinetuneResult

# correctness from never (red) through half the epochs (amber) to always (blue): apart for colour-blind eyes too
CORRECTNESS_SCALE = [[0.0, "#d62728"], [0.5, "#f2b134"], [1.0, "#2b6cb0"]]
HOVER_CHARS = 160  # of an example's text in the hover (the whole text shows when the point is clicked)
LOWEST_ROWS = 10  # rows of the lowest-confidence table


def figure(dm: DataMap, texts: Sequence[str] | None, label_names: Sequence[str], title: str = "") -> go.Figure:
    """Confidence (y) against variability (x), one point per training example coloured by correctness, the regions'
    borders dotted and their names written in them. ``texts`` (the training texts) go into the hover; None leaves
    them out (the session report's picture)."""
    var, conf = dm.variability.astype(float), dm.confidence.astype(float)
    labels = [plot_text(label_names[int(y)]) for y in dm.labels]
    if texts is not None:
        hover = [
            f"#{i} · {labels[i]}<br>{plot_text(_short(texts[i]))}" for i in range(len(dm))
        ]  # index and label first: a long text's end is what a narrow hover cuts
    else:
        hover = [f"#{i} · {labels[i]}" for i in range(len(dm))]
    fig = go.Figure(
        go.Scatter(
            x=var,
            y=conf,
            mode="markers",
            customdata=np.arange(len(dm)),
            hovertext=hover,
            hovertemplate="%{hovertext}<br>"
            + t("datamap.fig.hover", variability="%{x:.3f}", confidence="%{y:.3f}", correctness="%{marker.color:.0%}")
            + "<extra></extra>",
            marker=dict(
                color=dm.correctness.astype(float),
                cmin=0,
                cmax=1,
                colorscale=CORRECTNESS_SCALE,
                size=8,
                opacity=0.8,
                line=dict(width=0.5, color="white"),
                colorbar=dict(title=dict(text=t("datamap.fig.correctness"), side="right"), tickformat=".0%"),
            ),
        )
    )
    # The regions' borders, dotted, and their names inside them. Before a second epoch nothing varies: no ambiguous
    # region, and the easy/hard border runs across the whole plot.
    varied = len(var) > 0 and float(var.max()) > 0
    cut = dm.ambiguous_cut if varied else None
    right = max(float(var.max()) if len(var) else 0.0, cut or 0.0, 0.05) * 1.08
    border = dict(color="#888", width=1.5, dash="dot")
    split_end = right if cut is None else cut
    fig.add_shape(type="line", x0=0, x1=split_end, y0=CONFIDENCE_SPLIT, y1=CONFIDENCE_SPLIT, line=border, layer="below")
    box = dict(bgcolor="rgba(255,255,255,0.85)", borderpad=4, showarrow=False)
    names = [("easy", split_end / 2, 0.97, "center", "#2b6cb0"), ("hard", split_end / 2, 0.03, "center", "#d62728")]
    if cut is not None:  # in the right region's top corner, which stays empty (a sure example cannot vary much)
        fig.add_shape(type="line", x0=cut, x1=cut, y0=0, y1=1, line=border, layer="below")
        names.append(("ambiguous", right, 0.97, "right", "#444"))
    for key, x, y, anchor, colour in names:
        fig.add_annotation(
            x=x, y=y, xanchor=anchor, text=t(f"datamap.region.{key}"), bordercolor=colour, font_color=colour, **box
        )
    fig.update_layout(
        title_text=title or None,
        height=460,
        margin=dict(t=50 if title else 20, b=10),
        xaxis=dict(title_text=t("datamap.fig.variability"), range=[0, right], zeroline=False),
        yaxis=dict(title_text=t("datamap.fig.confidence"), range=[-0.02, 1.02], zeroline=False),
    )
    return fig


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= HOVER_CHARS else text[: HOVER_CHARS - 1] + "…"


def _chart_config(name: str) -> dict:
    """The camera button saves a PNG named after the run, as the other pages' charts do."""
    return {"displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": f"datamap-{name}", "scale": 2}}


def _picked(chart_key: str, pick_key: str) -> None:
    """The chart's on_select: remember the clicked example (its index rides in customdata) under ``pick_key``."""
    event = st.session_state.get(chart_key) or {}
    for point in (event.get("selection") or {}).get("points") or []:
        index = point.get("customdata", point.get("point_index"))
        if isinstance(index, list):
            index = index[0] if index else None
        if index is not None:
            st.session_state[pick_key] = int(index)
            return


def _region_name(dm: DataMap) -> list[str]:
    return [t(f"datamap.region.{r}") for r in dm.regions()]


def draw(name: str, dm: DataMap, texts: Sequence[str], label_names: Sequence[str], live: bool = False) -> None:
    """The map of run ``name`` with what clicking a point shows (kept per run: the same pick live and finished),
    and the lowest-confidence examples."""
    counts = dm.region_counts()
    st.caption(
        t(
            "datamap.caption_live" if live else "datamap.caption",
            examples=len(dm),
            epochs=dm.epochs,
            easy=counts["easy"],
            ambiguous=counts["ambiguous"],
            hard=counts["hard"],
        )
    )
    if dm.epochs < 2:
        st.caption(t("datamap.one_epoch"))
    fig = figure(dm, texts, label_names)
    chart_key, pick_key = K(f"datamap.{name}"), K(f"datamap_pick.{name}")
    if presenter.is_on():  # presenter.scale sizes the axes' and legend's text; the colour bar's numbers too
        fig.update_traces(marker_colorbar_tickfont_size=presenter.CHART_FONT)  # this figure is the page's alone
    st.plotly_chart(
        presenter.scale(fig),
        key=chart_key,
        on_select=partial(_picked, chart_key, pick_key),
        selection_mode="points",
        config=_chart_config(name),
    )
    pick = st.session_state.get(pick_key)
    regions = _region_name(dm)
    if pick is None or not 0 <= pick < len(dm):
        st.info(t("datamap.click"))
    else:
        with st.container(border=True):
            st.markdown(
                t(
                    "datamap.picked",
                    index=pick,
                    region=regions[pick],
                    confidence=f"{dm.confidence[pick]:.3f}",
                    variability=f"{dm.variability[pick]:.3f}",
                    correctness=f"{dm.correctness[pick]:.0%}",
                )
            )
            st.text(t("datamap.picked_label", label=label_names[int(dm.labels[pick])]))  # user text: never Markdown
            st.text(texts[pick])
    st.markdown(t("datamap.lowest", rows=min(LOWEST_ROWS, len(dm))))
    lowest = dm.lowest_confidence(min(LOWEST_ROWS, len(dm)) / max(1, len(dm)))
    cols = {c: t(f"datamap.col.{c}") for c in ("index", "text", "label", "confidence", "variability", "correctness")}
    rows = [
        {
            "index": int(i),
            "text": texts[i],
            "label": label_names[int(dm.labels[i])],
            "confidence": f"{dm.confidence[i]:.3f}",
            "variability": f"{dm.variability[i]:.3f}",
            "correctness": f"{dm.correctness[i]:.0%}",
        }
        for i in lowest
    ]
    st.table(pd.DataFrame(rows).rename(columns=cols), hide_index=True)  # static: the texts wrap


def finished(name: str, result: FinetuneResult, data: LabelledData) -> None:
    """A finished sequence run's map (``data``: what it trained on, the map's rows in its order) with its
    downloads; a token run has none, and a run stopped inside its first epoch says so."""
    if result.task != "sequence" or not result.config.data_map:
        return
    st.markdown(t("datamap.title"))
    dm, texts = result.data_map, data.train.texts
    if dm is None:
        st.info(t("datamap.no_epoch"))
        return
    draw(name, dm, texts, result.label_names)
    left, right = st.columns(2)
    download(
        left,
        t("datamap.download_csv"),
        lambda: dm.to_csv(texts, result.label_names),
        f"datamap-{name}.csv",
        "text/csv",
        K(f"datamap_csv.{name}"),
    )
    titled = figure(dm, None, result.label_names, t("datamap.fig.title", run=name, epochs=dm.epochs))
    download(
        right,
        t("datamap.download_png"),
        lambda: exports.figure_png(titled),
        f"datamap-{name}.png",
        "image/png",
        K(f"datamap_png.{name}"),
        help=t("datamap.png_help"),
    )


def live(job, name: str, data: LabelledData) -> None:
    """A running (or cancelled) run's panel: the curves so far, then the data map of its latest finished epoch
    (job.metrics: the entry of an epoch's last step carries it; only sequence runs have one)."""
    charts.live(job)
    entry = next((m["data_map"] for m in reversed(list(job.metrics)) if "data_map" in m), None)
    if entry is None:
        return
    st.markdown(t("datamap.title"))
    draw(name, DataMap.from_metrics(entry), data.train.texts, data.label_names, live=True)

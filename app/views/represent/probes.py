"""Renderers for the Layer probes page: accuracy against depth per task (majority baselines dashed), the word task's
selectivity (real - control), the table, the best depths in words, the exports.

Labels come from assets/i18n/probes.toml. Every chart goes through presenter.scale."""

from __future__ import annotations

import html
import math

import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, state
from app.kit.download_button import download
from app.kit.exports import probes_csv
from app.kit.i18n import t
from app.kit.render import as_text, entry_id, record_once
from core.represent.probes import ProbeResult, TaskScore

PAGE = "probes"
COLORS = {
    "length": "#4C78A8",
    "bigram_shift": "#F58518",
    "coord_inversion": "#54A24B",
    "odd_word": "#B279A2",
    "suffix": "#E45756",
}


def K(name: str) -> str:
    return state.key(PAGE, name)


def task_name(task: str) -> str:
    return t(f"probes.task.{task}")


def depth_labels(n_depths: int) -> list[str]:
    return [t("probes.embeddings")] + [t("probes.layer", n=d) for d in range(1, n_depths)]


def _stderr(acc: float, n: int) -> float:
    """The binomial standard error of an accuracy measured on ``n`` held-out items."""
    return math.sqrt(max(acc * (1 - acc), 0.0) / max(n, 1))


def accuracy_chart(r: ProbeResult) -> go.Figure:
    """Held-out accuracy per depth, one line per task with ±1 standard error bars, and each task's majority
    baseline as a dashed line of the same colour."""
    x = depth_labels(r.num_depths)
    fig = go.Figure()
    for s in r.scores:
        c = COLORS.get(s.task, "#555")
        name = task_name(s.task)
        fig.add_scatter(
            x=x,
            y=list(s.accuracy),
            name=name,
            mode="lines+markers",
            line=dict(color=c, width=2.5),
            legendgroup=s.task,
            error_y=dict(type="data", array=[_stderr(a, s.n_heldout) for a in s.accuracy], thickness=1),
            hovertemplate=f"{name}<br>%{{x}}: %{{y:.1%}}<extra></extra>",
        )
        fig.add_scatter(
            x=x,
            y=[s.majority] * len(x),
            name=t("probes.majority_of", task=name),
            mode="lines",
            line=dict(color=c, dash="dash", width=1.5),
            legendgroup=s.task,
            showlegend=False,
            hovertemplate=t("probes.majority_hover", task=name) + ": %{y:.1%}<extra></extra>",
        )
    fig.update_layout(
        title=t("probes.chart_title"),
        height=430,
        xaxis_title=t("probes.depth"),
        yaxis=dict(title=t("probes.accuracy"), tickformat=".0%", range=[0, 1.05]),
        margin=dict(t=50, b=10),
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


def selectivity_chart(r: ProbeResult) -> go.Figure | None:
    """For each word task: real accuracy, the control task's accuracy (dotted) and selectivity = real - control
    (bars), per depth. None when no word task ran."""
    word = [s for s in r.scores if s.selectivity is not None]
    if not word:
        return None
    x = depth_labels(r.num_depths)
    fig = go.Figure()
    for s in word:
        c = COLORS.get(s.task, "#555")
        fig.add_bar(
            x=x,
            y=list(s.selectivity),
            name=t("probes.selectivity"),
            marker_color="#9ecae9",
            hovertemplate=t("probes.selectivity") + " %{x}: %{y:+.1%}<extra></extra>",
        )
        fig.add_scatter(
            x=x,
            y=list(s.accuracy),
            name=t("probes.real", task=task_name(s.task)),
            mode="lines+markers",
            line=dict(color=c, width=2.5),
            hovertemplate="%{x}: %{y:.1%}<extra></extra>",
        )
        fig.add_scatter(
            x=x,
            y=list(s.control),
            name=t("probes.control"),
            mode="lines+markers",
            line=dict(color="#777", dash="dot", width=2),
            hovertemplate="%{x}: %{y:.1%}<extra></extra>",
        )
    fig.update_layout(
        title=t("probes.sel_title"),
        height=380,
        xaxis_title=t("probes.depth"),
        yaxis=dict(
            title=t("probes.accuracy"),
            tickformat=".0%",
            range=[min(0, *(min(s.selectivity) for s in word)) - 0.02, 1.05],
        ),
        margin=dict(t=50, b=10),
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


def table_rows(r: ProbeResult) -> list[dict]:
    """One row per task: what the corpus gave, the split, the majority baseline, the best depth, the accuracy at
    every depth; a word task adds its control task's and its selectivity's rows. Every cell is text. Depth accuracies
    are whole percents: with 40-1,000 held-out items one item is 0.1-2.5 points, so a decimal would claim more than
    the probe measured, and the columns of a 6-layer model fit the page (the CSV keeps every digit)."""
    labels = depth_labels(r.num_depths)
    head = [
        t("probes.col.task"),
        t("probes.col.found"),
        t("probes.col.items"),
        t("probes.col.majority"),
        t("probes.col.best"),
    ]
    rows = []
    for s in r.scores:
        rows.append(
            dict(
                zip(
                    head,
                    (
                        task_name(s.task),
                        f"{s.found:,}",
                        f"{s.n_train} / {s.n_heldout}",
                        f"{s.majority:.1%}",
                        labels[s.best_depth],
                    ),
                )
            )
            | {labels[d]: f"{a:.0%}" for d, a in enumerate(s.accuracy)}
        )
        if s.control is not None:
            blank = dict.fromkeys(head[1:], "")
            rows.append(
                {head[0]: t("probes.control_row", task=task_name(s.task)), **blank}
                | {labels[d]: f"{a:.0%}" for d, a in enumerate(s.control)}
            )
            rows.append(
                {head[0]: t("probes.selectivity_row", task=task_name(s.task)), **blank}
                | {labels[d]: f"{a:+.0%}" for d, a in enumerate(s.selectivity)}
            )
    return rows


TABLE_WIDTH = 920  # px the table may take on a 1400 px wide window with the sidebar open (st.dataframe scrolls past)
META_WIDTHS = {"task": 190, "found": 70, "items": 110, "majority": 72, "best": 90}  # px, the columns before the depths


def table_columns(r: ProbeResult) -> dict:
    """Column widths that fit every depth of a 6-layer model beside the task's facts; the task column stays pinned
    when a deeper model's table scrolls. The embeddings column's header is shortened (its full name in the tip)."""
    labels = depth_labels(r.num_depths)
    cols = {
        t(f"probes.col.{k}"): st.column_config.TextColumn(width=w, pinned=k == "task") for k, w in META_WIDTHS.items()
    }
    depth_w = max(52, min(80, (TABLE_WIDTH - sum(META_WIDTHS.values())) // r.num_depths))
    for d, label in enumerate(labels):
        cols[label] = st.column_config.TextColumn(
            t("probes.embeddings_short") if d == 0 else label,
            width=depth_w,
            help=label if d == 0 else None,
            alignment="right",
        )
    return cols


def best_line(r: ProbeResult) -> str:
    """The best depth of every task, in words; and whether the last layer was the best."""
    labels = depth_labels(r.num_depths)
    parts = [
        t(
            "probes.best_part",
            task=task_name(s.task),
            depth=labels[s.best_depth],
            acc=f"{max(s.accuracy):.0%}",
            last=f"{s.accuracy[-1]:.0%}",
        )
        for s in r.scores
    ]
    not_last = sum(s.best_depth != r.num_depths - 1 for s in r.scores)
    return t("probes.best_line", parts="; ".join(parts), n=not_last, total=len(r.scores))


def _examples(s: TaskScore) -> None:
    st.markdown(f"**{task_name(s.task)}** — {t(f'probes.about.{s.task}')}")
    for label, text in s.examples:
        st.text(f"[{label}] {text}")


def plots_html(r: ProbeResult) -> bytes:
    """Both charts in one stand-alone HTML page (plotly.js inlined: it opens with no internet)."""
    figs = [f for f in (accuracy_chart(r), selectivity_chart(r)) if f is not None]
    body = "".join(f.to_html(full_html=False, include_plotlyjs=i == 0) for i, f in enumerate(figs))
    title = html.escape(r.checkpoint)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head><body>{body}</body></html>"
    ).encode()


def show_result(r: ProbeResult) -> None:
    """The whole result: summary, the two charts, the best depths, the table, the exports, the tasks' examples."""
    st.caption(
        t(
            "probes.summary",
            id=as_text(r.checkpoint),
            depths=r.num_depths,
            n=f"{r.corpus_sentences:,}",
            corpus=t(f"probes.corpus_in.{r.corpus}"),
            seconds=f"{r.seconds:,.0f}",
        )
    )
    coord = next((s for s in r.scores if s.task == "coord_inversion"), None)
    if coord is not None:
        st.info(t("probes.coord_found", n=coord.found, used=coord.n_train + coord.n_heldout))
    dropped = sum(s.dropped for s in r.scores)
    if dropped:
        st.info(t("probes.dropped", n=dropped))
    fig = accuracy_chart(r)
    st.plotly_chart(presenter.scale(fig), width="stretch", key=K("chart"))
    st.markdown(best_line(r))
    st.caption(t("probes.articles"))
    sel = selectivity_chart(r)
    if sel is not None:
        st.plotly_chart(presenter.scale(sel), width="stretch", key=K("sel_chart"))
        st.caption(t("probes.sel_caption"))
    st.dataframe(table_rows(r), hide_index=True, width="stretch", key=K("table"), column_config=table_columns(r))
    row = st.container(horizontal=True)  # the buttons side by side at their own widths
    download(row, t("probes.download_csv"), lambda: probes_csv(r), "probes.csv", "text/csv", K("dl_csv"))
    download(row, t("probes.download_plot"), lambda: plots_html(r), "probes.html", "text/html", K("dl_plot"))
    with st.expander(t("probes.examples")):
        for s in r.scores:
            _examples(s)
    record_once(
        K("recorded"),
        entry_id("probes", r.model_key, r.checkpoint, r.created),
        lambda: dict(
            page=t("nav.probes"),
            title=t("probes.report_title", id=r.checkpoint),
            inputs={
                t("probes.corpus"): t(f"probes.corpus_in.{r.corpus}"),
                t("probes.tasks"): ", ".join(task_name(s.task) for s in r.scores),
                t("probes.per_task"): r.config.get("per_task"),
            },
            rows=table_rows(r),
            text=best_line(r),
            figures=[f for f in (fig, sel) if f is not None],
        ),
    )

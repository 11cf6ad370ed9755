"""The Fine-tune page's slices (core.train.slices): a finished sequence run's held-out accuracy by slice, and two runs
side by side per slice with the rows where they disagree.

One keyword and one regular expression slice every run: the form above the runs (``slicing_form``) holds them, in
the URL like the page's other settings (FIELDS), so a link or the room's presenter brings them along. A bad pattern
is said under the form, and the runs are sliced without it. Tables are static (``st.table``: the text wraps, and
presenter view's larger font reaches them, which a data grid's canvas does not); each has its CSV. Token runs have no
slices (their held-out rows are words): their result says so."""

from __future__ import annotations

import io
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, urlstate
from app.kit.download_button import download
from app.kit.i18n import explain, t
from app.kit.plot_text import plot_text
from app.kit.render import as_text
from app.views.train.finetune import KEEP, K
from core.train.finetune import FinetuneResult
from core.train.slices import (
    KEYWORD_MAX,
    PATTERN_MAX,
    Comparison,
    Slice,
    SliceTable,
    check_keyword,
    check_pattern,
    compare,
    slice_table,
)

FIELDS = (
    urlstate.Field(K("slice_keyword"), max_len=KEYWORD_MAX),
    urlstate.Field(K("slice_regex"), max_len=PATTERN_MAX),
)
COLOURS = ("#4C78A8", "#F58518")  # run A, run B (the curves' first two)
TICK_WRAP = 28  # width units per line of a slice's name on the chart's axis (a CJK character is two)
SHOWN = 30  # disagreement rows in the table (the CSV has them all)


@dataclass(frozen=True)
class Slicing:
    """What every run is sliced by: a keyword and a pattern ("" for none; a bad pattern never gets here)."""

    keyword: str = ""
    pattern: str = ""


def slicing_form() -> Slicing:
    """The keyword and regex boxes (one pair for the page); a bad pattern's message under them."""
    st.markdown(t("slices.form_title"))
    with st.form(K("slices_form")):
        c = st.columns(2)
        keyword, pattern = (
            col.text_input(
                t(f"slices.{name}"),
                key=K(f"slice_{name}"),
                max_chars=limit,
                persist_state=KEEP,
                placeholder=t(f"slices.{name}_placeholder"),
                help=t(f"slices.{name}_help"),
            )
            for col, name, limit in ((c[0], "keyword", KEYWORD_MAX), (c[1], "regex", PATTERN_MAX))
        )
        st.form_submit_button(t("slices.apply"))
    try:
        keyword = check_keyword(keyword or "")
    except ValueError as e:  # a link's value longer than the box takes
        st.error(as_text(explain(e)))  # it quotes the person's keyword, pattern or texts
        keyword = ""
    try:
        if pattern:
            check_pattern(pattern)
    except ValueError as e:
        st.error(as_text(explain(e)))
        pattern = ""
    return Slicing(keyword, pattern or "")


# ---------------------------------------------------------------------------------------------- names
def slice_name(s: Slice) -> str:
    """A slice as the tables and the chart name it, in the session's language."""
    if s.kind == "label":
        return t("slices.name.label", label=s.value)
    if s.kind == "length" and isinstance(s.value, tuple):
        low, high = s.value
        if low == high:
            return t("slices.name.one_word") if low == 1 else t("slices.name.length_one", words=low)
        return t("slices.name.length", low=low, high=high)
    if s.kind in ("keyword", "regex"):
        return t(f"slices.name.{s.kind}_{'has' if s.has else 'lacks'}", text=s.value)
    return t("slices.name.all")


def _pct(x: float) -> str:
    return f"{x:.1%}"


def _interval(low: float, high: float) -> str:
    return f"{low * 100:.1f}–{high * 100:.1f}%"


def _with_interval(s) -> str:
    """An accuracy and its interval in one short cell: "44.2% (35.6–53.1)"."""
    return f"{s.accuracy:.1%} ({s.low * 100:.1f}–{s.high * 100:.1f})"


def _csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    pd.DataFrame(rows).to_csv(buf, index=False, float_format="%.6f")
    return buf.getvalue()


def _ids(s: Slice) -> dict:
    """A slice's columns in a CSV: its name, kind, value and whether it holds the keyword or pattern."""
    value = f"{s.value[0]}-{s.value[1]}" if isinstance(s.value, tuple) else s.value
    return dict(slice=slice_name(s), kind=s.kind, value="" if value is None else value, has=int(s.has))


# ---------------------------------------------------------------------------------------------- one run
def run_slices(name: str, result: FinetuneResult, slicing: Slicing | None) -> None:
    """A finished run's slices: the empty slices' notes, a table (rows, accuracy, its 95% interval, macro-F1), a bar
    chart with the interval as error bars, and the CSV. Nothing for a token run (its held-out rows are words)."""
    if result.config.task != "sequence":
        return
    st.markdown(t("slices.title"))
    slicing = slicing or Slicing()
    try:
        table = slice_table(result, slicing.keyword, slicing.pattern)
    except ValueError as e:
        st.error(as_text(explain(e)))
        return
    st.caption(t("slices.caption"))
    for note in table.notes:
        st.info(as_text(explain(note)))
    cols = {c: t(f"slices.col.{c}") for c in ("slice", "rows", "accuracy", "interval", "macro_f1")}
    shown = [
        {
            cols["slice"]: slice_name(s.slice),
            cols["rows"]: f"{s.n:,}",
            cols["accuracy"]: _pct(s.accuracy),
            cols["interval"]: _interval(s.low, s.high),
            cols["macro_f1"]: "—" if s.macro_f1 is None else f"{s.macro_f1:.3f}",
        }
        for s in table.stats
    ]
    st.table(pd.DataFrame(shown), hide_index=True)
    st.plotly_chart(presenter.scale(slices_chart(table)), key=K(f"slices.chart.{name}"))
    csv = [
        dict(
            **_ids(s.slice),
            n=s.n,
            correct=s.correct,
            accuracy=s.accuracy,
            ci_low=s.low,
            ci_high=s.high,
            macro_f1=s.macro_f1,
        )
        for s in table.stats
    ]
    download(st, t("slices.csv"), lambda: _csv(csv), f"{name}-slices.csv", "text/csv", K(f"slices.csv.{name}"))


def _tick(s: Slice, n: int) -> str:
    return presenter.wrap_text(plot_text(t("slices.fig.tick", name=slice_name(s), count=f"{n:,}")), TICK_WRAP)


def _layout(fig: go.Figure, bars: int) -> go.Figure:
    """Accuracy on x (0 to 100%), the slices down the y axis in table order, the legend (two runs) below."""
    return fig.update_layout(
        height=120 + 34 * bars,
        margin=dict(l=10, r=20, t=64, b=40),  # room for presenter view's larger title
        xaxis=dict(range=[0, 1.02], tickformat=".0%", title=t("slices.fig.accuracy")),
        yaxis=dict(autorange="reversed", automargin=True),
        title=t("slices.fig.title"),
        legend=dict(orientation="h", y=-0.1),  # below the plot (presenter.scale keeps it clear of the x labels)
        bargap=0.25,
    )


def _bar(ticks: list[str], stats, colour: str, name: str = "") -> go.Bar:
    """Horizontal bars of ``stats``' accuracies, each with its 95% Wilson interval as the error bar."""
    return go.Bar(
        y=ticks,
        x=[s.accuracy for s in stats],
        name=plot_text(name),
        orientation="h",
        marker_color=colour,
        error_x=dict(
            type="data",
            array=[s.high - s.accuracy for s in stats],
            arrayminus=[s.accuracy - s.low for s in stats],
            thickness=2,
        ),
        hovertemplate="%{y}<br>%{x:.1%}<extra>" + plot_text(name) + "</extra>",
    )


def slices_chart(table: SliceTable) -> go.Figure:
    """One horizontal bar per slice: its accuracy, the 95% Wilson interval as the error bar, its rows in the name."""
    stats = table.stats
    fig = go.Figure(_bar([_tick(s.slice, s.n) for s in stats], stats, COLOURS[0]))
    fig.add_vline(x=stats[0].accuracy, line_dash="dash", line_color="#888")  # all rows: what the others differ from
    return _layout(fig, len(stats))


# ---------------------------------------------------------------------------------------------- two runs
def _run_label(name: str, r: FinetuneResult) -> str:
    c = r.config
    pooling = t(f"finetune.pooling_opt.{c.pooling}")
    checkpoint = c.checkpoint.rstrip("/").rsplit("/", 1)[-1]  # its name, not the folder it came from
    return t("slices.cmp.run_label", run=name, checkpoint=checkpoint, seed=c.seed, pooling=pooling)


def compare_two(runs: list[tuple[str, FinetuneResult]], slicing: Slicing | None) -> None:
    """Two of the finished sequence runs (picked) per slice, side by side, and the held-out rows where their
    predictions disagree; the comparison's refusal (different held-out sets) in words."""
    st.markdown(t("slices.cmp.title"))
    if len(runs) < 2:
        st.caption(t("slices.cmp.need_two"))
        return
    by_name = dict(runs)
    names = list(by_name)
    c = st.columns(2)
    label = {n: _run_label(n, by_name[n]) for n in names}
    for side, first in (("slices.run_a", names[0]), ("slices.run_b", names[1])):
        if st.session_state.get(K(side)) not in names:  # the first two runs, or a kept one that is gone
            st.session_state[K(side)] = first
    urlstate.relabel((K("slices.run_a"), K("slices.run_b")))  # their labels are in the session's language
    a = c[0].selectbox(t("slices.cmp.run_a"), names, key=K("slices.run_a"), format_func=label.get)
    b = c[1].selectbox(t("slices.cmp.run_b"), names, key=K("slices.run_b"), format_func=label.get)
    if a == b:
        st.info(t("slices.cmp.same_run"))
        return
    slicing = slicing or Slicing()
    try:
        cmp = compare(by_name[a], by_name[b], slicing.keyword, slicing.pattern)
    except ValueError as e:
        st.error(as_text(explain(e)))
        return
    for note in cmp.notes:
        st.info(as_text(explain(note)))
    _pair_table(cmp, a, b)
    st.plotly_chart(presenter.scale(pair_chart(cmp, a, b)), key=K("slices.cmp.chart"))
    _disagreements(cmp, a, b)


def _pair_table(cmp: Comparison, a: str, b: str) -> None:
    cols = {c: t(f"slices.col.{c}") for c in ("slice", "rows", "difference")}
    acc_a, acc_b = (t("slices.col.accuracy_of", side=side) for side in "AB")
    only_a, only_b = (t("slices.col.only_right", side=side) for side in "AB")
    shown = [
        {
            cols["slice"]: slice_name(p.slice),
            cols["rows"]: f"{p.a.n:,}",
            acc_a: _with_interval(p.a),
            acc_b: _with_interval(p.b),
            cols["difference"]: f"{p.difference * 100:+.1f}",
            only_a: f"{p.a_only:,}",
            only_b: f"{p.b_only:,}",
        }
        for p in cmp.pairs
    ]
    table = pd.DataFrame(shown)
    if presenter.is_on():  # seven columns at projector size wrap a header a character a line: the counts go
        table = table.drop(columns=[only_a, only_b])  # (they stay in the CSV)
    st.caption(t("slices.cmp.caption_present" if presenter.is_on() else "slices.cmp.caption", run_a=a, run_b=b))
    st.table(table, hide_index=True)
    csv = [
        dict(
            **_ids(p.slice),
            n=p.a.n,
            accuracy_a=p.a.accuracy,
            ci_low_a=p.a.low,
            ci_high_a=p.a.high,
            accuracy_b=p.b.accuracy,
            ci_low_b=p.b.low,
            ci_high_b=p.b.high,
            difference=p.difference,
            a_only=p.a_only,
            b_only=p.b_only,
        )
        for p in cmp.pairs
    ]
    download(st, t("slices.csv"), lambda: _csv(csv), f"{a}-{b}-slices.csv", "text/csv", K("slices.cmp.csv"))


def pair_chart(cmp: Comparison, a: str, b: str) -> go.Figure:
    """Both runs' accuracy per slice as grouped horizontal bars, each with its 95% interval."""
    ticks = [_tick(p.slice, p.a.n) for p in cmp.pairs]
    fig = go.Figure(
        [
            _bar(ticks, [p.a for p in cmp.pairs], COLOURS[0], t("slices.fig.run", side="A", run=a)),
            _bar(ticks, [p.b for p in cmp.pairs], COLOURS[1], t("slices.fig.run", side="B", run=b)),
        ]
    )
    fig.update_layout(barmode="group", bargroupgap=0.05)
    return _layout(fig, int(1.6 * len(cmp.pairs)))


def _disagreements(cmp: Comparison, a: str, b: str) -> None:
    """The rows where the two runs predict different labels, within a slice picked from the comparison's."""
    st.markdown(t("slices.cmp.disagree_title"))
    if not cmp.disagree:
        st.success(t("slices.cmp.agree_everywhere"))
        return
    urlstate.relabel((K("slices.cmp.within"),))  # its labels are in the session's language
    pick = st.selectbox(
        t("slices.cmp.within"),
        range(len(cmp.pairs)),
        key=K("slices.cmp.within"),
        format_func=lambda i: slice_name(cmp.pairs[i].slice),
    )
    inside = set(cmp.pairs[pick or 0].slice.rows)
    rows = [d for d in cmp.disagreements if d.row in inside]
    st.caption(t("slices.cmp.disagree_count", count=len(rows), total=cmp.disagree, shown=min(len(rows), SHOWN)))
    if not rows:
        return
    cols = {c: t(f"slices.col.{c}") for c in ("row", "text", "gold")}
    pred_a, pred_b = (t("slices.col.predicts", run=n) for n in (a, b))
    shown = [
        {
            cols["row"]: d.row + 1,
            cols["text"]: d.text,
            cols["gold"]: d.gold,
            pred_a: f"{d.pred_a} ({d.conf_a:.0%})",
            pred_b: f"{d.pred_b} ({d.conf_b:.0%})",
        }
        for d in rows[:SHOWN]
    ]
    st.table(pd.DataFrame(shown), hide_index=True)
    csv = [
        dict(
            row=d.row + 1, text=d.text, gold=d.gold, pred_a=d.pred_a, conf_a=d.conf_a, pred_b=d.pred_b, conf_b=d.conf_b
        )
        for d in rows
    ]
    download(
        st,
        t("slices.cmp.disagree_csv"),
        lambda: _csv(csv),
        f"{a}-{b}-disagreements.csv",
        "text/csv",
        K("slices.cmp.dis_csv"),
    )

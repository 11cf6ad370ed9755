"""The Attributions page's Counterfactuals tab (core.inspect.counterfactual): what would change the answer. The
inputs (the text, and for a pair both sentences), the edit budget, the goal and where the words come from (the
masked LM, or HotFlip's gradient as the reference); then each counterfactual with its diff highlighted, the new
prediction, the probability left to the original answer, the number of edits and its fluency against the original,
a scatter of fluency against that probability, a CSV, and a button that sends a counterfactual to the One input tab.
pages/attribution.py starts the work; this module draws."""

from __future__ import annotations

import csv
import html
import io
import math
from collections.abc import Callable
from dataclasses import dataclass

import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, urlstate
from app.kit.download_button import download
from app.kit.exports import NEGATIVE, POSITIVE
from app.kit.i18n import explain, t
from app.kit.plot_text import plot_texts
from app.views.inspect.attention import option_labels
from app.views.inspect.attribution_widgets import K
from core.base.messages import Message, carry
from core.inspect.counterfactual import GOALS, PROPOSERS, Counterfactual, CounterfactualConfig, CounterfactualResult

TARGETS = ("mask", "pair", "class")  # the page's targets a counterfactual serves (not one word's tag)
INPUTS = (  # what a search is made from: a link (or a room's presenter) that sets one of these runs it
    urlstate.Field(K("cf.text")),
    urlstate.Field(K("cf.text_b")),
    urlstate.Field(K("cf.budget"), "int", lo=0, hi=5),
    urlstate.Field(K("cf.goal"), choices=GOALS),
    urlstate.Field(K("cf.proposer"), choices=PROPOSERS),
)
FIELDS = INPUTS


@dataclass(frozen=True)
class CfAsk:
    """What the tab holds now: the config (None when it is refused, with ``error``), and the button."""

    cfg: CounterfactualConfig | None
    error: Message | None = None
    go: bool = False


def defaults(target: str) -> None:
    """The search starts from the One input tab's text (and second sentence) until one is typed here."""
    st.session_state.setdefault(K("cf.budget"), 2)
    st.session_state.setdefault(K("cf.goal"), "flip")
    st.session_state.setdefault(K("cf.proposer"), "mlm")
    # filled once, and again when the target changes while the box still holds what was filled in (a typed or
    # cleared text, or a link's, stays)
    filled = st.session_state.get(K("cf.filled"))
    box = st.session_state.get(K("cf.text"))
    if box is None or (filled is not None and filled[0] != target and box == filled[1]):
        st.session_state[K("cf.text")] = st.session_state.get(K(f"text.{target}"), "")
        st.session_state[K("cf.filled")] = (target, st.session_state[K("cf.text")])
    if target == "pair" and K("cf.text_b") not in st.session_state:
        st.session_state[K("cf.text_b")] = st.session_state.get(K("text_b"), "")


def inputs(target: str, linked: bool = False) -> CfAsk:
    """The tab's inputs and its button; the ask the page runs (``linked``: a link asks for the search, as the button
    would). Inputs it refuses are an error only when the search is asked for (as in patching.inputs)."""
    st.caption(t("counterfactual.intro"))
    if target not in TARGETS:
        st.info(t("counterfactual.no_token_target"))
        return CfAsk(None)
    defaults(target)
    text = st.text_area(t("counterfactual.text"), key=K("cf.text"))
    text_b = st.text_input(t("attribution.sentence_b"), key=K("cf.text_b")) if target == "pair" else ""
    with presenter.settings():
        c1, c2, c3 = st.columns([1, 2, 2], vertical_alignment="bottom")
        budget = c1.number_input(
            t("counterfactual.budget"), 0, 5, key=K("cf.budget"), help=t("counterfactual.budget_help")
        )
        goal = c2.segmented_control(
            t("counterfactual.goal"),
            list(GOALS),
            key=K("cf.goal"),
            required=True,
            format_func=option_labels(GOALS, lambda x: t(f"counterfactual.goal_opt.{x}")),
        )
        proposer = c3.segmented_control(
            t("counterfactual.proposer"),
            list(PROPOSERS),
            key=K("cf.proposer"),
            required=True,
            format_func=option_labels(PROPOSERS, lambda x: t(f"counterfactual.proposer_opt.{x}")),
            help=t("counterfactual.proposer_help"),
        )
    go_row = st.container(horizontal=True, vertical_alignment="center", gap="medium")  # the button's own width
    go = go_row.button(t("counterfactual.go"), type="primary", key=K("cf.go"))
    try:
        cfg = CounterfactualConfig(
            target=target, text=text, text_b=text_b, budget=int(budget), goal=goal or "flip", proposer=proposer or "mlm"
        )
    except ValueError as e:  # bad input: nothing runs; an error if a search was asked for, else why, as a caption
        if go or linked:
            st.error(explain(e))
        else:
            go_row.caption(t("counterfactual.refused", why=explain(e)))
        return CfAsk(None, carry(e), bool(go))
    return CfAsk(cfg, go=bool(go))


# ---------------------------------------------------------------------------------------------- drawing
def diff_html(c: Counterfactual, original: tuple[str, ...], large: bool = False) -> str:
    """The edited text with each replaced word struck through (red) and its replacement beside it (green), escaped;
    ``large``: at presenter view's text size (its style reaches Markdown, not this HTML)."""
    parts = []
    for part, text in enumerate(original):
        out, at = [], 0
        for e in sorted((e for e in c.edits if e.part == part), key=lambda e: e.start):
            out.append(html.escape(text[at : e.start]))
            out.append(f'<del style="color:{NEGATIVE}">{html.escape(e.old)}</del>')
            out.append(  # a margin, not a space: Chinese text has none between words
                f'<ins style="color:{POSITIVE};font-weight:600;text-decoration:none;margin-left:.3em">'
                f"{html.escape(e.new)}</ins>"
            )
            at = e.end
        out.append(html.escape(text[at:]))
        parts.append("".join(out))
    size = "1.25rem" if large else "1rem"
    return f'<div class="cf-diff" style="line-height:1.8;font-size:{size}">' + " ‖ ".join(parts) + "</div>"


def scatter(res: CounterfactualResult) -> go.Figure:
    """Each counterfactual: its fluency against the original (x) and the probability left to the original answer
    (y); flips in green. Down and to the right is best: fluent edits that take the answer away."""
    fig = go.Figure()
    for flipped in (True, False):
        found = [c for c in res.found if c.flipped == flipped]
        if not found:
            continue
        fig.add_trace(
            go.Scatter(
                x=[c.fluency_change for c in found],
                y=[c.p_original for c in found],
                mode="markers",
                marker=dict(size=11, color=POSITIVE if flipped else NEGATIVE),
                name=t("counterfactual.flipped" if flipped else "counterfactual.not_flipped"),
                text=plot_texts(" ".join(c.texts) for c in found),
                hovertemplate=t("counterfactual.hover"),
            )
        )
    fig.add_vline(x=0, line=dict(color="#999999", dash="dot"))
    fig.update_layout(
        xaxis_title=t("counterfactual.fig.x"),
        yaxis_title=t("counterfactual.fig.y", answer=plot_texts([explain(res.original)])[0]),
        yaxis=dict(range=[-0.02, 1.02], tickformat=".0%"),
        height=360,
        margin=dict(t=30, b=10),
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


def to_csv(res: CounterfactualResult) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(
        [
            "text",
            "text_b",
            "edits",
            "replaced",
            "prediction",
            "p_prediction",
            "p_original",
            "flipped",
            "pll",
            "pll_original",
        ]
    )
    for c in res.found:
        edits = "; ".join(f"{e.old} -> {e.new}" for e in c.edits)
        b = c.texts[1] if len(c.texts) > 1 else ""
        w.writerow(
            [
                c.texts[0],
                b,
                len(c.edits),
                edits,
                explain(c.prediction),
                f"{c.p_prediction:.6g}",
                f"{c.p_original:.6g}",
                int(c.flipped),
                f"{c.pll:.6g}",
                f"{c.pll_original:.6g}",
            ]
        )
    return buf.getvalue()


def show(res: CounterfactualResult, key: str, send: Callable[[Counterfactual], None]) -> None:
    """The search's result; ``send(c)`` puts a counterfactual into the One input tab (a button's callback)."""
    st.markdown(t("counterfactual.original", answer=explain(res.original), probability=f"{res.p_original:.1%}"))
    proposer = (
        t("counterfactual.proposer_opt.hotflip") if res.proposer == "hotflip" else res.proposer.split(": ", 1)[-1]
    )
    st.caption(t("counterfactual.searched", evaluated=res.evaluated, proposer=proposer, seconds=f"{res.seconds:.1f}"))
    if not res.found:
        st.info(t("counterfactual.none_found", budget=res.budget))
        return
    if not any(c.flipped for c in res.found):
        st.warning(t("counterfactual.no_flip_within", budget=res.budget))
    for i, c in enumerate(res.found):
        box = st.container(border=True)
        box.html(diff_html(c, res.texts, presenter.is_on()))
        line = t(
            "counterfactual.line",
            prediction=explain(c.prediction),
            probability=f"{c.p_prediction:.1%}",
            answer=explain(res.original),
            p_original=f"{c.p_original:.1%}",
            edits=len(c.edits),
            fluency=f"{c.fluency_change:+.2f}" if math.isfinite(c.fluency_change) else "—",
        )
        row = box.container(horizontal=True, vertical_alignment="center")
        icon = ":material/check_circle: " if c.flipped else ""  # i18n: ok (an icon of the icon font, not an emoji)
        row.markdown(icon + line)
        row.button(t("counterfactual.send"), key=f"{key}.send.{i}", on_click=send, args=(c,))
    if any(math.isfinite(c.fluency_change) for c in res.found):
        st.caption(t("counterfactual.fluency_help"))
        st.plotly_chart(presenter.scale(scatter(res)), key=f"{key}.scatter")
    else:  # HotFlip on a classifier whose family has no bundled MLM: nothing to score fluency with
        st.caption(t("counterfactual.no_fluency"))
    download(st, t("counterfactual.download_csv"), lambda: to_csv(res), "counterfactuals.csv", "text/csv", f"{key}.csv")


def on_done(target: str) -> Callable:
    """The job panel's callback: draw the result, with Send wired to the One input tab of ``target``."""

    def send(c: Counterfactual) -> None:
        st.session_state[K(f"text.{target}")] = c.texts[0]
        if target == "pair" and len(c.texts) > 1:
            st.session_state[K("text_b")] = c.texts[1]
        st.session_state[K("tab")] = "one"  # the page opens the One input tab from this (and puts it in the URL)
        st.session_state[K("go_now")] = True  # ... and explains it there, as its Explain button would

    return lambda job: show(job.result, K("cf.result"), send)

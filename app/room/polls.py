"""The walkthrough's check question as a room poll: followers' answers go to the store; the presenter sees them as
a bar chart and reveals the answer for everyone."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from app.kit import live, presenter
from app.kit.i18n import explain, t
from app.kit.plot_text import plot_texts
from app.room.session import ANSWERED, CLOSED, CODE, KEY, NOTICE, in_room, is_presenter, member, rooms
from core.base.messages import carry
from core.runtime import room as R


def poll(step: int, choice: int | None, options: list[str], correct: int | None = None) -> bool | None:
    """The walkthrough check question of ``step`` as a poll. Outside a room: None (the page reveals by itself).
    A follower's choice goes to the store; the presenter sees the answers as a bar chart, with Reveal, and once
    revealed the right option (``correct``) marked on it and named under it. Returns whether the presenter revealed
    the answer."""
    if not in_room() or st.session_state.get(CLOSED):
        return None
    code = st.session_state[CODE]
    try:
        if is_presenter():
            _poll_panel(step, options, correct)
            return step in rooms().view(code).revealed
        sent = st.session_state.setdefault(ANSWERED, {})
        if sent.get(step, None) != choice and choice is not None:
            rooms().answer(code, member(), step, choice)
            sent[step] = choice
        revealed = step in rooms().view(code).revealed
    except R.RoomError as e:
        st.error(explain(e))
        return None
    if not revealed:
        st.caption(t("room.poll_sent") if choice is not None else t("room.poll_wait"))
    return revealed


def presenting() -> bool:
    """This session presents an open room: its poll panel shows the answer, so the page gives no verdict on a
    choice of its own (the presenter does not answer)."""
    return is_presenter() and not st.session_state.get(CLOSED)


WRAP = 26  # width units per line of an option's label: a long option wraps instead of pushing the bars off
BAR = "#4C78A8"
RIGHT, OTHER = "#2E7D32", "#B0B7C3"  # once revealed: the right option green, the others grey


def tally_chart(tally: R.Tally, options: list[str], correct: int | None = None) -> go.Figure:
    """The room's answers: one horizontal bar per option, its count on it; each option's full text, wrapped, as its
    label. With ``correct`` (the answer is revealed) that option's bar is green and its label bold with a check
    mark, the others grey."""
    shown = plot_texts(options)  # as typed: plotly would read HTML in a label
    labels = [presenter.wrap_text(o, WRAP) for o in shown]  # every word kept, the first ones included
    if correct is not None:
        labels[correct] = f'<span style="color:{RIGHT}"><b>✓ ' + labels[correct] + "</b></span>"
    colors = (
        [BAR] * len(options) if correct is None else [RIGHT if i == correct else OTHER for i in range(len(options))]
    )
    lines = [lab.count("<br>") + 1 for lab in labels]
    fig = go.Figure(
        go.Bar(
            x=list(tally.counts),
            y=list(range(len(options))),
            orientation="h",
            marker_color=colors,
            text=[str(c) for c in tally.counts],
            textposition="auto",
            customdata=shown,
            hovertemplate="%{customdata}: %{x}<extra></extra>",
        )
    )
    fig.update_layout(
        xaxis_title=t("room.poll_x"),
        yaxis=dict(
            autorange="reversed", automargin=True, tickmode="array", tickvals=list(range(len(options))), ticktext=labels
        ),
        xaxis=dict(rangemode="tozero", dtick=1 if max(tally.counts, default=0) < 10 else None),
        margin=dict(t=10, b=10, l=10, r=10),
        height=90 + sum(max(60, 18 * n + 24) for n in lines),
    )
    return fig


def _toggle_reveal(step: int, on: bool) -> None:
    try:
        rooms().reveal(st.session_state[CODE], st.session_state[KEY], step, on)
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", carry(e))


@live.every(R.limits().poll_s)
def _poll_panel(step: int, options: list[str], correct: int | None) -> None:
    code, key = st.session_state[CODE], st.session_state[KEY]
    try:
        tally = rooms().tally(code, key, step, len(options))
        view = rooms().view(code)
    except R.RoomError as e:
        st.error(explain(e))
        return
    box = st.container(border=True, key=f"room-poll-{step}")
    revealed = step in view.revealed
    right = correct if revealed else None
    box.markdown("##### " + t("room.poll_title", n=tally.answered, following=view.following))
    box.plotly_chart(
        presenter.scale(tally_chart(tally, options, right)),
        key=f"room.poll_chart.{step}",
        config={"displayModeBar": False},
    )
    if right is not None:
        box.success(t("room.poll_answer", answer=options[right]), icon=":material/check_circle:")
    if box.button(
        t("room.hide_answer") if revealed else t("room.reveal"),
        key=f"room.reveal.{step}",
        type="secondary" if revealed else "primary",
        icon=":material/visibility:",
    ):
        _toggle_reveal(step, not revealed)
        st.rerun(scope="app")  # the answer below the chart is drawn by the page

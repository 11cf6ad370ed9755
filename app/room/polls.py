"""The walkthrough's check question as a room poll: followers' answers go to the store; the presenter sees them as
a bar chart and reveals the answer for everyone."""
from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter
from app.kit.i18n import t
from app.room.session import ANSWERED, CLOSED, CODE, KEY, NOTICE, in_room, is_presenter, member, rooms
from core.runtime import room as R


def poll(step: int, choice: int | None, options: list[str]) -> bool | None:
    """The walkthrough check question of ``step`` as a poll. Outside a room: None (the page reveals by itself).
    A follower's choice goes to the store; the presenter sees the answers as a bar chart, with Reveal. Returns
    whether the presenter revealed the answer."""
    if not in_room() or st.session_state.get(CLOSED):
        return None
    code = st.session_state[CODE]
    try:
        if is_presenter():
            _poll_panel(step, options)
            return step in rooms().view(code).revealed
        sent = st.session_state.setdefault(ANSWERED, {})
        if sent.get(step, None) != choice and choice is not None:
            rooms().answer(code, member(), step, choice)
            sent[step] = choice
        revealed = step in rooms().view(code).revealed
    except R.RoomError as e:
        st.error(str(e))
        return None
    if not revealed:
        st.caption(t("room.poll_sent") if choice is not None else t("room.poll_wait"))
    return revealed


def tally_chart(tally: R.Tally, options: list[str]) -> go.Figure:
    """The room's answers: one horizontal bar per option, its count on it."""
    fig = go.Figure(go.Bar(x=list(tally.counts), y=options, orientation="h", marker_color="#4C78A8",
                           text=[str(c) for c in tally.counts], textposition="auto",
                           hovertemplate="%{y}: %{x}<extra></extra>"))
    fig.update_layout(xaxis_title=t("room.poll_x"), yaxis=dict(autorange="reversed", automargin=True),
                      xaxis=dict(rangemode="tozero", dtick=1 if max(tally.counts, default=0) < 10 else None),
                      margin=dict(t=10, b=10, l=10, r=10), height=90 + 60 * len(options))
    return fig


def _toggle_reveal(step: int, on: bool) -> None:
    try:
        rooms().reveal(st.session_state[CODE], st.session_state[KEY], step, on)
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", str(e))


@st.fragment(run_every=R.limits().poll_s)
def _poll_panel(step: int, options: list[str]) -> None:
    code, key = st.session_state[CODE], st.session_state[KEY]
    try:
        tally = rooms().tally(code, key, step, len(options))
        view = rooms().view(code)
    except R.RoomError as e:
        st.error(str(e))
        return
    box = st.container(border=True, key=f"room-poll-{step}")
    box.markdown("##### " + t("room.poll_title", n=tally.answered, following=view.following))
    box.plotly_chart(presenter.scale(tally_chart(tally, options)), key=f"room.poll_chart.{step}",
                     config={"displayModeBar": False})
    revealed = step in view.revealed
    if box.button(t("room.hide_answer") if revealed else t("room.reveal"), key=f"room.reveal.{step}",
                  type="secondary" if revealed else "primary", icon=":material/visibility:"):
        _toggle_reveal(step, not revealed)
        st.rerun(scope="app")  # the answer below the chart is drawn by the page

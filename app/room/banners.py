"""The room's banners above the page: the presenter's (code, link, QR code, following count), a follower's (polls the
store every poll_s and switches to the presenter's page, like a deep link), and the closed room's notice."""

from __future__ import annotations

from urllib.parse import urlsplit

import streamlit as st

from app import nav
from app.kit import live
from app.kit.i18n import t
from app.kit.render import as_text
from app.room.joining import join_link, qr_svg
from app.room.session import (
    CLOSED,
    CODE,
    FOLLOWING,
    LANDING,
    PAGE_PATH,
    SEEN,
    SHOW_QR,
    is_follower,
    is_presenter,
    leave,
    member,
    rooms,
)
from core.runtime import room as R


def closed_banner() -> None:
    """The closed room's notice: the presenter reads what their closing did (or that the room closed by itself);
    a follower, that the presenter ended it (or it closed by itself) and that their own session goes on."""
    why, code = st.session_state[CLOSED], st.session_state[CODE]
    if is_presenter():
        st.info(
            t("room.closed_by_you" if why == R.BY_PRESENTER else "room.closed_idle_presenter", code=code),
            icon=":material/door_front:",
        )
        st.button(t("room.closed_dismiss"), key="room.leave_closed", on_click=leave, icon=":material/check:")
        return
    st.warning(
        t("room.closed_presenter" if why == R.BY_PRESENTER else "room.closed_idle", code=code),
        icon=":material/door_front:",
    )
    st.button(t("room.leave"), key="room.leave_closed", on_click=leave, icon=":material/logout:")


def _mark_closed(view: R.RoomView | None) -> None:
    st.session_state[CLOSED] = view.closed_reason if view is not None else R.BY_IDLE


def _apply(view: R.RoomView) -> None:
    """Show the presenter's state: switch to its page with its query parameters (a full rerun), like a deep link."""
    st.session_state[SEEN] = (view.state_version, view.shared_version)
    try:
        target = nav.page_obj(view.state.page)
    except KeyError:  # a page this install lacks: stay where we are
        return
    st.session_state[LANDING] = True
    query = {**view.state.as_dict(), R.ROOM_PARAM: view.code}
    if st.session_state.get(PAGE_PATH) == target.url_path:
        # Already on the presenter's page (it typed and ran something there): the new query and a rerun, which
        # urlstate.bind restores from. A switch_page to the page the browser shows, with another query, left it
        # drawing nothing under the banner now and then (the Ray e2e test's follower, 3 runs in 6 under load).
        st.query_params.from_dict(query)
        st.rerun(scope="app")
    # The session switches page with the presenter's query (urlstate.bind restores it). Streamlit's client then
    # shows the new page's path but keeps its own query string in the address bar; the room code is in it, so a
    # reload joins again and catches up.
    st.switch_page(target, query_params=query)


def apply_before_drawing() -> None:
    """In a full run (a join, a click), switch to a newer presenter state before anything is drawn, as
    app/nav.follow_deep_link does: a switch in a session's first run after elements were sent can leave the
    browser on its loading skeleton."""
    if not st.session_state.get(FOLLOWING):
        return
    try:
        view = rooms().view(st.session_state[CODE])
    except R.RoomError:
        return
    if view.open and view.state is not None and view.state_version != st.session_state.get(SEEN, (0, 0))[0]:
        _apply(view)


def _break_away() -> None:
    st.session_state[FOLLOWING] = False


def _catch_up() -> None:
    st.session_state[FOLLOWING] = True
    st.session_state[SEEN] = (-1, st.session_state.get(SEEN, (0, 0))[1])  # the next poll applies the latest state


@live.every(R.limits().poll_s)
def follower_banner() -> None:
    code = st.session_state.get(CODE)
    if code is None or st.session_state.get(CLOSED) or not is_follower():
        return
    following = bool(st.session_state.get(FOLLOWING))
    try:
        step = R.follow_step(rooms(), code, member(), st.session_state.get(SEEN, (0, 0)), following)
    except R.RoomError:  # the room was evicted long after it closed
        step = None
    if step is None or step.action == R.CLOSED:
        _mark_closed(step.view if step else None)
        st.rerun(scope="app")  # the banner becomes the static "closed" notice; polling stops
    view = step.view
    if step.action == R.APPLY:
        if live.fragment_run():  # a page switch from a fragment's own run leaves the browser's address bar behind:
            st.rerun(scope="app")  # switch from the full run this starts (it runs this fragment inline)
        _apply(view)
    elif step.action == R.REFRESH:
        st.session_state[SEEN] = (st.session_state.get(SEEN, (0, 0))[0], view.shared_version)
        st.rerun(scope="app")  # a revealed answer or a picked sentence is drawn by the page
    where = nav.title(next((p for p in nav.PAGES if p.url == view.state.page), nav.PAGES[0])) if view.state else "—"
    box = st.container(border=True, key="room-banner")
    c1, c2 = box.columns([5, 1], vertical_alignment="center")
    if following:
        c1.info(t("room.following", code=code, page=where), icon=":material/cast_connected:")
        c2.button(
            t("room.break_away"),
            key="room.break_away",
            on_click=_break_away,
            icon=":material/call_split:",
            width="stretch",
        )
    else:
        c1.warning(t("room.on_your_own", code=code, page=where), icon=":material/person:")
        c2.button(
            t("room.catch_up"),
            key="room.catch_up",
            on_click=_catch_up,
            type="primary",
            icon=":material/fast_forward:",
            width="stretch",
        )


@live.every(2 * R.limits().poll_s)
def presenter_banner() -> None:
    code = st.session_state.get(CODE)
    if code is None or not is_presenter():
        return
    try:
        view = rooms().view(code)
    except R.RoomError:
        view = None
    if view is None or not view.open:
        _mark_closed(view)
        st.rerun(scope="app")
    link = join_link(code)
    box = st.container(border=True, key="room-presenter")
    # One column: at 1280x720 in the presenter's large type a metric column beside the link was 140 px wide and cut
    # its label ("Follo…", "正在…"); the count stands on the first line instead, with its help.
    box.markdown(
        t("room.presenting_following", code=code, n=view.following), help=t("room.following_help", n=view.members)
    )
    local = urlsplit(link).hostname in ("localhost", "127.0.0.1", "::1")
    shown = bool(st.session_state.get(SHOW_QR))
    # The localhost hint stands under the link while the join code is shown (when people are about to join); with the
    # code hidden it is the link's help, so the box stays two lines at 1280x720 in the presenter's type (#46).
    box.markdown(t("room.join_at", link=as_text(link)), help=t("room.localhost_hint") if local and not shown else None)
    if local and shown:
        box.caption(t("room.localhost_hint"))
    if shown:
        q1, q2 = box.columns([1, 3], vertical_alignment="center")
        q1.image(qr_svg(link), width=240)
        q2.markdown(f"# {code}")
        q2.caption(t("room.qr_help"))

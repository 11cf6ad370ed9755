"""Getting into a room: from the URL (?room=CODE, &key=SECRET for the presenter), the followers' link and its QR
code, and the sidebar's Start / Join / Close controls."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import streamlit as st

from app.kit import presenter
from app.kit.i18n import t
from app.room.session import (
    ANSWERED,
    CLOSED,
    CODE,
    FOLLOWER,
    FOLLOWING,
    JOIN_INPUT,
    KEY,
    NOTICE,
    PAGE_PATH,
    PRESENTER,
    ROLE,
    SEEN,
    SHOW_QR,
    in_room,
    is_presenter,
    leave,
    member,
    rooms,
)
from core.base.messages import carry
from core.runtime import room as R


def join_from_url() -> None:
    """Join (or start presenting) the room the URL names; a wrong code or closed room gets a clear message."""
    raw = st.query_params.get(R.ROOM_PARAM)
    key = st.query_params.get(R.KEY_PARAM)
    if raw is None:
        if key is not None:
            del st.query_params[R.KEY_PARAM]  # a key without a room means nothing: keep it out of the address bar
        return
    code = R.normalize_code(raw)
    if st.session_state.get(CODE) == code and (key is None or is_presenter()):
        return  # already in this room (a key on a follower's URL is checked below)
    if key is not None and rooms().is_presenter(code, key):
        try:
            rooms().view(code)
        except R.RoomError as e:
            st.session_state[NOTICE] = ("error", carry(e))
            leave()
            return
        leave()
        st.session_state.update({CODE: code, ROLE: PRESENTER, KEY: key, SHOW_QR: True})
        return  # keep_params writes the code as normalized
    if key is not None:  # a follower who tries the presenter's controls: refused, and the key leaves the URL
        del st.query_params[R.KEY_PARAM]
        st.session_state[NOTICE] = ("error", t("room.key_refused", code=code))
        if st.session_state.get(CODE) == code:
            return
    try:
        rooms().join(code, member())
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", carry(e))
        del st.query_params[R.ROOM_PARAM]
        if st.session_state.get(CODE) == code:
            leave()
        return
    leave()
    st.session_state.update({CODE: code, ROLE: FOLLOWER, FOLLOWING: True, SEEN: (0, 0), ANSWERED: {}})


def keep_params() -> None:
    """The room (and the presenter's key) stay in the address bar after a page link dropped the query."""
    code = st.session_state[CODE]
    if st.query_params.get(R.ROOM_PARAM) != code:
        st.query_params[R.ROOM_PARAM] = code
    if is_presenter() and st.query_params.get(R.KEY_PARAM) != st.session_state[KEY]:
        st.query_params[R.KEY_PARAM] = st.session_state[KEY]


def join_link(code: str) -> str:
    """The followers' link: the app's root as the presenter's browser reaches it (or ENCODERLAB_PUBLIC_URL), plus
    ?room=CODE. Never the key."""
    base = os.environ.get("ENCODERLAB_PUBLIC_URL", "").strip()
    if not base:
        url = st.context.url or f"http://localhost:{st.get_option('server.port')}"  # None in AppTest (no browser)
        parts = urlsplit(url)
        path = parts.path
        current = st.session_state.get(PAGE_PATH, "")
        if current and path.rstrip("/").endswith("/" + current):
            path = path.rstrip("/")[: -len(current) - 1]
        base = f"{parts.scheme}://{parts.netloc}{path}"
    return base.rstrip("/") + f"/?{R.ROOM_PARAM}={code}"


def qr_svg(link: str) -> str:
    """The link as a QR code (segno's SVG: paths only, no script), dark on white so it reads in a dark theme too."""
    import segno  # lazy: only a presenter's banner draws a QR code

    return segno.make(link, error="m").svg_inline(scale=8, dark="#000000", light="#ffffff")


def _close_room() -> None:
    try:
        rooms().close(st.session_state[CODE], st.session_state[KEY])
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", carry(e))
    st.session_state[CLOSED] = R.BY_PRESENTER


def _start() -> None:
    try:
        made = rooms().create()
    except R.RoomError as e:
        st.session_state[NOTICE] = ("error", carry(e))
        return
    leave()
    st.session_state.update({CODE: made.code, ROLE: PRESENTER, KEY: made.key, SHOW_QR: True})
    st.query_params[R.ROOM_PARAM] = made.code
    st.query_params[R.KEY_PARAM] = made.key


def _join_typed() -> None:
    code = R.normalize_code(st.session_state.get(JOIN_INPUT, ""))
    if code:
        st.query_params[R.ROOM_PARAM] = code  # begin() joins it (or says why not) in the run this callback starts
    else:  # Join with an empty box: say what is missing (begin() shows the notice in the run this starts)
        st.session_state[NOTICE] = ("warning", t("room.join_empty", n=R.CODE_LEN))


def sidebar_controls(sb) -> None:
    """In the sidebar: Start a room (presenter view), or Join with a code; the presenter's QR toggle and Close while
    presenting; nothing for a follower (their banner has their controls)."""
    if is_presenter() and not st.session_state.get(CLOSED):
        sb.toggle(t("room.show_qr"), key=SHOW_QR)
        sb.button(t("room.close"), key="room.close", on_click=_close_room, icon=":material/door_front:")
        return
    if in_room():
        return
    if presenter.is_on():
        sb.button(
            t("room.start"), key="room.start", on_click=_start, icon=":material/groups:", help=t("room.start_help")
        )
        return
    with sb.expander(t("room.join_title")):
        st.text_input(
            t("room.join_code"), key=JOIN_INPUT, max_chars=12, placeholder="ABC123"
        )  # i18n: ok (an example code)
        st.button(t("room.join"), key="room.join", on_click=_join_typed, icon=":material/login:")

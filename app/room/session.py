"""The room in the app (a presenter starts a room, followers' screens follow): this session's place in it, kept in
session state under the keys below, and the store every room module calls (core.runtime.room, through the
backend). The room's modules: lifecycle (begin and end of every run), joining, banners, polls, sentences.
Every store call goes through core.runtime.room; its errors (ValueError) are shown with st.error.
"""

from __future__ import annotations

import streamlit as st

from app.kit import state
from core.runtime import room as R
from core.runtime.backend import store as room_store

CODE, ROLE, KEY = "room.code", "room.role", "room.key"  # this session's room, "presenter" | "follower", the secret
FOLLOWING = "room.following"  # a follower follows (True) or broke away (False)
SEEN = "room.seen"  # (state_version, shared_version) this follower shows
LANDING = "room.landing"  # the next full run is the one applying the presenter's state
LANDED = "room.landed"  # what this follower showed right after applying it (the base for "changed something")
ANSWERED = "room.answered"  # step -> the choice sent to the store
CLOSED = "room.closed"  # the room closed while this session was in it: the reason
NOTICE = "room.notice"  # a message for the next run (a refused key, a join error), until a run shows it to the end
NOTICE_SHOWN = "room.notice_shown"
SHOW_QR = "room.show_qr"
PAGE_PATH = "room.page_path"  # this run's page url_path (to find the app's root in the browser's URL)
JOIN_INPUT = "room.join_input"
SENTENCE = "room.sentence"
SHOW_HIDDEN = "room.show_hidden"
TOP = "room.top"  # this run's container under a follower's banner (the room's sentences go there), else None
PRESENTER, FOLLOWER = "presenter", "follower"


def rooms() -> R.RoomStore:
    return room_store()


def poll_s() -> float:
    return R.limits().poll_s


def in_room() -> bool:
    return st.session_state.get(CODE) is not None


def is_presenter() -> bool:
    return in_room() and st.session_state.get(ROLE) == PRESENTER


def is_follower() -> bool:
    return in_room() and st.session_state.get(ROLE) == FOLLOWER


def page_url(page) -> str:
    """app/nav.py's url of the st.Page ``page`` (the default page's url_path is "", its nav url is "home")."""
    return page.url_path or "home"


def member() -> str:
    return state.session_id()


def leave() -> None:
    for k in (CODE, ROLE, KEY, FOLLOWING, SEEN, LANDING, LANDED, ANSWERED, CLOSED):
        st.session_state.pop(k, None)
    for p in (R.ROOM_PARAM, R.KEY_PARAM):
        if p in st.query_params:
            del st.query_params[p]

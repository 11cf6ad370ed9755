"""The room around every page: app/main.py calls ``begin(page)`` before the page and ``end(page)`` after it.

- ``begin`` joins the room named in the URL (``?room=CODE``; ``&key=SECRET`` makes this session the presenter),
  keeps those parameters in the address bar, and draws the banner (app.room.banners).
- ``end`` publishes the presenter's state (page + query parameters, as every page already keeps its inputs in the
  URL) to the store; for a follower it notices that they changed something themself and breaks away."""

from __future__ import annotations

import streamlit as st

from app.kit.i18n import explain, t
from app.room.banners import apply_before_drawing, closed_banner, follower_banner, presenter_banner
from app.room.joining import join_from_url, keep_params
from app.room.session import (
    CLOSED,
    CODE,
    FOLLOWING,
    KEY,
    LANDED,
    LANDING,
    NOTICE,
    NOTICE_SHOWN,
    PAGE_PATH,
    TOP,
    in_room,
    is_presenter,
    page_url,
    rooms,
)
from core.runtime import room as R


def begin(page) -> None:
    """Before the page: join from the URL, then draw this session's room banner (nothing outside a room)."""
    st.session_state[PAGE_PATH] = page.url_path
    st.session_state[TOP] = None
    join_from_url()
    notice = st.session_state.get(NOTICE)
    if notice is not None:  # kept until a run ends: a switch to the presenter's page must not swallow it
        getattr(st, notice[0])(explain(notice[1]))
        st.session_state[NOTICE_SHOWN] = notice
    if not in_room():
        return
    keep_params()
    if st.session_state.get(CLOSED):
        closed_banner()
    elif is_presenter():
        presenter_banner()
    else:
        apply_before_drawing()
        follower_banner()
        st.session_state[TOP] = st.container()  # under the banner: what the page asks of a follower (a sentence)


def end(page) -> None:
    """After the page: the presenter publishes what it shows; a follower who changed something breaks away."""
    shown = st.session_state.pop(NOTICE_SHOWN, None)
    if shown is not None and st.session_state.get(NOTICE) is shown:
        del st.session_state[NOTICE]
    if not in_room() or st.session_state.get(CLOSED):
        return
    url, params = page_url(page), st.query_params.to_dict()
    if is_presenter():
        try:
            rooms().publish(st.session_state[CODE], st.session_state[KEY], R.PresenterState.of(url, params))
        except R.RoomClosedError:
            st.session_state[CLOSED] = R.BY_IDLE
        except R.RoomError as e:
            st.error(explain(e))
        return
    if st.session_state.pop(LANDING, False):
        st.session_state[LANDED] = R.PresenterState.of(url, params)
        return
    landed = st.session_state.get(LANDED)
    if st.session_state.get(FOLLOWING) and landed is not None and R.diverged(landed, url, params):
        st.session_state[FOLLOWING] = False  # the banner says so on the next poll (within poll_s)
        st.session_state[NOTICE] = ("info", t("room.broke_away_auto"))

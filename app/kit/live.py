"""Fragments that redraw themselves every few seconds (``st.fragment(run_every=...)``), kept on the page the browser
shows.

Streamlit (1.67) starts each timed fragment run with the page the browser named when its timer fired. A timer that
fires while a page switch is on its way to the browser names the page before it; the run waits behind the switch's
run and then announces that old page, and the browser, taking it for a page change, clears the whole page: only the
fragment draws again, over nothing (a room follower saw its banner and no page, the Ray e2e test in CI). Streamlit
offers no setting against it, so every timed fragment here starts with ``keep_page``: a run on another page than
the one this session's last full run drew switches back to that page, with its query, which draws it all again;
that run sets every URL-bound widget's value again (``redrawing``), because the browser dropped them with the page.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

DRAWN = "live.drawn"  # (page script hash, st.Page, query) of this session's last full run
REDRAW = "live.redraw"  # set for the full run that draws a cleared page again (its widgets lost their values)


def fragment_run() -> bool:
    """True in a run of fragments only (a timed one), False in a run of the whole app."""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def note_full_run(page: Any) -> None:
    """Remember the page this full run drew and its query (app/main.py, after the page ran)."""
    ctx = get_script_run_ctx()
    if ctx is None or fragment_run():
        return
    st.session_state[DRAWN] = (ctx.page_script_hash, page, st.query_params.to_dict())
    st.session_state.pop(REDRAW, None)


def redrawing() -> bool:
    """True in the full run that draws a page the browser cleared: the browser dropped its widgets' values with
    them, and a widget shows the value this session holds only when the run sets it again (app.kit.urlstate.bind
    does, for every field it binds)."""
    return bool(st.session_state.get(REDRAW))


def keep_page() -> None:
    """In a timed fragment's own run on a page other than the one drawn last: switch back to the drawn page."""
    ctx = get_script_run_ctx()
    if ctx is None or not fragment_run():
        return
    drawn = st.session_state.get(DRAWN)
    if drawn is None or drawn[0] == ctx.page_script_hash:
        return
    st.session_state[REDRAW] = True
    st.switch_page(drawn[1], query_params=drawn[2])


def every(seconds: float) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``st.fragment(run_every=seconds)`` whose runs start with ``keep_page``; the only way this app times one."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            keep_page()
            return fn(*args, **kwargs)

        return st.fragment(run_every=seconds)(run)

    return wrap

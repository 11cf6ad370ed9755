"""app/kit/live.py's redraw, in AppTest: in the run that draws a cleared page again, urlstate.bind sets every bound
field's value again (so the browser is sent it), and a field whose widget this run already drew is left as it is
instead of raising."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _page(drawn_first: bool) -> None:
    import streamlit as st

    from app.kit import live, urlstate

    st.session_state.setdefault("demo.text", "kept")
    st.session_state[live.REDRAW] = True
    if drawn_first:
        st.text_input("text", key="demo.text")
    urlstate.bind((urlstate.Field("demo.text"),))
    st.write("redrawn" if live.redrawing() else "plain")
    if not drawn_first:
        st.text_input("text", key="demo.text")


def test_bind_sets_the_values_again_and_spares_a_widget_already_drawn():
    for drawn_first in (False, True):
        at = AppTest.from_function(_page, args=(drawn_first,), default_timeout=60).run()
        assert not at.exception, (drawn_first, at.exception)
        assert at.text_input(key="demo.text").value == "kept"
        assert at.markdown[0].value == "redrawn" and at.query_params["demo.text"] == "kept"

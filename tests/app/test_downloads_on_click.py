"""A download button's file is made when it is clicked (app.kit.download_button.download: drawing it gives the browser nothing
to fetch, so nothing can answer 404), outside the script run; it is still in the language the page was drawn in."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from app.kit.i18n import language, t


def _draw_in_chinese():
    import streamlit as st

    from app.kit.download_button import download, in_this_language
    from app.kit.i18n import LANG_KEY, t

    st.session_state[LANG_KEY] = "zh"
    st.session_state["made"] = in_this_language(lambda: t("attribution.export.title"))
    download(st, t("attribution.download_html"), lambda: "<p>", "a.html", "text/html", "dl")


def test_a_file_made_on_click_is_in_the_language_the_page_was_drawn_in():
    at = AppTest.from_function(_draw_in_chinese, default_timeout=60).run()
    assert not at.exception, at.exception
    button = at.get("download_button")[0]
    assert button.proto.deferred_file_id and not button.proto.url and button.proto.ignore_rerun
    with language("zh"):
        want = t("attribution.export.title")
    assert want != t("attribution.export.title")  # (outside a run and that block: English)
    assert at.session_state["made"]() == want  # the click runs it here, outside any script run

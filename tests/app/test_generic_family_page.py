"""The generic family ("Other encoder (any masked LM)") on the Fill-mask page before a folder is typed: what to do is
said once, under the sidebar's custom box, and the main area only points there (it used to repeat ModelSpec's
"No checkpoint given" sentence in both places)."""

from __future__ import annotations

from app.kit.i18n import t
from tests.app.conftest import page_for
from tests.conftest import GENERIC_KEY

NEEDED = t("sidebar.custom_needed")
POINTER = t("sidebar.custom_pointer")


def _all_messages(at) -> list[str]:
    """Every error, warning and info on screen, sidebar and main area together."""
    return [
        m.value for root in (at.sidebar, at.main) for kind in ("error", "warning", "info") for m in getattr(root, kind)
    ]


def test_generic_family_without_a_folder_says_what_to_type_once(tiny_models):
    at = page_for("fill_mask", GENERIC_KEY)
    assert at.session_state["sidebar.checkpoint"] == "custom" and at.session_state["sidebar.custom"] == ""
    shown = _all_messages(at)
    assert shown.count(NEEDED) == 1, shown
    assert [m.value for m in at.sidebar.info].count(NEEDED) == 1  # in the sidebar, where the folder is typed
    assert not any("No checkpoint given" in m for m in shown), shown  # the old sentence, twice, is gone
    assert not at.sidebar.error and not at.main.error, shown  # nothing has failed: a step is still to take
    assert [m.value for m in at.main.info].count(POINTER) == 1  # the main area points to the sidebar
    # once a folder is typed, neither the request nor the pointer is left, and the page serves the model
    at.sidebar.text_input(key="sidebar.custom").set_value(str(tiny_models[GENERIC_KEY])).run()
    assert not at.exception, at.exception
    shown = _all_messages(at)
    assert NEEDED not in shown and POINTER not in shown, shown
    assert at.text_area(key="fill_mask.text") is not None


def test_every_model_page_points_to_the_sidebar_without_an_error(tiny_models):
    """The same on the pages that load their model through app.kit.loaders.model_or_error: a pointer, no error."""
    for page in ("attention", "attribution", "lens"):
        at = page_for(page, GENERIC_KEY)
        shown = _all_messages(at)
        assert not at.exception, (page, at.exception)
        assert [m.value for m in at.main.info].count(POINTER) == 1, (page, shown)
        assert not at.sidebar.error and not at.main.error, (page, shown)

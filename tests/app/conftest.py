"""AppTest helpers: the entry script by absolute path (AppTest resolves relative paths against the caller)."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.kit import i18n

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")


@pytest.fixture(autouse=True)
def default_language_outside_a_run(monkeypatch):
    """Outside a script run, app.kit.i18n.lang() answers the language of this process's last run, so text built
    outside a run (the session report's HTML) came out in whichever language the test before it on the same
    xdist worker left (a 中文 report failed an English assertion in one test order): every test starts from the
    default language."""
    monkeypatch.setitem(i18n._last, "lang", i18n.DEFAULT_LANG)


def page_path(name: str) -> str:
    """Absolute path of pages/<name>.py, for AppTest.switch_page."""
    return str(ROOT / "pages" / f"{name}.py")


def new_app(timeout: float = 120) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=timeout)
    at.run()
    assert not at.exception, at.exception
    return at


def open_page(
    name: str | None, params: dict[str, str] | None = None, state: dict | None = None, timeout: float = 120
) -> AppTest:
    """A fresh session opened from a link: its URL carries ``params`` (and ``state`` is set) before the first run,
    which is page ``name`` (None: the home page), as when a browser opens the link."""
    at = AppTest.from_file(MAIN, default_timeout=timeout)
    params = dict(params or {})
    if name is not None:
        from app.nav import PAGE_PARAM, PAGES

        url = next(p.url for p in PAGES if p.file == f"pages/{name}.py")
        if url != name:  # AppTest finds a page before its first run by its file stem only (fill_mask is /fill-mask):
            params.setdefault(PAGE_PARAM, url)  # open it the way a browser's link does (app.nav.follow_deep_link)
            name = None
    for key, value in params.items():
        at.query_params[key] = value
    for key, value in (state or {}).items():
        at.session_state[key] = value
    if name is not None:
        at.switch_page(page_path(name))
    at.run()
    assert not at.exception, at.exception
    return at


def page_for(name: str, family: str = "bert") -> AppTest:
    """A fresh session on page ``name`` with ``family`` picked in the sidebar (the bundled model of that family)."""
    at = new_app()
    if family != "bert":
        at.sidebar.selectbox(key="sidebar.family").set_value(family).run()
    at.switch_page(page_path(name)).run()
    assert not at.exception, at.exception
    return at


def click(at: AppTest, label: str) -> AppTest:
    """Press the button labelled ``label`` and rerun; the page must not raise."""
    next(b for b in at.button if b.label == label).click().run()
    assert not at.exception, at.exception
    return at


def submit_attention(at: AppTest, text: str, pair: bool = False, text_b: str = "") -> AppTest:
    """Type into the Attention page's form and press Show attention (the page must be open)."""
    at.text_area(key="attention.text").set_value(text)
    at.checkbox(key="attention.pair").set_value(pair)
    at.text_input(key="attention.text_b").set_value(text_b)
    at.button(key="FormSubmitter:attention.form-Show attention").click().run()
    assert not at.exception, at.exception
    return at

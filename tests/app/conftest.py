"""AppTest helpers: the entry script by absolute path (AppTest resolves relative paths against the caller)."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import ElementTree

from app.kit import i18n

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")


DRAWN = "_encoderlab_drawn_lang"  # set on an AppTest after each run: the language that run drew in


def drawn_in(at: AppTest):
    """The language ``at``'s last run drew in (English before its first), for text built outside a run. Not the
    session's language now: a test may set ``at.session_state["ui.lang"]`` between runs, and the widgets on screen
    were still drawn in the language before."""
    return i18n.language(getattr(at, DRAWN, i18n.DEFAULT_LANG))


@pytest.fixture(autouse=True)
def widgets_reread_in_the_language_they_were_drawn_in(monkeypatch):
    """In a served session a widget's format_func runs in the script run, where app.kit.i18n.lang() is the
    session's language. AppTest instead re-applies it in the test's thread when it sends the next run's widget
    values (ElementTree.run), where the language is the context's (English unless set). Run that step in the
    language the last run drew, as the server would: else a 中文 page's options, drawn in Chinese, are looked up by
    their English labels ("'bert-mini (bundled)' is not in list")."""
    run = ElementTree.run

    def run_in_drawn_language(self, *, timeout=None):
        at = self._runner
        with drawn_in(at):
            out = run(self, timeout=timeout)
        try:
            code = at.session_state[i18n.LANG_KEY]
        except KeyError:
            code = i18n.DEFAULT_LANG
        setattr(at, DRAWN, code if code in i18n.LANGS else i18n.DEFAULT_LANG)
        return out

    monkeypatch.setattr(ElementTree, "run", run_in_drawn_language)


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


def blocks(node):
    """Every block under ``node`` of an AppTest tree (``at._tree``), depth first."""
    for child in getattr(node, "children", {}).values():
        if type(getattr(child, "proto", None)).__name__ == "Block":
            yield child
        yield from blocks(child)


def default_tab(at) -> int:
    """The tab the page's first tab container opens on."""
    tabs = next(b for b in blocks(at._tree) if b.proto.HasField("tab_container"))
    return tabs.proto.tab_container.default_tab_index


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

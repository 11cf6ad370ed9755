"""Every page in the navigation, for every registered family and the generic one, on tiny random models with real
tokenizers saved to folders (picked in the sidebar as a custom folder, through the real from_pretrained path).

Each page must run without an exception and either draw its main element or say, in a message, why it cannot
serve this family (no traceback, no bare KeyError). One session per family walks through all pages, so the
model cache is shared between them as in the app."""

from __future__ import annotations

import re

import pytest

from app.nav import available_pages
from tests.app.conftest import open_page, page_path
from tests.conftest import FAMILIES, GENERIC_KEY

# what a page draws when it serves the model: the element types to look for in the main area (any one of them)
MAIN = {
    "home": ("table",),
    "walkthrough": ("radio", "button", "markdown"),
    "models": ("dataframe",),
    "speed": ("multiselect",),
    "fill-mask": ("text_area", "text_input"),
    "sentence-pair": ("text_input", "text_area"),
    "attention": ("tabs",),
    "lens": ("text_area", "text_input"),
    "attribution": ("text_area", "text_input"),
    "corpus-search": ("button",),
    "projector": ("button",),
    "probes": ("button",),
    "finetune": ("button",),
    "pretrain": ("button",),
}
# what must never reach the screen: a Python error name or a traceback standing in for a message
RAW = re.compile(r"Traceback|\b(KeyError|AttributeError|TypeError|IndexError|NameError)\b")


def _messages(at) -> list[str]:
    return [m.value for kind in ("error", "warning", "info") for m in getattr(at.main, kind)]


@pytest.mark.slow
@pytest.mark.parametrize("fam", [*FAMILIES, GENERIC_KEY])
def test_every_page_serves_the_family_or_says_why(tiny_models, fam):
    folder = str(tiny_models[fam])
    at = open_page(None, params={"family": fam, "model": "custom", "custom": folder})
    assert at.session_state["sidebar.family"] == fam
    assert at.session_state["sidebar.custom"] == folder
    problems = []
    for page in available_pages():
        at.switch_page(page_path(page.file.rsplit("/", 1)[-1][:-3])).run()
        if at.exception:
            problems.append(f"{page.url}: exception {at.exception[0].message}")
            continue
        shown = [el for kind in MAIN.get(page.url, ("markdown",)) for el in getattr(at.main, kind)]
        messages = _messages(at)
        raw = [m for m in messages if RAW.search(m)]
        if raw:
            problems.append(f"{page.url}: raw error on screen: {raw[0][:200]}")
        elif not shown and not messages:
            problems.append(f"{page.url}: neither its main element nor a message")
    assert not at.sidebar.error, [e.value for e in at.sidebar.error]
    assert not problems, "\n".join(problems)

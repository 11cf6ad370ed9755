"""Every page, drawn in English and in 中文: no missing-key marker (⟦…⟧) anywhere on screen, no exception."""

from __future__ import annotations

import pytest

from app.kit.i18n import LANGS
from app.nav import available_pages
from tests.app.conftest import ROOT, new_app

PAGES = [p for p in available_pages()]


def _texts(at) -> list[str]:
    out = []
    for kind in ("markdown", "caption", "title", "header", "subheader", "info", "warning", "error", "success"):
        out += [getattr(e, "value", "") or "" for e in at.get(kind)]
    for kind in (
        "button",
        "selectbox",
        "radio",
        "checkbox",
        "toggle",
        "slider",
        "text_input",
        "text_area",
        "number_input",
        "multiselect",
        "expander",
        "tab",
        "metric",
    ):
        for e in at.get(kind):
            out.append(str(getattr(e, "label", "") or ""))
            out += [str(o) for o in (getattr(e, "options", None) or [])]
    return out


@pytest.mark.parametrize("lang", list(LANGS))
def test_every_page_draws_every_string(use_tiny_zoo, lang):
    at = new_app()
    at.session_state["ui.lang"] = lang
    for p in PAGES:
        at.switch_page(str(ROOT / p.file)).run()
        assert not at.exception, f"{p.url} ({lang}): {at.exception}"
        texts = _texts(at)
        assert len(texts) >= 5, f"{p.url}: too little on screen to check ({texts})"
        missing = [s for s in texts if "⟦" in s]
        assert not missing, f"{p.url} ({lang}) shows missing keys: {missing[:5]}"

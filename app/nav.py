"""The pages EncoderLab can show, in order. A page appears only once its file exists."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class PageDef:
    file: str
    title: str
    icon: str
    url: str
    section: str


PAGES = (
    PageDef("pages/home.py", "Home", ":material/home:", "home", "Start"),
    PageDef("pages/walkthrough.py", "Walkthrough", ":material/school:", "walkthrough", "Start"),
    PageDef("pages/models.py", "Models", ":material/account_tree:", "models", "Compare"),
    PageDef("pages/speed.py", "Speed", ":material/speed:", "speed", "Compare"),
    PageDef("pages/fill_mask.py", "Fill-mask", ":material/edit_note:", "fill-mask", "Predict"),
    PageDef("pages/sentence_pair.py", "Sentence pair (NSP/SOP)", ":material/compare_arrows:", "sentence-pair", "Predict"),
    PageDef("pages/attention.py", "Attention", ":material/visibility:", "attention", "Look inside"),
    PageDef("pages/attribution.py", "Attributions", ":material/insights:", "attribution", "Look inside"),
    PageDef("pages/finetune.py", "Fine-tune", ":material/tune:", "finetune", "Train"),
    PageDef("pages/pretrain.py", "Pretraining lab", ":material/science:", "pretrain", "Train"),
)


def available_pages() -> list[PageDef]:
    return [p for p in PAGES if (ROOT / p.file).exists()]


def build_navigation():
    """st.Page objects for the pages that exist, grouped by section; also kept for st.page_link."""
    import streamlit as st

    from app.i18n import t

    sections: dict[str, list] = {}
    for p in available_pages():
        page = st.Page(str(ROOT / p.file), title=title(p), icon=p.icon, url_path=p.url, default=p.url == "home")
        _OBJECTS[p.url] = page
        sections.setdefault(t(f"nav.section.{p.section.lower().replace(' ', '_')}"), []).append(page)
    return sections


def title(p: PageDef) -> str:
    """The page's title in the session's language (nav.<url> in assets/i18n/nav.toml)."""
    from app.i18n import t

    return t(f"nav.{p.url.replace('-', '_')}")


_OBJECTS: dict = {}


def page_obj(url: str):
    """The st.Page registered for ``url`` in this run (for st.page_link)."""
    return _OBJECTS[url]

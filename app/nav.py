"""The pages EncoderLab can show, in order. A page appears only once its file exists."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.kit.i18n import t

ROOT = Path(__file__).resolve().parent.parent
PAGE_PARAM = "page"  # app/serve.py sends /<page>?q to /?page=<page>&q; app/main.py then opens that page


@dataclass(frozen=True)
class PageDef:
    file: str
    icon: str
    url: str
    section: str


PAGES = (
    PageDef("pages/home.py", ":material/home:", "home", "Start"),
    PageDef("pages/walkthrough.py", ":material/school:", "walkthrough", "Start"),
    PageDef("pages/models.py", ":material/account_tree:", "models", "Compare"),
    PageDef("pages/speed.py", ":material/speed:", "speed", "Compare"),
    PageDef("pages/fill_mask.py", ":material/edit_note:", "fill-mask", "Predict"),
    PageDef("pages/sentence_pair.py", ":material/compare_arrows:", "sentence-pair", "Predict"),
    PageDef("pages/attention.py", ":material/visibility:", "attention", "Look inside"),
    PageDef("pages/lens.py", ":material/layers:", "lens", "Look inside"),
    PageDef("pages/attribution.py", ":material/insights:", "attribution", "Look inside"),
    PageDef("pages/features.py", ":material/hub:", "features", "Look inside"),
    PageDef("pages/corpus_search.py", ":material/manage_search:", "corpus-search", "Representations"),
    PageDef("pages/projector.py", ":material/scatter_plot:", "projector", "Representations"),
    PageDef("pages/probes.py", ":material/query_stats:", "probes", "Representations"),
    PageDef("pages/finetune.py", ":material/tune:", "finetune", "Train"),
    PageDef("pages/pretrain.py", ":material/science:", "pretrain", "Train"),
)


def available_pages() -> list[PageDef]:
    return [p for p in PAGES if (ROOT / p.file).exists()]


def build_navigation():
    """st.Page objects for the pages that exist, grouped by section; also kept for st.page_link."""
    import streamlit as st

    sections: dict[str, list] = {}
    for p in available_pages():
        page = st.Page(str(ROOT / p.file), title=title(p), icon=p.icon, url_path=p.url, default=p.url == "home")
        _OBJECTS[p.url] = page
        sections.setdefault(t(f"nav.section.{p.section.lower().replace(' ', '_')}"), []).append(page)
    return sections


def title(p: PageDef) -> str:
    """The page's title in the session's language (nav.<url> in assets/i18n/nav.toml)."""
    return t(f"nav.{p.url.replace('-', '_')}")


_OBJECTS: dict = {}


def follow_deep_link() -> None:
    """When the URL names a page in PAGE_PARAM (app/serve.py's redirect of a fresh /<page> load), switch to that
    page with the rest of the query; an unknown name is dropped and the current page stays."""
    import streamlit as st

    name = st.query_params.get(PAGE_PARAM)
    if name is None:
        return
    rest = {k: v for k, v in st.query_params.to_dict().items() if k != PAGE_PARAM}
    if name in _OBJECTS:
        st.switch_page(_OBJECTS[name], query_params=rest)
    del st.query_params[PAGE_PARAM]


def page_obj(url: str):
    """The st.Page registered for ``url`` in this run (for st.page_link)."""
    return _OBJECTS[url]

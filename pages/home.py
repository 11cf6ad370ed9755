"""Home: what EncoderLab is, the families, the pages, and the device in use."""

import pandas as pd
import streamlit as st

from app.kit.gpu_notice import gpu_warning
from app.kit.i18n import has, t, t_or
from app.nav import available_pages, page_obj, title
from core.models.devices import resolve_device
from core.registry import FAMILIES, PAIR_HEADS, official_checkpoints


def _help(url: str) -> str:
    """What a page is for (home.help.<url> in assets/i18n/home.toml), or nothing for a page without a text.
    ``{n}`` is the number of official checkpoints (what the Models page lists)."""
    key = f"home.help.{url.replace('-', '_')}"
    return t(key, n=len(official_checkpoints())) if has(key) else ""


def _link_label(p) -> str:
    """The page's title and what it is for; the title alone (never a bare dash) for a page without a text."""
    text = _help(p.url).strip()
    return t("home.page_link", title=title(p), help=text) if text else t("home.page_link_bare", title=title(p))


def _start_here() -> None:
    """Where to begin, above the reference material: a first session, and a workshop (the walkthrough, then the
    presenter view and a room), naming the sidebar's own labels so the steps cannot drift from the controls."""
    st.subheader(t("home.start.title"))
    first, workshop = st.columns(2, gap="large")
    with first:
        st.markdown(t("home.start.first"))
        st.markdown(t("home.start.first_steps", walk=_title_of("walkthrough"), fill=_title_of("fill-mask")))
        _links("walkthrough", "fill-mask")
        st.caption(t("home.start.first_model", model=t("sidebar.model")))
    with workshop:
        st.markdown(t("home.start.workshop"))
        st.markdown(
            t(
                "home.start.ws_steps",
                walk=_title_of("walkthrough"),
                presenter=t("sidebar.presenter"),
                start=t("room.start"),
                join=t("room.join_title"),
            )
        )
        _links("walkthrough")


def _links(*urls: str) -> None:
    """The pages a path names, side by side (wrapping when the column is narrow): short labels, the titles."""
    with st.container(horizontal=True):
        for p in (p for u in urls for p in available_pages() if p.url == u):
            st.page_link(page_obj(p.url), label=title(p), icon=p.icon, width="content")


def _title_of(url: str) -> str:
    return title(next(p for p in available_pages() if p.url == url))


st.title(t("home.title"))
st.markdown(t("home.intro"))
_start_here()

st.subheader(t("home.families"))
st.table(
    pd.DataFrame(
        [
            {  # a table, not a data grid: the longer texts wrap instead of being cut
                t("home.col.family"): f.label,
                t("home.col.idea"): t_or(f"families.{f.key}.summary", f.summary),
                t("home.col.objectives"): t_or(f"families.{f.key}.objectives", " + ".join(f.objectives)),
                t("home.col.pair_head"): t_or(
                    f"families.{f.key}.pair_head", PAIR_HEADS[f.pair_head] if f.pair_head else "none"
                ),
                t("home.col.tokenizer"): f.tokenizer_kind,
                t("home.col.mask_token"): f.mask_token,
                t("home.col.checkpoints"): ", ".join(c.id for c in f.checkpoints),
            }
            for f in FAMILIES.values()
        ]
    ),
    hide_index=True,
)

st.subheader(t("home.pages"))
for p in available_pages():
    if p.url != "home":
        st.page_link(page_obj(p.url), label=_link_label(p), icon=p.icon)

st.subheader(t("home.device"))
dev = resolve_device("auto")
if dev.kind == "cuda":
    st.success(t("home.gpu", name=dev.name, gb=dev.memory_gb))
else:
    st.info(t("home.cpu", name=dev.name))
    gpu_warning()  # a GPU that nvidia-smi sees and torch cannot use: why, and the fix

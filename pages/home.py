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


st.title(t("home.title"))
st.markdown(t("home.intro"))

st.subheader(t("home.families"))
st.table(pd.DataFrame([{  # a table, not a data grid: the longer texts wrap instead of being cut
    t("home.col.family"): f.label,
    t("home.col.idea"): t_or(f"families.{f.key}.summary", f.summary),
    t("home.col.objectives"): t_or(f"families.{f.key}.objectives", " + ".join(f.objectives)),
    t("home.col.pair_head"): t_or(f"families.{f.key}.pair_head",
                                  PAIR_HEADS[f.pair_head] if f.pair_head else "none"),
    t("home.col.tokenizer"): f.tokenizer_kind,
    t("home.col.mask_token"): f.mask_token,
    t("home.col.checkpoints"): ", ".join(c.id for c in f.checkpoints),
} for f in FAMILIES.values()]), hide_index=True)

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

"""Home: what EncoderLab is, the four families, the pages, and the device in use."""
import pandas as pd
import streamlit as st

from app.nav import available_pages, page_obj
from core.models import FAMILIES, PAIR_HEADS, resolve_device

PAGE_HELP = {
    "Walkthrough": "A guided tour of the seed articles, step by step, with live widgets.",
    "Models": "Parameter anatomy of ten official checkpoints, computed from their configs; ALBERT's factorization.",
    "Speed": "Latency and throughput of each family's base architecture, measured here.",
    "Fill-mask": "Predict masked words; several masks; whole-word masks; models side by side.",
    "Sentence pair (NSP/SOP)": "BERT's next-sentence and ALBERT's sentence-order heads, and a probe of what they detect.",
    "Attention": "bertviz views (offline), heatmaps, head statistics, rollout and flow.",
    "Attributions": "Which input tokens drive a prediction (captum).",
    "Fine-tune": "A short classification fine-tune with live curves; the result joins the model picker.",
    "Pretraining lab": "Pretrain a small model with MLM / NSP / SOP / distillation and watch the curves.",
}

st.title("EncoderLab")
st.markdown("Explore encoder-only pretrained language models — **BERT, RoBERTa, ALBERT, DistilBERT** — "
            "live and offline: predict masked words, test sentence-pair heads, fine-tune, and look inside.")

st.subheader("The four families")
st.dataframe(pd.DataFrame([{
    "family": f.label,
    "idea": f.summary,
    "pretraining objectives": " + ".join(f.objectives),
    "pair head": PAIR_HEADS[f.pair_head] if f.pair_head else "none",
    "tokenizer": f.tokenizer_kind,
    "mask token": f.mask_token,
    "checkpoints": ", ".join(c.id for c in f.checkpoints),
} for f in FAMILIES.values()]), hide_index=True, width="stretch")

st.subheader("Pages")
for p in available_pages():
    if p.url != "home":
        st.page_link(page_obj(p.url), label=f"**{p.title}** — {PAGE_HELP.get(p.title, '')}", icon=p.icon)

st.subheader("Device")
dev = resolve_device("auto")
if dev.kind == "cuda":
    st.success(f"GPU: **{dev.name}**, {dev.memory_gb} GiB")
else:
    st.info(f"CPU only ({dev.name}). Everything works; fine-tuning and large models are slower.")

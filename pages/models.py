"""Models: parameter anatomy from the official configs (meta device, no weights) and ALBERT's factorization."""
import pandas as pd
import streamlit as st

from app.render import params_bar
from core.models import FAMILIES, official_checkpoints
from core.params import albert_factorization, breakdown


@st.cache_data(show_spinner=False)
def _all_breakdowns():
    return [breakdown(c.id) for c in official_checkpoints()]


st.title("Models")
st.caption("Computed from the official configs shipped in assets/configs, instantiated on PyTorch's meta "
           "device: exact counts, no weights downloaded. Heads = MLM head (+ NSP/SOP); tied decoder counted once.")
rows = _all_breakdowns()
st.plotly_chart(params_bar(rows), width="stretch", key="models.bar")

st.subheader("Computed against the seeds' figures")
st.dataframe(pd.DataFrame([{
    "checkpoint": r.checkpoint, "family": FAMILIES[r.family].label,
    "embeddings (M)": round(r.embeddings / 1e6, 2), "encoder (M)": round(r.encoder / 1e6, 2),
    "pooler (M)": round(r.pooler / 1e6, 2), "backbone (M)": round(r.backbone / 1e6, 2),
    "heads (M)": round(r.heads / 1e6, 2), "seeds claim (M)": r.claim_m,
    "difference (M)": None if r.diff_m is None else round(r.diff_m, 2), "claim": r.claim_note,
} for r in rows]), hide_index=True, width="stretch")

st.subheader("Architecture")
st.dataframe(pd.DataFrame([{
    "checkpoint": r.checkpoint, "layers": r.layers, "hidden": r.hidden, "heads": r.heads_n, "FFN": r.ffn,
    "vocab": r.vocab, "embedding size E": r.embedding_size,
    "layers shared": "yes (one layer, reused)" if r.shared_layers else "no",
    "tokenizer": FAMILIES[r.family].tokenizer_kind, "position embeddings": FAMILIES[r.family].position_embeddings,
    "pretraining": " + ".join(FAMILIES[r.family].objectives),
} for r in rows]), hide_index=True, width="stretch")

st.subheader("ALBERT's factorized embeddings")
st.markdown("BERT's embedding matrix is V×H. ALBERT embeds into a small E and projects up: V×E + E×H.")
with st.form("models.factorization"):
    c1, c2, c3 = st.columns(3)
    v = c1.number_input("V (vocabulary)", min_value=1, value=30000, step=1000, key="models.V")
    h = c2.number_input("H (hidden size)", min_value=1, value=768, step=64, key="models.H")
    e = c3.number_input("E (embedding size)", min_value=1, value=128, step=16, key="models.E")
    st.form_submit_button("Compute")
try:
    f = albert_factorization(int(v), int(h), int(e))
    a, b, c = st.columns(3)
    a.metric("V×H", f"{f.full / 1e6:,.2f}M")
    b.metric("V×E + E×H", f"{f.factorized / 1e6:,.2f}M", delta=f"-{f.saved / 1e6:,.2f}M", delta_color="inverse")
    c.metric("saving", f"{f.ratio:,.1f}× fewer")
    st.caption("Seed example: V=30000, H=768, E=128 gives 23.04M → 3.94M parameters "
               "(the seed quotes 3.84M, which is V×E alone).")
except ValueError as err:
    st.error(str(err))

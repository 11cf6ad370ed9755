"""Attention: bertviz views (offline), heatmaps, a query/key view, head statistics, rollout/flow, comparison."""
import streamlit as st

from app import render_attention as ra
from app.loaders import model_or_error
from core.attention import AttentionConfig, compute_attention, head_stats

K = ra.K
DEFAULT_TEXT = "The cat sat on the mat because it was warm, and then it fell asleep."

st.title("Attention")
st.caption("Where each token looks, in every layer and head. The model is loaded with eager attention "
           "(the default sdpa kernel never materialises the weights).")
lm = model_or_error(task="base", attentions=True)
if lm is None:
    st.stop()

with st.form(K("form")):
    text = st.text_area("Text (sentence A)", DEFAULT_TEXT, key=K("text"), height=90)
    c1, c2 = st.columns([1, 4])
    pair = c1.checkbox("Sentence pair", key=K("pair"))
    text_b = c2.text_input("Sentence B (used when 'Sentence pair' is ticked)", key=K("text_b"))
    submitted = st.form_submit_button("Show attention", type="primary")
if submitted or K("config") not in st.session_state:
    try:
        st.session_state[K("config")] = AttentionConfig(text, text_b, pair)
    except ValueError as e:
        st.error(str(e))
        st.stop()
config = st.session_state[K("config")]

run_key = (lm.spec, config)
cached = st.session_state.get(K("result"))
if not cached or cached[0] != run_key:
    try:
        with st.spinner("Running the model …"):
            res = compute_attention(lm, config)
            st.session_state[K("result")] = (run_key, res, head_stats(res.attentions, res.cls_mask, res.sep_mask,
                                                                    res.punct_mask))
        ra.reset_view_state()
    except ValueError as e:  # too long for the model, or AttentionUnavailable (no weights returned)
        st.error(str(e))
        st.stop()
_, r, stats = st.session_state[K("result")]

st.caption(f"{r.n_tokens} tokens · {r.n_layers} layers × {r.n_heads} heads · the model reads up to {r.max_tokens}")
with st.expander("Token range, layers and heads", expanded=r.n_tokens > 128):
    if r.n_tokens > 1:
        lo, hi = st.slider("Tokens shown (positions)", 0, r.n_tokens, (0, min(r.n_tokens, 128)), key=K("range"),
                           help="Views and maps show these tokens; statistics and rollout use the whole text.")
    else:
        lo, hi = 0, 1
    if hi - lo < 1:
        lo, hi = (hi - 1, hi) if hi > 0 else (0, 1)
    layers = st.multiselect("Layers", list(range(r.n_layers)), default=list(range(r.n_layers)), key=K("layers"))
    heads = st.multiselect("Heads", list(range(r.n_heads)), default=list(range(r.n_heads)), key=K("heads"))
if not layers or not heads:
    st.warning("Pick at least one layer and one head in 'Token range, layers and heads'.")
    st.stop()

tabs = st.tabs(["bertviz", "Heatmaps", "Query/key view", "Head statistics", "Rollout & flow", "Compare models",
                "Export"])
with tabs[0]:
    ra.bertviz_section(r, lo, hi, layers, heads)
with tabs[1]:
    ra.heatmap_section(r, lo, hi, layers, heads)
with tabs[2]:
    ra.qk_section(r, lo, hi, layers, heads)
with tabs[3]:
    ra.stats_section(r, stats)
with tabs[4]:
    ra.mixing_section(r, lo, hi)
with tabs[5]:
    ra.compare_section(r, stats, config)
with tabs[6]:
    ra.export_section(r)

"""Attention: bertviz views (offline), heatmaps, a query/key view, head statistics, rollout/flow, comparison."""

import streamlit as st

from app.kit import urlstate
from app.kit.flow import end_page
from app.kit.i18n import explain, t
from app.kit.jobs_panel import start_job, submit_job
from app.kit.loaders import get_model, model_or_error
from app.kit.render import mini_note
from app.kit.zh_examples import fill_default
from app.views.inspect import ablation as render_ablation
from app.views.inspect import attention as ra
from app.views.inspect import value_zeroing as vz
from core.inspect.ablation import default_texts
from core.inspect.attention import AttentionConfig, compare_attention, compute_attention, head_stats
from core.inspect.head_importance import importance_job
from core.models.loading import ModelSpec
from core.registry import ModelLoadError

K = ra.K
DEFAULT_TEXT = "The cat sat on the mat because it was warm, and then it fell asleep."
INPUTS = (urlstate.Field(K("text")), urlstate.Field(K("pair"), "bool"), urlstate.Field(K("text_b")))


def submit_importance(ask: render_ablation.ImportanceAsk):
    """Queue core.inspect.head_importance for ``ask`` (QuotaError, ImportanceError: start_job shows them)."""
    s = ask.spec
    fn = importance_job(
        s.family,
        s.checkpoint,
        s.device,
        texts=default_texts(ask.n_texts),
        exhaustive=ask.exhaustive,
        pruning=ask.pruning,
    )
    name = t("ablation.imp.job_name", id=s.checkpoint)
    return submit_job(
        "attention.importance", name, fn, device=s.device, jobs_key=render_ablation.IMPORTANCE_JOBS, asked=ask.asked
    )


# A link restores the text and the view options; the result-dependent fields are bound once the result is known.
restored = urlstate.bind(INPUTS + ra.option_fields() + vz.fields())
for name, default in (("pair", False), ("text_b", "")):
    st.session_state.setdefault(K(name), default)
fill_default(K("text"), DEFAULT_TEXT, "attention")  # Chinese in 中文 with a Chinese-capable model

st.title(t("attention.title"))
st.caption(t("attention.intro"))
lm = model_or_error(task="base", attentions=True)
if lm is None:
    end_page()

with st.form(K("form")):
    text = st.text_area(t("attention.text"), key=K("text"), height=90)
    c1, c2 = st.columns([1, 3])
    pair = c1.checkbox(t("attention.pair"), key=K("pair"))
    text_b = c2.text_input(t("attention.text_b"), key=K("text_b"))
    submitted = st.form_submit_button(t("attention.show"), type="primary")
from_link = bool(restored & {f.key for f in INPUTS})
if submitted or from_link or K("config") not in st.session_state:
    try:
        st.session_state[K("config")] = AttentionConfig(text, text_b, pair)
    except ValueError as e:
        st.error(explain(e))
        end_page()
config = st.session_state[K("config")]

run_key = (lm.spec, config)
cached = st.session_state.get(K("result"))
if not cached or cached[0] != run_key:
    try:
        with st.spinner(t("attention.running")):
            res = compute_attention(lm, config)
            st.session_state[K("result")] = (
                run_key,
                res,
                head_stats(res.attentions, res.cls_mask, res.sep_mask, res.punct_mask),
            )
        ra.reset_view_state()
    except ValueError as e:  # too long for the model, or AttentionUnavailable (no weights returned)
        st.error(explain(e))
        end_page()
_, r, stats = st.session_state[K("result")]

st.caption(t("attention.summary", n=r.n_tokens, layers=r.n_layers, heads=r.n_heads, max=r.max_tokens))
for note in r.notes:
    st.info(explain(note))
mini_note(r.checkpoint)
picked = ra.filters(r)
if picked is None:
    urlstate.publish()
    end_page()
lo, hi, layers, heads = picked
ra.bind_focus(r, lo, hi, layers, heads)

labels = [t(f"attention.tab.{name}") for name in ra.TABS]
opened = st.session_state.get(K("tab"))
tabs = st.tabs(labels, default=labels[ra.TABS.index(opened)] if opened in ra.TABS else None)
with tabs[0]:
    ra.bertviz_section(r, lo, hi, layers, heads)
with tabs[1]:
    focused = ra.heatmap_section(r, lo, hi, layers, heads)
with tabs[2]:
    ra.qk_section(r, lo, hi, layers, heads, lm.spec, config)
with tabs[3]:
    stat_map = ra.stats_section(r, stats)
with tabs[4]:
    ra.mixing_section(r, lo, hi, lm.spec, config)
    vz.section(r, lo, hi, lm, config)
with tabs[5]:
    ra.words_section(r, config, lm.tokenizer, lm.spec)
with tabs[6]:
    choice, go = ra.compare_picker(r)
    cmp_key = (choice, r.checkpoint, config)
    if go:
        try:
            spec = ModelSpec(choice[0], choice[1], lm.spec.device)
            with st.spinner(t("common.loading", id=choice[1])):
                sides = compare_attention(r, stats, get_model(spec, "base", attentions=True), config)
            st.session_state[K("cmp.result")] = (cmp_key, sides)
        except (ModelLoadError, ValueError) as e:
            st.session_state.pop(K("cmp.result"), None)  # no earlier comparison stays under the error
            st.error(f"{choice[1]}: {explain(e)}")
    saved = st.session_state.get(K("cmp.result"))
    if saved and saved[0] == cmp_key:
        ra.compare_view(saved[1])
with tabs[7]:
    render_ablation.attention_heads(lm, config, lambda task: get_model(lm.spec, task))
with tabs[8]:
    imp = render_ablation.importance_tab(lm.spec, lm.model, str(lm.device))
    if imp.go:
        start_job(render_ablation.IMPORTANCE_JOBS, lambda: submit_importance(imp))
    render_ablation.importance_jobs(imp)
with tabs[9]:
    ra.export_section(r)
ra.record(r, config, lo, hi, focused, stat_map)
urlstate.publish()  # the widgets drawn in this run hold their values now: the address bar links to this view

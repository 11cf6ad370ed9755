"""Fill-mask: [MASK] in any family, top-k per mask, independent vs iterative fill, whole-word masks, compare models."""
import streamlit as st

from app import state
from app.loaders import get_model, model_or_error
from app.render_predict import show_fill_result
from core.fill_mask import (MAX_TOP_K, STRATEGIES, FillMaskConfig, FillMaskError, check_mlm, compare,
                            configs_from_lines, examples, fill_mask, fill_mask_batch, words)
from core.models import FAMILIES, ModelSpec, availability, bundled_id, checkpoint_info

P = "fill_mask"
STRATEGY_LABELS = {"independent": "independently (one pass)", "iterative": "one at a time, most confident first"}


def k(name: str) -> str:
    return state.key(P, name)


def _lang(spec) -> str:
    info = checkpoint_info(spec.checkpoint) if spec else None
    return info.language if info else "en"


def _example_list(spec) -> list[str]:
    lang = _lang(spec)
    other = "zh" if lang == "en" else "en"
    return examples(lang) + examples(other)


def _use_example(src: str, dst: str) -> None:
    if st.session_state.get(src):
        st.session_state[dst] = st.session_state[src]


def _run(result_key: str, fn) -> None:
    """Call core; keep the result for later reruns, or show the problem (never a traceback)."""
    try:
        st.session_state[result_key] = fn()
    except ValueError as e:  # config errors, FillMaskError and ModelLoadError all say what to do
        st.session_state[result_key] = None
        st.error(str(e))


def _options_row(prefix: str):
    c1, c2 = st.columns(2)
    top_k = c1.slider("Top-k per mask", 1, MAX_TOP_K, 5, key=k(f"{prefix}.top_k"))
    strategy = c2.radio("With several masks, fill them", STRATEGIES, format_func=STRATEGY_LABELS.get,
                        key=k(f"{prefix}.strategy"), horizontal=True)
    return top_k, strategy


def _compare_options() -> list[str]:
    opts = []
    for fam in FAMILIES:
        ids = [bundled_id(fam)] + [m.path for m in state.session_models(fam)]
        ids += [c.id for c in FAMILIES[fam].checkpoints]
        opts += [f"{fam}|{c}" for c in ids if availability(c).source != "unavailable"]
    return opts


def _fmt_option(o: str) -> str:
    fam, ckpt = o.split("|", 1)
    return f"{FAMILIES[fam].label} · {ckpt}"


st.title("Fill-mask")
st.caption("Write **[MASK]** in any family: it becomes the model's own mask token (`<mask>` for RoBERTa). "
           "The encoder runs once, and the vocabulary projection is computed only at the masked positions.")
spec = state.current_spec()
ex = _example_list(spec)
lm = model_or_error("mlm")
if lm is not None:
    try:
        check_mlm(lm)
    except FillMaskError as e:  # e.g. a sentence-embedding checkpoint saved without its MLM head
        st.error(str(e))
        lm = None
tab_type, tab_word, tab_cmp = st.tabs(["Type [MASK]", "Mask a word", "Compare models"])

with tab_type:
    if lm is not None:
        specials = tuple(lm.tokenizer.all_special_tokens)
        st.session_state.setdefault(k("text"), ex[0] if ex else "The capital of France is [MASK].")
        st.selectbox("Example", ex, index=None, placeholder="Pick an example sentence…", key=k("example"),
                     on_change=_use_example, args=(k("example"), k("text")))
        with st.form(k("form")):
            text = st.text_area("Text with [MASK] (several are fine)", key=k("text"), height=90)
            per_line = st.checkbox("Each line is a separate text (run together as one batch)", key=k("per_line"))
            top_k, strategy = _options_row("type")
            go = st.form_submit_button("Predict", type="primary")
        if go:
            _run(k("result"), lambda: fill_mask_batch(lm, configs_from_lines(text, top_k, strategy) if per_line
                                                      else [FillMaskConfig(text, top_k=top_k, strategy=strategy)]))
        results = st.session_state.get(k("result"))
        if results and results[0].checkpoint == lm.spec.checkpoint:
            if len(results) == 1:
                show_fill_result(results[0], key=k("type"), specials=specials)
            for i, r in enumerate(results if len(results) > 1 else ()):
                with st.expander(f"{i + 1}. {r.filled_text}", expanded=i == 0):
                    show_fill_result(r, key=k(f"type.{i}"), specials=specials)

with tab_word:
    st.markdown("Pick one word of a plain sentence: every sub-token of that word is masked (whole-word masking), "
                "and each piece gets its own prediction.")
    if lm is not None:
        st.session_state.setdefault(k("plain"), "The scientists measured the temperature of the ocean.")
        plain = st.text_input("Plain sentence (no [MASK])", key=k("plain"))
        ws = words(plain)
        if not ws:
            st.warning("The sentence has no words to mask: type a sentence with letters or digits.")
        else:
            with st.form(k("word_form")):
                idx = st.selectbox("Word to mask", list(range(len(ws))), key=k("word"),
                                   format_func=lambda i: f"{ws[i].text}  (word {i + 1})")
                top_k, strategy = _options_row("word")
                go = st.form_submit_button("Mask it and predict", type="primary")
            if go:
                _run(k("word_result"), lambda: fill_mask(
                    lm, FillMaskConfig(plain, top_k=top_k, strategy=strategy, word=idx)))
            res = st.session_state.get(k("word_result"))
            if res is not None and res.checkpoint == lm.spec.checkpoint and res.text == plain:
                show_fill_result(res, key=k("wordres"), specials=tuple(lm.tokenizer.all_special_tokens))

with tab_cmp:
    st.markdown("The same sentence through 2–4 models, one column each. Each model runs once untimed to warm "
                "up, then once timed; the latency is for that one text.")
    opts = _compare_options()
    default = [o for o in opts if o.split("|", 1)[1].startswith("encoderlab/")][:2] or opts[:2]
    with st.form(k("cmp_form")):
        chosen = st.multiselect("Models (2–4)", opts, default=default, max_selections=4, format_func=_fmt_option,
                                key=k("cmp_models"))
        st.session_state.setdefault(k("cmp_text"), ex[0] if ex else "The capital of France is [MASK].")
        ctext = st.text_input("Text with [MASK]", key=k("cmp_text"))
        ctop = st.slider("Top-k per mask", 1, MAX_TOP_K, 5, key=k("cmp.top_k"))
        go = st.form_submit_button("Compare", type="primary")
    if go:
        device = spec.device if spec else "auto"

        def _compare():
            if not 2 <= len(chosen) <= 4:
                raise ValueError(f"Pick 2 to 4 models to compare (picked {len(chosen)}).")
            cfg = FillMaskConfig(ctext, top_k=ctop)
            models = [get_model(ModelSpec(*o.split("|", 1), device), "mlm") for o in chosen]
            with st.spinner("Running each model…"):
                return compare(models, cfg)
        _run(k("cmp_result"), _compare)
    cres = st.session_state.get(k("cmp_result"))
    if cres is not None:
        cols = st.columns(len(cres.results))
        for i, (col, r) in enumerate(zip(cols, cres.results)):
            with col:
                st.markdown(f"**{FAMILIES[r.family].label}** · `{r.checkpoint}`")
                st.metric("latency", f"{r.latency_ms:,.1f} ms")
                show_fill_result(r, key=k(f"cmp.{i}"))

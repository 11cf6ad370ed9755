"""Fill-mask: [MASK] in any family, top-k per mask, independent vs iterative fill, whole-word masks, compare models.

Text and options live in the URL; a link with a text (or a sentence and word) shows its predictions at once."""
import streamlit as st

from app import presenter, state, urlstate
from app.i18n import t
from app.loaders import get_model, model_or_error
from app.render import entry_id, yes_no
from app.render_predict import record_fill, show_fill_result, strategy_label
from core.fill_mask import (MAX_TOP_K, STRATEGIES, FillMaskConfig, FillMaskError, check_mlm, compare,
                            configs_from_lines, examples, fill_mask, fill_mask_batch, words)
from core.models import FAMILIES, ModelSpec, availability, bundled_id, checkpoint_info

P = "fill_mask"
DEFAULT_TEXT = "The capital of France is [MASK]."
DEFAULT_PLAIN = "The scientists measured the temperature of the ocean."
DEFAULT_TOP_K = 5


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


def _run(result_key: str, fn):
    """Call core; keep the result for later reruns and return it, or show the problem (never a traceback)."""
    try:
        st.session_state[result_key] = fn()
    except ValueError as e:  # config errors, FillMaskError and ModelLoadError all say what to do
        st.session_state[result_key] = None
        st.error(str(e))
    return st.session_state[result_key]


def _options_row(prefix: str):
    st.session_state.setdefault(k(f"{prefix}.top_k"), DEFAULT_TOP_K)
    c1, c2 = st.columns(2)
    top_k = c1.slider(t("fill_mask.top_k"), 1, MAX_TOP_K, key=k(f"{prefix}.top_k"))
    strategy = c2.radio(t("fill_mask.strategy"), STRATEGIES, format_func=strategy_label,
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


def _word_choices() -> range:
    """The word indices a link may name: those of the sentence (restored just before, or the current one)."""
    return range(len(words(st.session_state.get(k("plain")) or DEFAULT_PLAIN)))


def _inputs(model: str, **fields) -> dict:
    """Report inputs under translated field names (the values stay as the user wrote them)."""
    return {t("fill_mask.in.model"): model, **{t(f"fill_mask.in.{name}"): v for name, v in fields.items()}}


def _short(text: str, n: int = 70) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# Everything on the page is in the URL, so the address bar is a link to this view (app/urlstate.py).
TYPE_FIELDS = (urlstate.Field(k("text")), urlstate.Field(k("per_line"), "bool"),
               urlstate.Field(k("type.top_k"), "int", lo=1, hi=MAX_TOP_K),
               urlstate.Field(k("type.strategy"), choices=STRATEGIES))
WORD_FIELDS = (urlstate.Field(k("plain")), urlstate.Field(k("word"), "int", choices=_word_choices),
               urlstate.Field(k("word.top_k"), "int", lo=1, hi=MAX_TOP_K),
               urlstate.Field(k("word.strategy"), choices=STRATEGIES))
CMP_FIELDS = (urlstate.Field(k("cmp_models"), "strs", choices=_compare_options), urlstate.Field(k("cmp_text")),
              urlstate.Field(k("cmp.top_k"), "int", lo=1, hi=MAX_TOP_K))

st.title(t("fill_mask.title"))
st.caption(t("fill_mask.intro"))
restored = urlstate.bind(TYPE_FIELDS + WORD_FIELDS + CMP_FIELDS)
from_link_type = bool(restored & {f.key for f in TYPE_FIELDS})
from_link_word = bool(restored & {f.key for f in WORD_FIELDS})
spec = state.current_spec()
ex = _example_list(spec)
lm = model_or_error("mlm")
if lm is not None:
    try:
        check_mlm(lm)
    except FillMaskError as e:  # e.g. a sentence-embedding checkpoint saved without its MLM head
        st.error(str(e))
        lm = None
tab_type, tab_word, tab_cmp = st.tabs([t("fill_mask.tab_type"), t("fill_mask.tab_word"), t("fill_mask.tab_compare")])

with tab_type:
    if lm is not None:
        specials = tuple(lm.tokenizer.all_special_tokens)
        st.session_state.setdefault(k("text"), ex[0] if ex else DEFAULT_TEXT)
        st.selectbox(t("fill_mask.example"), ex, index=None, placeholder=t("fill_mask.example_placeholder"),
                     key=k("example"), on_change=_use_example, args=(k("example"), k("text")))
        with st.form(k("form")):
            text = st.text_area(t("fill_mask.text_label"), key=k("text"), height=90)
            with presenter.settings():
                per_line = st.checkbox(t("fill_mask.per_line"), key=k("per_line"))
                top_k, strategy = _options_row("type")
            go = st.form_submit_button(t("fill_mask.predict"), type="primary")
        if go or (from_link_type and text.strip()):  # a shared link shows its predictions without a click
            results = _run(k("result"), lambda: fill_mask_batch(
                lm, configs_from_lines(text, top_k, strategy) if per_line
                else [FillMaskConfig(text, top_k=top_k, strategy=strategy)]))
            if results:
                record_fill(entry_id(f"{P}:type", lm.spec.checkpoint, text, top_k, strategy, per_line),
                            t("fill_mask.report_type", text=_short(text.replace("\n", " / "))),
                            _inputs(lm.spec.checkpoint, text=text, top_k=top_k, strategy=strategy_label(strategy),
                                    per_line=yes_no(per_line)),
                            results, by="text" if len(results) > 1 else None)
        results = st.session_state.get(k("result"))
        if results and results[0].checkpoint == lm.spec.checkpoint:
            if len(results) == 1:
                show_fill_result(results[0], key=k("type"), specials=specials)
            for i, r in enumerate(results if len(results) > 1 else ()):
                with st.expander(f"{i + 1}. {r.filled_text}", expanded=i == 0):
                    show_fill_result(r, key=k(f"type.{i}"), specials=specials)

with tab_word:
    st.markdown(t("fill_mask.word_intro"))
    if lm is not None:
        st.session_state.setdefault(k("plain"), DEFAULT_PLAIN)
        plain = st.text_input(t("fill_mask.plain"), key=k("plain"))
        ws = words(plain)
        if not ws:
            st.warning(t("fill_mask.no_words"))
        else:
            if st.session_state.get(k("word")) not in range(len(ws)):  # a shorter sentence than the last one
                st.session_state.pop(k("word"), None)
            with st.form(k("word_form")):
                idx = st.selectbox(t("fill_mask.word"), list(range(len(ws))), key=k("word"),
                                   format_func=lambda i: t("fill_mask.word_option", word=ws[i].text, n=i + 1))
                with presenter.settings():
                    top_k, strategy = _options_row("word")
                go = st.form_submit_button(t("fill_mask.mask_predict"), type="primary")
            if go or from_link_word:
                res = _run(k("word_result"), lambda: fill_mask(
                    lm, FillMaskConfig(plain, top_k=top_k, strategy=strategy, word=idx)))
                if res is not None:
                    record_fill(entry_id(f"{P}:word", lm.spec.checkpoint, plain, idx, top_k, strategy),
                                t("fill_mask.report_word", word=ws[idx].text, text=_short(plain)),
                                _inputs(lm.spec.checkpoint, plain=plain, word=f"{ws[idx].text} ({idx + 1})",
                                        top_k=top_k, strategy=strategy_label(strategy)),
                                [res])
            res = st.session_state.get(k("word_result"))
            if res is not None and res.checkpoint == lm.spec.checkpoint and res.text == plain:
                show_fill_result(res, key=k("wordres"), specials=tuple(lm.tokenizer.all_special_tokens))

with tab_cmp:
    st.markdown(t("fill_mask.compare_intro"))
    opts = _compare_options()
    st.session_state.setdefault(
        k("cmp_models"), [o for o in opts if o.split("|", 1)[1].startswith("encoderlab/")][:2] or opts[:2])
    kept = [o for o in st.session_state[k("cmp_models")] if o in opts][:4]
    if kept != st.session_state[k("cmp_models")]:  # a model of this session that is gone
        st.session_state[k("cmp_models")] = kept
    st.session_state.setdefault(k("cmp_text"), ex[0] if ex else DEFAULT_TEXT)
    st.session_state.setdefault(k("cmp.top_k"), DEFAULT_TOP_K)
    with st.form(k("cmp_form")):
        chosen = st.multiselect(t("fill_mask.cmp_models"), opts, max_selections=4, format_func=_fmt_option,
                                key=k("cmp_models"))
        ctext = st.text_input(t("fill_mask.cmp_text"), key=k("cmp_text"))
        with presenter.settings():
            ctop = st.slider(t("fill_mask.top_k"), 1, MAX_TOP_K, key=k("cmp.top_k"))
        go = st.form_submit_button(t("fill_mask.compare"), type="primary")
    if go:
        device = spec.device if spec else "auto"

        def _compare():
            if not 2 <= len(chosen) <= 4:
                raise ValueError(t("fill_mask.cmp_count", n=len(chosen)))
            cfg = FillMaskConfig(ctext, top_k=ctop)
            models = [get_model(ModelSpec(*o.split("|", 1), device), "mlm") for o in chosen]
            with st.spinner(t("fill_mask.cmp_running")):
                return compare(models, cfg)
        cres = _run(k("cmp_result"), _compare)
        if cres is not None:
            record_fill(entry_id(f"{P}:compare", tuple(chosen), ctext, ctop),
                        t("fill_mask.report_compare", n=len(chosen), text=_short(ctext)),
                        _inputs(", ".join(o.split("|", 1)[1] for o in chosen), text=ctext, top_k=ctop),
                        cres.results, by="model")
    cres = st.session_state.get(k("cmp_result"))
    if cres is not None:
        cols = st.columns(len(cres.results))
        for i, (col, r) in enumerate(zip(cols, cres.results)):
            with col:
                st.markdown(f"**{FAMILIES[r.family].label}** · `{r.checkpoint}`")
                st.metric(t("fill_mask.latency"), f"{r.latency_ms:,.1f} ms")
                show_fill_result(r, key=k(f"cmp.{i}"))

urlstate.publish()  # values first created in this run (the defaults) join the link too

"""Fill-mask: [MASK] in any family, top-k per mask, independent vs iterative fill, whole-word masks, compare models;
for a family with a discriminator (ELECTRA), which words look replaced (replaced token detection).

Text and options live in the URL; a link with a text (or a sentence and word) shows its predictions at once."""

import streamlit as st

from app.kit import presenter, state, urlstate
from app.kit.fill_mask_work import compare_models, score_replaced
from app.kit.i18n import explain, t
from app.kit.loaders import model_or_error
from app.kit.render import as_text, current_result, mini_note, run_or_error
from app.kit.words_line import word_line
from app.kit.zh_examples import fill_default
from app.room.sentences import sentences_panel
from app.views.inspect.ablation import fill_mask_heads
from app.views.predict.checkpoint_notes import checkpoint_notes
from app.views.predict.fill_mask_widgets import (
    CMP_FIELDS,
    DEFAULT_PLAIN,
    DEFAULT_TOP_K,
    RTD_FIELDS,
    TYPE_FIELDS,
    WORD_FIELDS,
    compare_options,
    default_compare_models,
    discriminator_note,
    example_default,
    example_list,
    fmt_option,
    k,
    options_row,
    record_compare,
    record_typed,
    record_word,
    replaced_form,
    replaced_result,
    show_compare,
    spec_of,
    tab_set,
    use_example,
    wants_chinese,
)
from app.views.predict.results import show_fill_result
from core.predict.fill_mask import (
    MAX_TOP_K,
    FillMaskConfig,
    FillMaskError,
    check_mlm,
    configs_from_lines,
    fill_mask,
    fill_mask_batch,
    words,
)
from core.predict.replaced_tokens import RTD_TASK, role

st.title(t("fill_mask.title"))
st.caption(t("fill_mask.intro"))
restored = urlstate.bind(TYPE_FIELDS + WORD_FIELDS + CMP_FIELDS + RTD_FIELDS)
from_link_type = bool(restored & {f.key for f in TYPE_FIELDS})
from_link_word = bool(restored & {f.key for f in WORD_FIELDS})
spec = state.current_spec()
kind = role(spec)  # "discriminator" (no MLM head: its own tab instead), "generator", or None
ex = example_list(spec)
# The masked LM; none for a discriminator (it has its own tab), or after model_or_error showed why not (while the
# sidebar's custom box is still empty, a pointer to it).
lm = None if kind == "discriminator" else model_or_error("mlm")
if lm is not None:
    try:
        check_mlm(lm)
    except FillMaskError as e:  # e.g. a sentence-embedding checkpoint saved without its MLM head
        st.error(explain(e))
        lm = None
if lm is not None:
    checkpoint_notes(lm)  # MacBERT: pretrained without [MASK]; hfl's RoBERTa: BERT code (why it loads as BERT)
tabs = tab_set(kind)
tab_type, tab_word, tab_cmp = tabs["type"], tabs["word"], tabs["compare"]

if "rtd" in tabs:
    with tabs["rtd"]:
        st.markdown(t("replaced_tokens.intro"))
        # a discriminator in the sidebar loads first: its source banner, or why it cannot load
        ready = kind != "discriminator" or model_or_error(RTD_TASK) is not None
        ask = replaced_form(spec, kind, from_link=bool(restored & {f.key for f in RTD_FIELDS})) if ready else None
        if ask is not None:
            fresh = (
                run_or_error(k("rtd_result"), lambda: score_replaced(ask), made_from=ask.made_from) if ask.go else None
            )
            replaced_result(ask, fresh)  # the result made from what the form holds now, if any

with tab_type:
    if kind == "discriminator":
        discriminator_note(spec)
    if lm is not None:
        specials = tuple(lm.tokenizer.all_special_tokens)
        example_default(k("text"), ex)  # Chinese in 中文 with a Chinese-capable model
        st.selectbox(
            t("fill_mask.example"),
            ex,
            index=None,
            placeholder=t("fill_mask.example_placeholder"),
            key=k("example"),
            on_change=use_example,
            args=(k("example"), k("text")),
        )
        with st.form(k("form")):
            text = st.text_area(t("fill_mask.text_label"), key=k("text"), height=90)
            with presenter.settings():
                per_line = st.checkbox(t("fill_mask.per_line"), key=k("per_line"))
                top_k, strategy = options_row("type")
            go = st.form_submit_button(t("fill_mask.predict"), type="primary")
        asked = (lm.spec, text, top_k, strategy, per_line)
        if go or (from_link_type and text.strip()):  # a shared link shows its predictions without a click
            results = run_or_error(
                k("result"),
                lambda: fill_mask_batch(
                    lm,
                    configs_from_lines(text, top_k, strategy)
                    if per_line
                    else [FillMaskConfig(text, top_k=top_k, strategy=strategy)],
                ),
                made_from=asked,
            )
            if results:
                record_typed(lm.spec.checkpoint, text, top_k, strategy, per_line, results)
        results = current_result(k("result"), asked)
        if results:
            mini_note(lm.spec.checkpoint, "mlm")
            if len(results) == 1:
                show_fill_result(results[0], key=k("type"), specials=specials)
            for i, r in enumerate(results if len(results) > 1 else ()):
                with st.expander(f"{i + 1}. {as_text(r.filled_text)}", expanded=i == 0):
                    show_fill_result(r, key=k(f"type.{i}"), specials=specials)
            fill_mask_heads(lm, text, top_k, strategy, per_line)  # the same prediction with heads switched off

with tab_word:
    st.markdown(t("fill_mask.word_intro"))
    if kind == "discriminator":
        discriminator_note(spec)
    if lm is not None:
        fill_default(k("plain"), DEFAULT_PLAIN, "plain", lm.spec)
        plain = st.text_input(t("fill_mask.plain"), key=k("plain"))
        ws = words(plain)
        if (line := word_line(plain)) is not None:  # Chinese: the 词 the picker offers
            st.caption(line + "  \n" + t("fill_mask.word_pick_zh"))
        if not ws:
            st.warning(t("fill_mask.no_words"))
        else:
            if st.session_state.get(k("word")) not in range(len(ws)):  # a shorter sentence than the last one
                st.session_state.pop(k("word"), None)
            with st.form(k("word_form")):
                idx = st.selectbox(
                    t("fill_mask.word"),
                    list(range(len(ws))),
                    key=k("word"),
                    format_func=lambda i: t("fill_mask.word_option", word=ws[i].text, n=i + 1),
                )
                with presenter.settings():
                    top_k, strategy = options_row("word")
                go = st.form_submit_button(t("fill_mask.mask_predict"), type="primary")
            asked = (lm.spec, plain, idx, top_k, strategy)
            if go or from_link_word:
                res = run_or_error(
                    k("word_result"),
                    lambda: fill_mask(lm, FillMaskConfig(plain, top_k=top_k, strategy=strategy, word=idx)),
                    made_from=asked,
                )
                if res is not None:
                    record_word(lm.spec.checkpoint, plain, idx, ws[idx].text, top_k, strategy, res)
            res = current_result(k("word_result"), asked)
            if res is not None:
                mini_note(lm.spec.checkpoint, "mlm")
                show_fill_result(res, key=k("wordres"), specials=tuple(lm.tokenizer.all_special_tokens))

with tab_cmp:
    st.markdown(t("fill_mask.compare_intro"))
    opts = compare_options()
    example_default(k("cmp_text"), ex)
    default_compare_models(opts, wants_chinese(spec, st.session_state.get(k("cmp_text"))))  # 中文: Chinese readers
    st.session_state.setdefault(k("cmp.top_k"), DEFAULT_TOP_K)
    with st.form(k("cmp_form")):
        chosen = st.multiselect(
            t("fill_mask.cmp_models"), opts, max_selections=4, format_func=fmt_option, key=k("cmp_models")
        )
        ctext = st.text_input(t("fill_mask.cmp_text"), key=k("cmp_text"))
        with presenter.settings():
            ctop = st.slider(t("fill_mask.top_k"), 1, MAX_TOP_K, key=k("cmp.top_k"))
        go = st.form_submit_button(t("fill_mask.compare"), type="primary")
    device = spec.device if spec else "auto"
    asked = (tuple(chosen), ctext, ctop, device)
    if go:
        specs = [spec_of(o, device) for o in chosen]
        cres = run_or_error(k("cmp_result"), lambda: compare_models(specs, ctext, ctop), made_from=asked)
        if cres is not None:
            record_compare(chosen, ctext, ctop, cres)
    if current_result(k("cmp_result"), asked) is not None:
        show_compare(st.session_state[k("cmp_result")], chosen)

sentences_panel(lm)  # in a room: the room's sentences with the model's top prediction each
urlstate.publish()  # values first created in this run (the defaults) join the link too

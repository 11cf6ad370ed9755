"""Corpus search: index a corpus at one layer (a background job; the index is saved), click a word of a sentence,
see its nearest contexts in the corpus and which words they are. Logic in core/represent/corpus_index.py, drawing in
app/views/represent/corpus_search.py."""

import hashlib

import streamlit as st

from app.kit import presenter
from app.kit.flow import end_page
from app.kit.i18n import explain, t
from app.kit.jobs_panel import job_panel, runner, submit_job
from app.kit.loaders import model_or_error
from app.kit.render import as_text, current_result, job_for, run_or_error, shorten
from app.kit.uploads import upload_box
from app.kit.zh_examples import chinese_examples
from app.views.represent.corpus_search import PAGE, K, depth_label, show_index, show_result
from core.base.messages import carry
from core.base.settings import current as server_settings
from core.represent.corpus_index import (
    DEFAULT_SAMPLE,
    IndexConfig,
    bundled_size,
    default_depth,
    index_job,
    index_key,
    load_key,
    max_sentences_allowed,
    query_words,
    search,
    sentences_from_text,
    sentences_from_upload,
)
from core.represent.token_vectors import num_depths
from core.runtime.jobs import CANCELLED, DONE, ERROR

SOURCES = ("bundled", "paste", "upload")
MAX_NEIGHBOURS = 50
FOUND_SHOWN = 200  # sentences with the looked-up word offered at most

st.title(t("corpus_search.title"))
st.caption(t("corpus_search.intro"))
lm = model_or_error(task="base")
if lm is None:
    end_page()

cap = max_sentences_allowed()
lang = "zh" if chinese_examples(lm.spec) else "en"  # the bundled corpus in the model's and the page's language
depths = num_depths(lm)
if st.session_state.get(K("depth")) not in range(depths):  # a model with fewer layers: its own default
    st.session_state.pop(K("depth"), None)
source = st.radio(
    t("corpus_search.source"),
    SOURCES,
    key=K("source"),
    horizontal=True,
    format_func=lambda s: t(f"corpus_search.source_opt.{s}"),
)
depth = st.select_slider(
    t("corpus_search.depth"),
    options=list(range(depths)),
    value=default_depth(lm),
    key=K("depth"),
    format_func=depth_label,
)
st.caption(t("corpus_search.depth_help"))
with st.form(K("form")):
    if source == "bundled":
        total = bundled_size(lang)
        if lang == "zh":
            st.caption(t("zh_walk.corpus_zh", n=f"{total:,}"))
        sample = st.number_input(
            t("corpus_search.sample", total=f"{total:,}"),
            1,
            min(cap, total),
            min(DEFAULT_SAMPLE, cap, total),
            step=500,
            key=K("sample"),
            help=t("corpus_search.sample_help"),
        )
    elif source == "paste":
        text = st.text_area(
            t("corpus_search.paste", n=f"{cap:,}"),
            key=K("text"),
            height=150,
            placeholder=t("corpus_search.paste_placeholder"),
        )
    else:
        upload = upload_box(
            t("corpus_search.upload", n=f"{cap:,}", mb=f"{server_settings().max_upload_mb:g}"),
            K("upload"),
            kinds=["txt"],
            expect=t("uploads.expect.sentences"),
        )
    build = st.form_submit_button(t("corpus_search.build"), type="primary")


def config(chosen: dict, at: int) -> IndexConfig:
    return IndexConfig(
        chosen["source"],
        chosen.get("sentences", ()),
        depth=int(at),
        max_sentences=chosen.get("n", cap),
        lang=chosen.get("lang", "en"),
    )


if build:  # the corpus the form names now; an error forgets the earlier one (no index stays under a bad form)
    st.session_state.pop(K("error"), None)
    try:
        if source == "bundled":
            chosen = dict(source="bundled", n=int(sample), lang=lang)
        elif source == "paste":
            chosen = dict(source="text", sentences=sentences_from_text(text))
        elif upload is None:
            raise ValueError(t("corpus_search.need_upload"))
        elif not upload.ok:  # its reason is under the box
            raise ValueError("")
        else:
            chosen = dict(source="text", sentences=sentences_from_upload(upload.data, upload.name))
        config(chosen, depth)  # its checks (empty, too many sentences) before anything runs
        st.session_state[K("corpus")] = chosen
    except ValueError as e:
        st.session_state[K("corpus")] = None
        st.session_state[K("error")] = carry(e)

chosen = st.session_state.get(K("corpus"))
if chosen is None:
    if st.session_state.get(K("error")):
        st.error(explain(st.session_state[K("error")]))
    else:
        st.info(t("corpus_search.no_corpus"))
    end_page()

cfg = config(chosen, depth)
key = index_key(lm, cfg)
ci = load_key(lm.spec.family, key, lm.spec.checkpoint)  # saved: loads at once (and stays in a small LRU)
if ci is None:  # not built for this model, corpus and depth: a background job builds and saves it
    jid = job_for(K("jobs"), (lm.spec, key))
    job = runner().get(jid) if jid is not None else None
    idle = job is None or job.status in (DONE, ERROR, CANCELLED)
    if idle:
        slot = st.empty()  # gives way to the job's panel in the same run
        with slot.container():
            st.info(t("corpus_search.no_index", depth=depth_label(depth), n=f"{len(cfg.corpus()):,}"))
            again = st.button(t("corpus_search.build_depth", depth=depth_label(depth)), key=K("build_depth"))
    if idle and (again or build):
        try:
            jid = submit_job(
                PAGE,
                t(
                    "corpus_search.job_name",
                    id=lm.spec.checkpoint,
                    depth=depth_label(depth),
                    n=f"{len(cfg.corpus()):,}",
                ),
                index_job(lm.spec, cfg),
                device=lm.spec.device,
                jobs_key=K("jobs"),
                asked=(lm.spec, key),
            ).id
            slot.empty()
        except ValueError as e:  # QuotaError: too many jobs for this session
            st.error(explain(e))
    if jid is not None:
        job_panel(jid, lambda j: None, key=K("job"))
    end_page()

show_index(ci)


def word_key(query: str) -> str:
    """The word picker's key for one query text: another text starts with no word picked."""
    return K("word." + hashlib.sha1(query.encode("utf-8")).hexdigest()[:12])


def use_sentence(sentence: str, word: str) -> None:
    st.session_state[K("query")] = sentence
    w = next((i for i, (_, _, x) in enumerate(query_words(sentence)) if x.lower() == word.strip().lower()), None)
    st.session_state[word_key(sentence)] = w


def on_find() -> None:  # a new word to look up: its first sentence becomes the query, with the word picked
    word = st.session_state.get(K("find"), "")
    try:
        use_sentence(ci.sentences[ci.sentences_with(word)[0]], word)
    except ValueError:
        pass  # the message is shown below the box


def on_found(sel_key: str, word: str) -> None:
    if st.session_state.get(sel_key) is not None:
        use_sentence(ci.sentences[st.session_state[sel_key]], word)


st.subheader(t("corpus_search.query_head"))
st.session_state.setdefault(K("query"), ci.sentences[0])
c1, c2 = st.columns([1, 2])
find = c1.text_input(
    t("corpus_search.find"), key=K("find"), placeholder=t("corpus_search.find_placeholder"), on_change=on_find
)
if find.strip():
    try:
        found = ci.sentences_with(find)
    except ValueError as e:  # a word absent from the corpus
        c2.error(explain(e))
    else:
        sel = K(f"found.{ci.key}.{find.strip().lower()}")
        c2.selectbox(
            t("corpus_search.found", word=as_text(find.strip()), n=f"{len(found):,}"),
            list(found[:FOUND_SHOWN]),
            key=sel,
            format_func=lambda i: shorten(ci.sentences[i], 120),
            on_change=on_found,
            args=(sel, find),
        )
query = st.text_input(t("corpus_search.query"), key=K("query"))
words = query_words(query)
pick = None
if not words:
    st.info(t("corpus_search.no_words"))
else:
    pick = st.pills(
        t("corpus_search.pick"),
        list(range(len(words))),
        key=word_key(query),
        selection_mode="single",
        format_func=lambda i: as_text(words[i][2]),
    )
    with presenter.settings():
        k = st.slider(t("corpus_search.k"), 1, MAX_NEIGHBOURS, 10, key=K("k"))
    if pick is None:
        st.caption(t("corpus_search.pick_prompt"))
if pick is not None:
    asked = (lm.spec, ci.key, query, int(pick), int(k))  # model, corpus, depth (in the key), query, word, k
    if current_result(K("result"), asked) is None:
        run_or_error(K("result"), lambda: search(lm, ci, query, int(pick), k=int(k)), made_from=asked)
    res = current_result(K("result"), asked)
    if res is not None:
        show_result(res)

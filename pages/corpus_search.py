"""Corpus search: index a corpus at one layer (a background job; the index is saved), click a word of a sentence,
see its nearest contexts in the corpus and which words they are. Logic in core/represent/corpus_index.py, drawing in
app/views/represent/corpus_search.py."""

import streamlit as st

from app.kit import urlstate
from app.kit.flow import end_page
from app.kit.i18n import explain, t
from app.kit.jobs_panel import job_panel, session_job, submit_job
from app.kit.loaders import model_or_error
from app.kit.render import job_for
from app.kit.state import session_id
from app.kit.uploads import upload_box
from app.kit.zh_examples import chinese_examples
from app.views.represent.corpus_search import PAGE, K, depth_label, query_section, show_index
from core.base.messages import carry
from core.base.settings import current as server_settings
from core.represent.corpus_index import (
    DEFAULT_SAMPLE,
    CorpusIndexError,
    IndexConfig,
    bundled_size,
    default_depth,
    index_job,
    index_key,
    load_key,
    max_sentences_allowed,
    sentences_from_text,
    sentences_from_upload,
)
from core.represent.token_vectors import num_depths
from core.runtime.jobs import CANCELLED, DONE, ERROR

SOURCES = ("bundled", "paste", "upload")

st.title(t("corpus_search.title"))
st.caption(t("corpus_search.intro"))
lm = model_or_error(task="base")
if lm is None:
    end_page()

cap = max_sentences_allowed()
lang = "zh" if chinese_examples(lm.spec) else "en"  # the bundled corpus in the model's and the page's language
depths = num_depths(lm)
if st.session_state.get(K("depth")) not in range(depths):  # a model with fewer layers: its own default
    st.session_state[K("depth")] = default_depth(lm)
urlstate.relabel((K("source"), K("depth")))  # their labels are in the session's language
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
    key=K("depth"),
    format_func=depth_label,
)
st.caption(t("corpus_search.depth_help"))
with st.form(K("form")):
    if source == "bundled":
        total = bundled_size(lang)
        if lang == "zh":
            st.caption(t("common.corpus_zh", n=f"{total:,}"))
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
        owner=session_id(),  # on the hosted demo a pasted or uploaded text's index is this session's alone
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
try:
    ci = load_key(lm.spec.family, key, lm.spec.checkpoint)  # saved: loads at once (and stays in a small LRU)
except CorpusIndexError as e:  # damaged: set aside, so the button below builds it again; the message stays beside it
    ci = None
    st.session_state[K("damaged")] = (key, carry(e))
if ci is None:  # not built for this model, corpus and depth: a background job builds and saves it
    jid = job_for(K("jobs"), (lm.spec, key))
    job = session_job(jid) if jid is not None else None
    idle = job is None or job.status in (DONE, ERROR, CANCELLED)
    if idle:
        slot = st.empty()  # gives way to the job's panel in the same run
        with slot.container():
            damaged = st.session_state.get(K("damaged"), (None, ""))
            if damaged[0] == key:
                st.warning(explain(damaged[1]))
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
query_section(lm, ci)

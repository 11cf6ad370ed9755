"""Embedding projector: a word's contextual vectors across a corpus (or every word of a sample), in 2-D or 3-D at
every depth; a depth slider switches depth without recomputing. PCA runs here; UMAP and t-SNE run as jobs.
Logic in core/represent/projector.py, drawing in app/views/represent/projector.py."""

import streamlit as st

from app.kit import presenter, urlstate
from app.kit.flow import end_page
from app.kit.i18n import explain, t
from app.kit.jobs_panel import job_panel, session_job, submit_job
from app.kit.loaders import model_or_error
from app.kit.render import current_result, job_for, stale_note
from app.kit.uploads import upload_box
from app.kit.zh_examples import chinese_examples, fill_default
from app.views.represent.projector import K, show_projection
from core.base.messages import carry
from core.represent.projector import (
    CORPORA,
    DEFAULT_POINTS,
    MAX_POINTS,
    METHODS,
    WHATS,
    ProjectorConfig,
    bundled_count,
    corpus_of,
    pick_sentences,
    project,
    project_job,
    runs_as_job,
)
from core.runtime.jobs import CANCELLED, ERROR

st.title(t("projector.title"))
st.caption(t("projector.intro"))
lm = model_or_error(task="base")
if lm is None:
    end_page()

lang = "zh" if chinese_examples(lm.spec) else "en"  # the bundled corpus in the model's and the page's language
fill_default(K("word"), "bank", "projector_word", lm.spec)
urlstate.relabel((K("what"), K("corpus"), K("method")))  # their labels are in the session's language
with st.form(K("form")):
    c1, c2 = st.columns(2)
    what = c1.radio(t("projector.what"), WHATS, key=K("what"), format_func=lambda w: t(f"projector.what_opt.{w}"))
    word = c2.text_input(t("projector.word"), key=K("word"), help=t("projector.word_help"))
    corpus = c1.radio(
        t("projector.corpus"),
        CORPORA,
        key=K("corpus"),
        horizontal=True,
        format_func=lambda c: t(f"projector.corpus_opt.{c}"),
    )
    if lang == "zh":
        c1.caption(t("common.corpus_zh", n=f"{bundled_count('zh'):,}"))
    text = st.text_area(t("projector.text"), key=K("text"), height=100, placeholder=t("projector.text_placeholder"))
    upload = upload_box(t("projector.upload"), K("upload"), kinds=["txt"], expect=t("projector.upload_expect"))
    with presenter.settings():
        c3, c4, c5 = st.columns(3)
        method = c3.selectbox(
            t("projector.method"), METHODS, key=K("method"), format_func=lambda m: t(f"projector.method_opt.{m}")
        )
        dims = c4.radio(t("projector.dims"), (2, 3), key=K("dims"), horizontal=True, format_func=lambda d: f"{d}-D")
        max_points = c5.number_input(
            t("projector.max_points"),
            4,
            MAX_POINTS,
            DEFAULT_POINTS,
            step=1000,
            key=K("max_points"),
            help=t("projector.max_points_help"),
        )
    go = st.form_submit_button(t("projector.show"), type="primary")

text_in, upload_error = text, None
if corpus == "text" and upload is not None:  # an upload wins over the box; a refused one says why under it
    text_in, upload_error = upload.text, upload.error
want = (
    lm.spec,
    what,
    word.strip(),
    corpus,
    text_in if corpus == "text" else "",
    method,
    int(dims),
    int(max_points),
    lang,
)
if go and not upload_error:  # a refused upload: its reason is under the box
    st.session_state[K("submitted")] = want
    st.session_state.pop(K("error"), None)
    try:
        cfg = ProjectorConfig(
            what=what,
            word=word,
            corpus=corpus,
            text=text_in,
            method=method,
            dims=int(dims),
            max_points=int(max_points),
            color=st.session_state.get(K("color"), "next_word"),
            lang=lang,
        )
        if runs_as_job(method, int(max_points)):
            pick_sentences(cfg, corpus_of(cfg))  # an absent word says so now, not after a job starts
            submit_job(
                "projector",
                t("projector.job_name", method=method.upper(), id=lm.spec.checkpoint),
                project_job(lm.spec, cfg),
                device=lm.spec.device,
                jobs_key=K("jobs"),
                asked=want,
            )
        else:
            with st.spinner(t("projector.running")):
                st.session_state[K("result")] = project(lm, cfg)
            st.session_state[K("result.made_from")] = want
    except ValueError as e:  # bad config, absent word, empty text, a binary upload, a session's job quota
        st.session_state[K("error")] = (want, carry(e))

error = st.session_state.get(K("error"), (None, ""))
if error[0] == want:  # kept, so the message stays across reruns (the slider, the colour)
    st.error(explain(error[1]))
elif runs_as_job(method, int(max_points)) and st.session_state.get(K("submitted")) == want:
    jid = job_for(K("jobs"), want)
    job = session_job(jid) if jid is not None else None
    if job is not None:

        def _done(j):
            st.session_state[K("result")] = j.result
            st.session_state[K("result.made_from")] = want

        job_panel(jid, _done, key=K("job"))
        if job.status in (ERROR, CANCELLED):
            st.caption(t("projector.again"))

res = current_result(K("result"), want)
if res is not None:
    show_projection(res)
elif st.session_state.get(K("submitted")) != want:
    stale_note(K("result"))

"""Fine-tune: a short classification fine-tune of the sidebar's model (whole texts, or every word for token
classification), with live curves, results and run comparison.

Every option is kept in the URL (a link restores the data choice and the hyperparameters, but never starts a
run: only the Start button does); the hyperparameters beyond the first row fold away in presenter view; each
finished run (and each try-it prediction) goes into the session report."""

from __future__ import annotations

from functools import partial

import streamlit as st

from app.kit import finetune_work as work
from app.kit import presenter, state, urlstate
from app.kit.i18n import explain, t
from app.views.train import finetune as view
from app.views.train import finetune_data as data_view
from app.views.train import finetune_runs as runs_view
from app.views.train import finetune_slices as slices_view
from app.views.train import remedies as remedies_view
from core import registry
from core.train.finetune_config import (
    POOLINGS,
    PRECISIONS,
    TASKS,
    hidden_size_of,
)

K, KEEP, number = view.K, view.KEEP, view.number
# the sliders' stops, declared on FinetuneConfig's fields with their ranges
LRS, BATCHES, MAX_LENS = (view.BOUNDS[f].stops for f in ("lr", "batch_size", "max_length"))
spec = state.current_spec()
HIDDEN = hidden_size_of(spec.checkpoint) if spec is not None else None
TASK = st.session_state.get(K("task")) or st.query_params.get(K("task"))  # a link's task: its defaults, too
TASK = TASK if TASK in TASKS else "sequence"
# by model size (the minis need a higher lr than the articles' to learn in a minute) and task (token: 5e-5)
START, ARTICLES = view.starting_settings(HIDDEN, TASK)
OPTIONS = view.url_options(START, data_view.SOURCES, data_view.TOKEN_SOURCES)  # key: (default, URL field)
FIELDS = tuple(f for _, f in OPTIONS.values()) + slices_view.FIELDS  # and the runs' slicing keyword and regex

restored = urlstate.bind(FIELDS)  # before the widgets: a link's values become their state
for name, (default, _) in OPTIONS.items():
    if default is not None:
        st.session_state.setdefault(K(name), default)

st.title(t("finetune.title"))
st.caption(t("finetune.intro"))
if restored:
    st.info(t("finetune.link_restored"))
runs: list[dict] = st.session_state.setdefault(K("runs"), [])

st.subheader(t("finetune.h_data"))
task = st.radio(
    t("finetune.task"),
    TASKS,
    key=K("task"),
    persist_state=KEEP,
    horizontal=True,
    format_func=lambda v: t(f"finetune.task_opt.{v}"),
    on_change=view.task_changed,
    args=(HIDDEN,),
)
# a picker draws its widgets and says what to load; the page loads it, and the view describes what came
if task == "token":
    tok_ask = data_view.token_data_picker()
    data = data_view.token_data_shown(
        tok_ask, work.token_sample_data() if tok_ask is not None and tok_ask.sample else None
    )
    with st.expander(t("finetune.tok.split_expander"), expanded=True):
        data_view.split_table(spec, work.split_tokenizer(spec))
else:
    ask = data_view.data_picker()
    data = data_view.data_shown(ask, work.labelled_data(ask.bundled, ask.glue) if ask is not None else None)

st.subheader(t("finetune.h_settings"))
if spec is None:
    st.error(explain(st.session_state.get(state.SPEC_ERROR) or t("common.pick_model")))
else:
    st.markdown(
        t("finetune.model_line", id=spec.checkpoint, family=registry.family(spec.family).label, device=spec.device)
    )
view.presets(HIDDEN, START, ARTICLES, task)
# Enter in a number box never queues a run (only Start does). One form per task: the task switch's callback moves
# the lr (and preset) to the new task's; a new form draws from those values (an old one could submit its own).
with st.form(K("form") if task == "sequence" else K("form_token"), enter_to_submit=False):
    c = st.columns(4)
    number(c[0], "epochs")
    number(c[1], "max_steps")
    c[2].select_slider(
        t("finetune.lr"),
        LRS,
        format_func=lambda v: f"{v:.0e}",
        key=K("lr"),
        persist_state=KEEP,
        help=t("finetune.lr_help"),
    )
    if task == "token":
        c[2].caption(t("finetune.tok.lr_note"))
    c[3].select_slider(t("finetune.batch"), BATCHES, key=K("batch"), persist_state=KEEP)
    with presenter.settings():
        c = st.columns(4)
        c[0].select_slider(t("finetune.max_len"), MAX_LENS, key=K("max_len"), persist_state=KEEP)
        number(c[1], "warmup")
        number(c[2], "wd")
        number(c[3], "clip")
        c = st.columns(4)
        # Pooling only for texts (a token run tags each word: its head, or a scalar mix); never redrawn with other
        # options per task: that submits stale form values (Streamlit 1.67, seen in Chromium).
        if task == "sequence":
            c[0].radio(
                t("finetune.pooling"),
                POOLINGS,
                key=K("pooling"),
                persist_state=KEEP,
                horizontal=True,
                format_func=lambda p: t(f"finetune.pooling_opt.{p}"),
                help=t("finetune.pooling_help"),
            )
        else:
            c[0].checkbox(
                t("finetune.pooling_opt.scalar_mix"),
                key=K("tok_mix"),
                persist_state=KEEP,
                help=t("finetune.tok.no_pooling"),
            )
        c[1].checkbox(t("finetune.freeze_emb"), key=K("freeze_emb"), persist_state=KEEP)
        number(c[2], "freeze_n")
        number(c[3], "seed")
        c = st.columns(4)
        number(c[0], "patience", help=t("finetune.patience_help"))
        number(c[1], "evals")
        number(c[2], "rows")
        number(c[3], "test_rows")
        c = st.columns(4)  # the article's remedies when memory runs out or the model overfits
        c[0].checkbox(
            t("finetune.grad_ckpt"), key=K("grad_ckpt"), persist_state=KEEP, help=t("finetune.grad_ckpt_help")
        )
        c[1].selectbox(
            t("finetune.precision"),
            PRECISIONS,
            key=K("precision"),
            persist_state=KEEP,
            format_func=lambda p: t(f"finetune.precision_opt.{p}"),
            help=t("finetune.precision_help"),
        )
        c[2].select_slider(
            t("finetune.dropout"),
            view.DROPOUTS,
            key=K("dropout"),
            persist_state=KEEP,
            format_func=view.dropout_label,
            help=t("finetune.dropout_help"),
        )
        c[3].caption(t("finetune.article_regularise"))
    preview = view.config_from_state(spec, task)  # the settings as they stand (a form applies edits on Start)
    view.advice(preview, HIDDEN)
    start = st.form_submit_button(t("finetune.start"), type="primary")
with st.expander(t("finetune.oom.expander")):  # the remedies measured (a job), beside the article's advice
    oom = remedies_view.oom_form(preview, data)  # it says itself when the settings or the data are missing
    if oom is not None and oom.go:
        work.start_remedies(remedies_view.JOBS, oom.cfg, oom.data, oom.steps, oom.asked)
    remedies_view.oom_result(oom)


if start:
    try:
        if spec is None or data is None:
            raise ValueError(t("finetune.need_model_and_data"))
        rows, test_rows = (int(st.session_state[K(k)]) or None for k in ("rows", "test_rows"))
        work.submit(runs, view.config_from_state(spec, task, strict=True), data.subset(rows, test_rows))
    except ValueError as e:
        st.error(explain(e))

runs_view.runs_section(
    runs, work.jobs_of(runs), resume=work.resume, restart=partial(work.restart, runs), load=work.trained_model
)
urlstate.publish()  # the defaults set above, on the first visit, too

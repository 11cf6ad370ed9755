"""Layer lens: the MLM head's top-k at the mask after every layer (raw or tuned lens), the last layer's answer
across depth, and a tuned lens trained in a background job with its held-out KL per depth.
Logic in core/inspect/lens.py, drawing in app/views/inspect/lens.py."""

import streamlit as st

from app.kit import presenter, state, urlstate
from app.kit.flow import end_page
from app.kit.i18n import explain, t
from app.kit.jobs_panel import job_panel, session_job, submit_job
from app.kit.loaders import mlm_model_or_error
from app.kit.render import current_result, job_for, mini_note, run_or_error, stale_note
from app.views.inspect.lens import K, show_kl, show_result
from app.views.predict.fill_mask_widgets import example_default, example_list, use_example
from core.base.messages import carry
from core.base.settings import current as server_settings
from core.inspect.lens import MODES, LensConfig, lens
from core.inspect.lens_forward import LensError
from core.inspect.tuned_lens import HOSTED_MAX_TUNE_STEPS, MAX_TUNE_STEPS, TuneConfig, model_key, tune_job, tuned_report
from core.runtime.jobs import CANCELLED, ERROR

MAX_K = 20  # candidates per depth the table shows at most

st.title(t("lens.title"))
st.caption(t("lens.intro"))
lm = mlm_model_or_error()  # None: it said why (no model, or no trained MLM head)
if lm is None:
    end_page()

ex = example_list(state.current_spec())
example_default(K("text"), ex)  # Chinese in 中文 with a Chinese-capable model
st.selectbox(
    t("lens.example"),
    ex,
    index=None,
    placeholder=t("lens.example_placeholder"),
    key=K("example"),
    on_change=use_example,
    args=(K("example"), K("text")),
)
with st.form(K("form")):
    text = st.text_area(t("lens.text"), key=K("text"), height=80)
    with presenter.settings():
        top_k = st.slider(t("lens.top_k"), 1, MAX_K, 5, key=K("top_k"))
    go = st.form_submit_button(t("lens.show"), type="primary")
urlstate.relabel((K("mode"),))  # its labels are in the session's language
mode = st.radio(
    t("lens.mode"),
    MODES,
    key=K("mode"),
    horizontal=True,
    help=t("lens.mode_help"),
    format_func=lambda m: t(f"lens.mode_opt.{m}"),
)

key = model_key(lm)
try:
    report = tuned_report(lm)
except LensError as e:  # damaged: set aside, so the form below trains a new one; the message stays beside it
    report = None
    st.session_state[K("damaged")] = (key, carry(e))
want = (lm.spec, text, int(top_k))  # what the form asks for
asked = want + (mode, key, report.created if mode == "tuned" and report else None)  # ... and what the lens uses
if go:  # the form's message (no [MASK], too long, ...) even while no lens can run yet
    st.session_state[K("submitted")] = want
    st.session_state.pop(K("error"), None)
    try:
        LensConfig(text, top_k=int(top_k), mode=mode)
    except ValueError as e:
        st.session_state[K("error")] = (want, carry(e))
ready = mode == "raw" or report is not None
error = st.session_state.get(K("error"), (None, ""))
if error[0] == want:  # kept, so the message stays on screen across reruns (the job panel's, the mode switch)
    st.error(explain(error[1]))
elif (
    st.session_state.get(K("submitted")) == want
    and ready
    and (go or st.session_state.get(K("result.made_from")) != asked)
):

    def _run():
        try:
            return lens(lm, LensConfig(text, top_k=int(top_k), mode=mode))
        except ValueError as e:  # e.g. masks too far apart for the model's window
            st.session_state[K("error")] = (want, carry(e))
            raise

    run_or_error(K("result"), _run, made_from=asked)

if mode == "tuned" and report is None:  # no tuned lens yet: train one in the background
    jid = job_for(K("jobs"), (lm.spec, key))
    job = session_job(jid) if jid is not None else None
    if job is None or job.status in (ERROR, CANCELLED):
        slot = st.empty()  # the form gives way to the job's panel in the same run
        with slot.container():
            damaged = st.session_state.get(K("damaged"), (None, ""))
            if damaged[0] == key:
                st.warning(explain(damaged[1]))
            st.info(t("lens.no_tuned"))
            cap = HOSTED_MAX_TUNE_STEPS if server_settings().hosted else MAX_TUNE_STEPS
            with st.form(K("train_form")):
                steps = st.number_input(t("lens.steps"), 1, cap, TuneConfig().steps, step=50, key=K("steps"))
                train = st.form_submit_button(t("lens.train"))
        if train:
            try:
                fn = tune_job(lm.spec, TuneConfig(steps=int(steps)))
                jid = submit_job(
                    "lens",
                    t("lens.job_name", id=lm.spec.checkpoint),
                    fn,
                    device=lm.spec.device,
                    jobs_key=K("jobs"),
                    asked=(lm.spec, key),
                ).id
                slot.empty()
            except ValueError as e:  # QuotaError: too many jobs for this session
                st.error(explain(e))
    if jid is not None:

        def _done(j):
            st.success(
                t(
                    "lens.trained",
                    steps=j.result.steps,
                    seconds=f"{j.result.seconds:,.0f}",
                    n=j.result.heldout_positions,
                )
            )
            show_kl(j.result)

        job_panel(jid, _done, key=K("job"))

res = current_result(K("result"), asked)
if res is not None:
    mini_note(lm.spec.checkpoint, "mlm")
    show_result(res)
elif st.session_state.get(K("submitted")) == want and ready:
    stale_note(K("result"))
if report is not None:
    show_kl(report)

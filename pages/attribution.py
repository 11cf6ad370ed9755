"""Attributions: which input tokens drive a masked word, the NSP/SOP decision, a classifier's class or one word's tag
(captum). Widgets: app/views/inspect/attribution_widgets.py (the methods from core.inspect.attribution_methods); drawing:
app/views/inspect/attribution.py."""

import streamlit as st

from app.kit import presenter, state, urlstate
from app.kit.flow import end_page
from app.kit.i18n import explain, t
from app.kit.jobs_panel import job_panel, runner
from app.kit.loaders import model_or_error, proposer_or_error
from app.kit.patching_work import patch_once
from app.kit.uploads import upload_box
from app.views.inspect import attribution as ra
from app.views.inspect import attribution_widgets as ui
from app.views.inspect import counterfactual as cv
from app.views.inspect import patching as pv
from core.base.messages import carry
from core.inspect import attribution as A
from core.inspect import attribution_inputs as AI
from core.inspect.counterfactual import counterfactuals
from core.runtime.jobs import resource_for

K = ui.K
TABS = ("one", "batch", "patch", "cf")
restored = urlstate.bind(
    ui.TOP_FIELDS + ui.ONE_FIELDS + pv.FIELDS + cv.FIELDS + (urlstate.Field(K("tab"), choices=TABS),)
)
restored_patch, restored_cf = (bool(restored & {f.key for f in fs.INPUTS}) for fs in (pv, cv))

st.title(t("attribution.title"))
st.caption(t("attribution.intro"))
target = ui.target_picker()
ok, spec = ui.model_pick(target)  # spec None: the sidebar's model
lm = model_or_error(task=ui.TASK[target], spec=spec) if ok else None
lm = ui.usable(lm, target) if lm is not None else None
if lm is None:
    urlstate.publish()
    end_page()
restored |= ui.bind_class(lm, target)
class_label = ui.class_label(lm, target)
ui.defaults("one", target, lm)
ui.defaults("batch", target, lm)


def start(name: str, fn) -> None:
    job = runner().submit(
        t(f"attribution.job.{name}"),
        fn,
        resource=resource_for(lm.spec.device),
        owner=state.session_id(),
        interactive=True,  # seconds a person waits for: never behind a fine-tune (core.runtime.jobs)
    )
    st.session_state[K(f"{name}.job")] = job.id


def forget(name: str) -> None:
    """Drop the last result of a tab (after an error, or when it no longer matches what is on screen)."""
    st.session_state.pop(K(f"{name}.job"), None)
    st.session_state.pop(K(f"{name}.run"), None)


def show_one(job) -> None:
    figures = ra.show_result(job.result, K("result"), lm.tokenizer.mask_token or "")
    ra.record(job.result, st.session_state.get(K("attribution.inputs"), {}), figures, f"attribution:{job.id}")


labels = [t(f"attribution.tab.{x}") for x in TABS]
opened = st.session_state.get(K("tab"))
opened = opened if opened in TABS else "one"
st.session_state[K("tabs")] = labels[TABS.index(opened)]  # a link's tab, or a follower's presenter's, in this language


def on_tab() -> None:  # the open tab goes into the URL: a link, and a room's followers, open the same tab
    label = st.session_state.get(K("tabs"))
    st.session_state[K("tab")] = TABS[labels.index(label)] if label in labels else "one"


tab_one, tab_batch, tab_patch, tab_cf = st.tabs(labels, key=K("tabs"), on_change=on_tab)
with tab_one:
    with presenter.settings():
        sw = ui.method_settings("one", lm, per_layer_option=True)
    # No form: an edited text or word reruns the page at once, so the last result is marked out of date below.
    with st.container():
        label = t("attribution.sentence_a") if target == "pair" else t("attribution.text")
        # Each target keeps its own text while another target is shown (Streamlit drops an undrawn widget's value).
        text = st.text_area(label, key=K(f"text.{target}"), persist_state="session")
        text_b = (
            st.text_input(t("attribution.sentence_b"), key=K("text_b"), persist_state="session")
            if target == "pair"
            else ""
        )
        tw = ui.target_widgets("one", target, lm)
        go_row = st.container(horizontal=True, vertical_alignment="center", gap="medium")  # the button's own width
        go = go_row.button(t("attribution.go"), type="primary", key=K("go")) or st.session_state.pop(K("go_now"), False)
    # What the page holds now; a result is shown only while it was computed from exactly this (and this model).
    try:
        cfg, cfg_error = AI.AttributionConfig(target=target, text=text, text_b=text_b, **tw, **sw), None
    except ValueError as e:
        cfg, cfg_error = None, carry(e)
    ui.show_estimate(
        go_row, lm, cfg, cfg_error, pressed=go
    )  # beside Explain: the passes and time these settings will take
    # a link runs what the button would have run with the same inputs (and only that)
    if go or tab_one.open and restored & {f.key for f in ui.TOP_FIELDS + ui.ONE_FIELDS}:
        try:
            if cfg is None:
                raise ValueError(cfg_error)
            AI.prepare(lm, cfg)  # bad input (no mask, unknown word, too long) is reported here, not in the job
        except ValueError as e:
            st.error(explain(e))
            forget("attribution")
        else:
            if go or st.session_state.get(K("attribution.run")) != (lm.spec, cfg):  # a link opened again: once
                start("attribution", lambda ctx, lm=lm, cfg=cfg: A.attribute(lm, cfg, ctx.progress))
                st.session_state[K("attribution.run")] = (lm.spec, cfg)
                st.session_state[K("attribution.inputs")] = ra.report_inputs(lm.spec.checkpoint, cfg, class_label)
    if K("attribution.job") in st.session_state:
        if st.session_state.get(K("attribution.run")) == (lm.spec, cfg):
            job_panel(st.session_state[K("attribution.job")], show_one, key=K("one.panel"))
        else:
            st.info(t("attribution.stale"))

with tab_batch:
    st.caption(t("attribution.batch_intro"))
    with presenter.settings():
        sw_b = ui.method_settings("batch", lm)
    with st.form(K("batch.form")):
        upload = upload_box(
            t("attribution.csv_file"), K("batch.file"), kinds=["csv"], expect=t("uploads.expect.attribution_csv")
        )
        tw_b = ui.target_widgets("batch", target, lm)
        go_b = st.form_submit_button(t("attribution.go_batch"), type="primary")
    settings = dict(target=target, **tw_b, **sw_b)
    batch_run = (lm.spec, repr(sorted(settings.items())), None if upload is None else upload.sig)
    if go_b and (upload is None or upload.ok):  # a refused file: its reason is under the box
        try:
            if upload is None:
                raise ValueError(t("attribution.need_csv"))
            rows = A.read_batch_csv(upload.text)
            A.check_batch_settings(settings)
        except ValueError as e:
            st.error(explain(e))
            forget("batch")
        else:
            start("batch", lambda ctx, lm=lm, rows=rows, s=settings: A.attribute_batch(lm, rows, s, ctx.progress))
            st.session_state[K("batch.run")] = batch_run
    if K("batch.job") in st.session_state:
        if st.session_state.get(K("batch.run")) == batch_run:
            job_panel(
                st.session_state[K("batch.job")],
                lambda j: ra.show_batch(j.result, K("batch_result")),
                key=K("batch.panel"),
            )
        else:
            st.info(t("attribution.stale_batch"))

with tab_patch:
    ask = pv.inputs(target, lm, restored, linked=tab_patch.open and restored_patch)  # refusals: errors when asked
    patch_run = (lm.spec, ask.cfg)
    linked = tab_patch.open and restored_patch and st.session_state.get(K("patch.run")) != patch_run
    if ask.cfg is not None and (ask.go or linked):
        start("patch", lambda ctx, lm=lm, cfg=ask.cfg: patch_once(lm, cfg, ctx.progress))
        st.session_state[K("patch.run")] = patch_run
    if K("patch.job") in st.session_state:
        if st.session_state.get(K("patch.run")) == patch_run:
            job_panel(st.session_state[K("patch.job")], pv.on_done(lm.spec.checkpoint), key=K("patch.panel"))
        else:
            st.info(t("patching.stale"))

with tab_cf:
    cf = cv.inputs(target, linked=tab_cf.open and restored_cf)
    cf_run = (lm.spec, cf.cfg)
    linked = tab_cf.open and restored_cf and st.session_state.get(K("cf.run")) != cf_run
    if cf.cfg is not None and (cf.go or linked) and (mlm := proposer_or_error(lm, target, cf.cfg.proposer))[0]:
        start("cf", lambda ctx, lm=lm, cfg=cf.cfg, mlm=mlm[1]: counterfactuals(lm, cfg, mlm, ctx.progress))
        st.session_state[K("cf.run")] = cf_run
    if K("cf.job") in st.session_state:
        if st.session_state.get(K("cf.run")) == cf_run:
            job_panel(st.session_state[K("cf.job")], cv.on_done(target), key=K("cf.panel"))
        else:
            st.info(t("counterfactual.stale"))
urlstate.publish()  # the widgets drawn in this run hold their values now: the address bar links to this view

"""Attributions: which input tokens drive a masked word, the NSP/SOP decision, a classifier's class or one word's tag
(captum)."""
import streamlit as st

from app import presenter, state, urlstate
from app import render_attribution as ra
from app.i18n import t, t_or
from app.jobs_ui import job_panel, runner
from app.loaders import model_or_error
from app.render import mini_note
from core import attribution as A
from core.models import ModelLoadError, ModelSpec


def K(name: str) -> str:
    return state.key("attribution", name)


TARGETS = ("mask", "pair", "class", "token")
TASK = {"mask": "mlm", "pair": "pretraining", "class": "seqcls", "token": "tokcls"}
KIND = {"class": "fine-tuned", "token": "fine-tuned-token"}  # which of this session's fine-tunes each target takes
SIDEBAR = "sidebar"  # the classifier choice "the sidebar model"; the others are this session's fine-tuned models
DEFAULT_METHODS = ["lig", "saliency", "ixg", "occlusion"]


def tuned_models() -> list:
    kind = KIND.get(st.session_state.get(K("target")), "fine-tuned")
    return [m for m in state.session_models() if m.kind == kind]


def classifier_names() -> list[str]:
    return [SIDEBAR] + [m.label for m in tuned_models()]


# What a link keeps. The text/target fields are bound before the model loads; the class choice needs the model.
TOP_FIELDS = (urlstate.Field(K("target"), choices=TARGETS), urlstate.Field(K("classifier"), choices=classifier_names))
ONE_FIELDS = (
    *(urlstate.Field(K(f"text.{x}")) for x in TARGETS), urlstate.Field(K("text_b")),
    urlstate.Field(K("one.mask_index"), "int", lo=1, hi=50), urlstate.Field(K("one.word"), max_len=100),
    urlstate.Field(K("one.word_index"), "int", lo=1, hi=200),
    urlstate.Field(K("one.contrast"), max_len=100),
    urlstate.Field(K("one.methods"), "strs", choices=tuple(A.METHODS)),
    urlstate.Field(K("one.baseline"), choices=tuple(A.BASELINES)),
    urlstate.Field(K("one.n_steps"), "int", lo=2, hi=1000), urlstate.Field(K("one.ibs"), "int", lo=1, hi=1000),
    urlstate.Field(K("one.samples"), "int", lo=10, hi=5000), urlstate.Field(K("layers"), "bool"),
    urlstate.Field(K("layer_steps"), "int", lo=2, hi=300),
)
restored = urlstate.bind(TOP_FIELDS + ONE_FIELDS)

st.title(t("attribution.title"))
st.caption(t("attribution.intro"))
target = st.radio(t("attribution.explain"), TARGETS, horizontal=True, key=K("target"),
                  format_func=ra.option_labels(TARGETS, lambda x: t(f"attribution.target.{x}")))

spec = None
if target in KIND:
    tuned = tuned_models()
    noun = "tagger" if target == "token" else "classifier"
    pick = st.selectbox(t(f"attribution.{noun}"), classifier_names(), key=K("classifier"),
                        format_func=ra.option_labels([SIDEBAR], lambda x: t(f"attribution.sidebar_{noun}")),
                        help=t("attribution.classifier_help"))
    if pick != SIDEBAR:
        m = next(m for m in tuned if m.label == pick)
        try:
            spec = ModelSpec(m.family, m.path, st.session_state.get(state.DEVICE, "auto"))
        except ModelLoadError as e:
            st.error(str(e))
            st.stop()
    elif not tuned:
        st.caption(t(f"attribution.random_head{'_token' if target == 'token' else ''}"))
lm = model_or_error(task=TASK[target], spec=spec)
if lm is None:
    urlstate.publish()
    st.stop()
if target == "pair" and lm.family.pair_head is None:
    st.warning(t_or(f"attribution.no_pair_head.{lm.family.key}", lm.family.pair_head_note) + " "
               + t("attribution.pick_pair_family"))
    urlstate.publish()
    st.stop()
mini_note(lm.spec.checkpoint, {"mask": "mlm", "pair": lm.family.pair_head}.get(target))  # what a bundled mini is
mask = lm.family.mask_token
DEFAULTS = {"mask": f"The capital of France is {mask}, a city on the Seine.",
            "pair": "She opened the door.", "class": "The film was a delight from start to finish.",
            "token": "Anna flew from Paris to Tokyo on Monday."}
classes = A.target_classes(lm, target)
if target in ("pair", "class"):  # the class a link names must exist in this model
    restored |= urlstate.bind((urlstate.Field(K("one.class"), "int", choices=tuple(range(len(classes)))),))


def class_label(i: int) -> str:
    if target == "pair" and lm.family.pair_head:
        return t_or(f"attribution.pair_class.{lm.family.pair_head}.{i}", classes[i])
    return classes[i]


def defaults(prefix: str) -> None:
    """Widget defaults, set once (a link's values were restored into session state before this)."""
    for name, value in ((f"{prefix}.methods", DEFAULT_METHODS), (f"{prefix}.baseline", "pad"),
                        (f"{prefix}.n_steps", 50), (f"{prefix}.ibs", 50), (f"{prefix}.samples", 200),
                        (f"{prefix}.mask_index", 1), (f"{prefix}.word_index", 1), ("layer_steps", 20), ("text_b", "It creaked loudly."),
                        (f"text.{target}", DEFAULTS[target])):
        st.session_state.setdefault(K(name), value)


# Methods that cannot apply to this model are not offered (checked on its modules, before any run), with the reason.
BLOCKED = A.unavailable_methods(lm.model)
OFFERED = [m for m in A.METHODS if m not in BLOCKED]


def settings_widgets(prefix: str) -> dict:
    """Method and integration controls shared by both tabs; returns AttributionConfig fields."""
    picked = st.session_state.get(K(f"{prefix}.methods"), [])
    if any(m in BLOCKED for m in picked):  # e.g. from a link made with another model
        st.session_state[K(f"{prefix}.methods")] = [m for m in picked if m not in BLOCKED]
    methods = st.multiselect(t("attribution.methods"), OFFERED,
                             format_func=ra.option_labels(A.METHODS, ra.method_label),
                             key=K(f"{prefix}.methods"), help=t("attribution.methods_help"))
    for key_, why in BLOCKED.items():
        st.caption(t("attribution.not_offered", method=ra.method_label(key_), why=why))
    c1, c2, c3, c4 = st.columns(4)
    baseline = c1.selectbox(t("attribution.baseline_pick"), list(A.BASELINES),
                            format_func=ra.option_labels(A.BASELINES, ra.baseline_label),
                            key=K(f"{prefix}.baseline"))
    n_steps = c2.number_input(t("attribution.n_steps"), 2, 1000, key=K(f"{prefix}.n_steps"))
    ibs = c3.number_input(t("attribution.ibs"), 1, 1000, key=K(f"{prefix}.ibs"), help=t("attribution.ibs_help"))
    n_samples = c4.number_input(t("attribution.samples"), 10, 5000, key=K(f"{prefix}.samples"))
    return dict(methods=tuple(methods), baseline=baseline, n_steps=int(n_steps), internal_batch_size=int(ibs),
                n_samples=int(n_samples))


def target_widgets(prefix: str) -> dict:
    if target == "mask":
        c1, c2, c3 = st.columns([1, 2, 2])
        which = c1.number_input(t("attribution.which_mask"), 1, 50, key=K(f"{prefix}.mask_index"),
                                persist_state="session")
        word = c2.text_input(t("attribution.word"), key=K(f"{prefix}.word"), persist_state="session")
        other = c3.text_input(t("attribution.contrast"), key=K(f"{prefix}.contrast"),
                              help=t("attribution.contrast_help"), persist_state="session")
        return dict(mask_index=int(which) - 1, word=word, contrast_word=other)
    if target == "token":  # the predicted tag of one word is explained
        which = st.number_input(t("attribution.which_word"), 1, 200, key=K(f"{prefix}.word_index"),
                                help=t("attribution.which_word_help"), persist_state="session")
        return dict(word_index=int(which) - 1)
    c = st.selectbox(t("attribution.class"), range(len(classes)), key=K(f"{prefix}.class"),
                     format_func=ra.option_labels(range(len(classes)), class_label))
    return dict(class_index=int(c))


def start(name: str, fn) -> None:
    job = runner().submit(t(f"attribution.job.{name}"), fn, resource="gpu" if lm.device.startswith("cuda") else "cpu",
                          owner=state.session_id())
    st.session_state[K(f"{name}.job")] = job.id


def forget(name: str) -> None:
    """Drop the last result of a tab (after an error, or when it no longer matches what is on screen)."""
    st.session_state.pop(K(f"{name}.job"), None)
    st.session_state.pop(K(f"{name}.run"), None)


def show_one(job) -> None:
    res = job.result
    figures = ra.show_result(res, K("result"))
    ra.record(res, st.session_state.get(K("attribution.inputs"), {}), figures, f"attribution:{job.id}")


defaults("one")
defaults("batch")
tab_one, tab_batch = st.tabs([t("attribution.tab.one"), t("attribution.tab.batch")])

with tab_one:
    with st.form(K("form")):
        label = t("attribution.sentence_a") if target == "pair" else t("attribution.text")
        # Each target keeps its own text while another target is shown (Streamlit drops an undrawn widget's value).
        text = st.text_area(label, key=K(f"text.{target}"), persist_state="session")
        text_b = st.text_input(t("attribution.sentence_b"), key=K("text_b"), persist_state="session") \
            if target == "pair" else ""
        tw = target_widgets("one")
        with presenter.settings():
            sw = settings_widgets("one")
            c1, c2 = st.columns([1, 3])
            layers = c1.checkbox(t("attribution.layers"), key=K("layers"), help=t("attribution.layers_help"))
            layer_steps = c2.number_input(t("attribution.layer_steps"), 2, 300, key=K("layer_steps"))
        go = st.form_submit_button(t("attribution.go"), type="primary")
    # What the form holds now; a result is shown only while it was computed from exactly this (and this model).
    try:
        cfg = A.AttributionConfig(target=target, text=text, text_b=text_b, **tw, **sw,
                                  layer_steps=int(layer_steps) if layers else 0)
        cfg_error = None
    except ValueError as e:
        cfg, cfg_error = None, str(e)
    # A link runs what the button would have run with the same inputs (and only what it would have).
    from_link = bool(restored)
    if go or from_link:
        try:
            if cfg is None:
                raise ValueError(cfg_error)
            A.prepare(lm, cfg)  # bad input (no mask, unknown word, too long) is reported here, not in the job
        except ValueError as e:
            st.error(str(e))
            forget("attribution")
        else:
            same = st.session_state.get(K("attribution.run")) == (lm.spec, cfg)
            if go or not same:  # a link opened again in this session does not start the same job twice
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
    with st.form(K("batch.form")):
        upload = st.file_uploader(t("attribution.csv_file"), type=["csv"], key=K("batch.file"))
        tw_b = target_widgets("batch")
        with presenter.settings():
            sw_b = settings_widgets("batch")
        go_b = st.form_submit_button(t("attribution.go_batch"), type="primary")
    settings = dict(target=target, **tw_b, **sw_b)
    batch_run = (lm.spec, repr(sorted(settings.items())), None if upload is None else hash(upload.getvalue()))
    if go_b:
        try:
            if upload is None:
                raise ValueError(t("attribution.need_csv"))
            rows = A.read_batch_csv(upload.getvalue())
            A.check_batch_settings(settings)
        except ValueError as e:
            st.error(str(e))
            forget("batch")
        else:
            start("batch", lambda ctx, lm=lm, rows=rows, s=settings: A.attribute_batch(lm, rows, s, ctx.progress))
            st.session_state[K("batch.run")] = batch_run
    if K("batch.job") in st.session_state:
        if st.session_state.get(K("batch.run")) == batch_run:
            job_panel(st.session_state[K("batch.job")], lambda j: ra.show_batch(j.result, K("batch_result")),
                      key=K("batch.panel"))
        else:
            st.info(t("attribution.stale_batch"))
urlstate.publish()  # the widgets drawn in this run hold their values now: the address bar links to this view

"""Attributions: which input tokens drive a masked word, the NSP/SOP decision or a classifier's class (captum)."""
import streamlit as st

from app import render_attribution as ra
from app import state
from app.jobs_ui import job_panel, runner
from app.loaders import model_or_error
from core import attribution as A
from core.models import ModelLoadError, ModelSpec


def K(name: str) -> str:
    return state.key("attribution", name)


TARGETS = {"mask": "Masked word", "pair": "Sentence pair (NSP/SOP)", "class": "Classifier class"}
TASK = {"mask": "mlm", "pair": "pretraining", "class": "seqcls"}
SIDEBAR = "the sidebar model (as a classifier)"

st.title("Attributions")
st.caption("Which input tokens push a prediction up or down, by several captum methods side by side. "
           "Attributions land on the word embeddings; special tokens stay fixed in every baseline.")
target = st.radio("Explain", list(TARGETS), format_func=TARGETS.get, horizontal=True, key=K("target"))

spec = None
if target == "class":
    tuned = [m for m in state.session_models() if m.kind == "fine-tuned"]
    names = [SIDEBAR] + [m.label for m in tuned]
    pick = st.selectbox("Classifier", names, key=K("classifier"),
                        help="Models fine-tuned in this session appear here; any sequence-classification "
                             "checkpoint picked in the sidebar works too.")
    if pick != SIDEBAR:
        m = next(m for m in tuned if m.label == pick)
        try:
            spec = ModelSpec(m.family, m.path, st.session_state.get(state.DEVICE, "auto"))
        except ModelLoadError as e:
            st.error(str(e))
            st.stop()
    elif not tuned:
        st.caption("No fine-tuned model in this session yet: the sidebar model is loaded with a classification "
                   "head, which is random unless the checkpoint has one (fine-tune one on the Fine-tune page).")
lm = model_or_error(task=TASK[target], spec=spec)
if lm is None:
    st.stop()
if target == "pair" and lm.family.pair_head is None:
    st.warning(lm.family.pair_head_note + " Pick BERT (NSP) or ALBERT (SOP) in the sidebar.")
    st.stop()
mask = lm.family.mask_token
DEFAULTS = {"mask": f"The capital of France is {mask}, a city on the Seine.",
            "pair": "She opened the door.", "class": "The film was a delight from start to finish."}

tab_one, tab_batch = st.tabs(["One input", "Batch (CSV)"])


def settings_widgets(prefix: str) -> dict:
    """Method and integration controls shared by both tabs; returns AttributionConfig fields."""
    methods = st.multiselect("Methods", list(A.METHODS), default=["lig", "saliency", "ixg", "occlusion"],
                             format_func=A.METHODS.get, key=K(f"{prefix}.methods"),
                             help="DeepLift needs ReLU/Tanh units and no weight sharing; the page says when it "
                                  "does not apply.")
    c1, c2, c3, c4 = st.columns(4)
    baseline = c1.selectbox("Baseline", list(A.BASELINES), format_func=A.BASELINES.get, key=K(f"{prefix}.baseline"))
    n_steps = c2.number_input("IG n_steps", 2, 1000, 50, key=K(f"{prefix}.n_steps"))
    ibs = c3.number_input("Internal batch size", 1, 1000, 50, key=K(f"{prefix}.ibs"),
                          help="Interpolated inputs per forward pass; lower it to save memory.")
    n_samples = c4.number_input("KernelSHAP/LIME samples", 10, 5000, 200, key=K(f"{prefix}.samples"))
    return dict(methods=tuple(methods), baseline=baseline, n_steps=int(n_steps), internal_batch_size=int(ibs),
                n_samples=int(n_samples))


def target_widgets(prefix: str) -> dict:
    if target == "mask":
        c1, c2, c3 = st.columns([1, 2, 2])
        which = c1.number_input("Which mask", 1, 50, 1, key=K(f"{prefix}.mask_index"))
        word = c2.text_input("Word A (blank: top prediction)", key=K(f"{prefix}.word"))
        other = c3.text_input("… rather than word B (optional)", key=K(f"{prefix}.contrast"),
                              help="Explains logit(A) − logit(B): what makes the model prefer A over B.")
        return dict(mask_index=int(which) - 1, word=word, contrast_word=other)
    classes = A.target_classes(lm, target)
    c = st.selectbox("Class", range(len(classes)), format_func=lambda i: classes[i], key=K(f"{prefix}.class"))
    return dict(class_index=int(c))


def start(name: str, fn) -> None:
    job = runner().submit(name, fn, resource="gpu" if lm.device.startswith("cuda") else "cpu",
                          owner=state.session_id())
    st.session_state[K(f"{name}.job")] = job.id


with tab_one:
    with st.form(K("form")):
        text = st.text_area("Sentence A" if target == "pair" else "Text", DEFAULTS[target], key=K(f"text.{target}"))
        text_b = st.text_input("Sentence B", "It creaked loudly.", key=K("text_b")) if target == "pair" else ""
        tw = target_widgets("one")
        sw = settings_widgets("one")
        c1, c2 = st.columns([1, 3])
        layers = c1.checkbox("Per-layer heatmap", key=K("layers"), help="LayerIG at each encoder layer (slower).")
        layer_steps = c2.number_input("Per-layer n_steps", 2, 300, 20, key=K("layer_steps"))
        go = st.form_submit_button("Explain", type="primary")
    if go:
        try:
            cfg = A.AttributionConfig(target=target, text=text, text_b=text_b, **tw, **sw,
                                      layer_steps=int(layer_steps) if layers else 0)
            A.prepare(lm, cfg)  # bad input (no mask, unknown word, too long) is reported here, not in the job
        except ValueError as e:
            st.error(str(e))
        else:
            start("attribution", lambda ctx, lm=lm, cfg=cfg: A.attribute(lm, cfg, ctx.progress))
    if K("attribution.job") in st.session_state:
        job_panel(st.session_state[K("attribution.job")], lambda j: ra.show_result(j.result, K("result")),
                  key=K("one.panel"))

with tab_batch:
    st.caption("A CSV with a `text` column (and `text_b` for sentence pairs; optional `word` and `class` per "
               "row). Each row is explained with the settings below; export the result as CSV or as one "
               "standalone HTML page.")
    with st.form(K("batch.form")):
        upload = st.file_uploader("CSV file", type=["csv"], key=K("batch.file"))
        tw_b = target_widgets("batch")
        sw_b = settings_widgets("batch")
        go_b = st.form_submit_button("Explain all rows", type="primary")
    if go_b:
        try:
            if upload is None:
                raise ValueError("Upload a CSV file first (a header row with a 'text' column).")
            rows = A.read_batch_csv(upload.getvalue())
            settings = dict(target=target, **tw_b, **sw_b)
            A.check_batch_settings(settings)
        except ValueError as e:
            st.error(str(e))
        else:
            start("batch", lambda ctx, lm=lm, rows=rows, s=settings: A.attribute_batch(lm, rows, s, ctx.progress))
    if K("batch.job") in st.session_state:
        job_panel(st.session_state[K("batch.job")], lambda j: ra.show_batch(j.result, K("batch_result")),
                  key=K("batch.panel"))

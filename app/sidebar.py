"""The one model picker every page shares: family, checkpoint (official, bundled, this session's, custom), device."""
from __future__ import annotations

import streamlit as st

from app import state
from core.models import FAMILIES, ModelLoadError, ModelSpec, availability, bundled_id, resolve_device

CUSTOM_OPTION = "custom (Hub id or local folder)…"


def _checkpoint_options(fam: str) -> list[str]:
    opts = [bundled_id(fam)]
    opts += [m.path for m in state.session_models(fam)]
    opts += [c.id for c in FAMILIES[fam].checkpoints]
    return opts + [CUSTOM_OPTION]


def _label(opt: str) -> str:
    for m in state.session_models():
        if m.path == opt:
            return f"{m.label} ({m.kind}, this session)"
    if opt.startswith("encoderlab/"):
        return f"{opt} (bundled, offline)"
    return opt


def model_picker() -> ModelSpec | None:
    """Draw the picker and store the chosen ModelSpec (or the reason it is invalid) in session state."""
    state.init()
    sb = st.sidebar
    sb.markdown("### Model")
    fam = sb.selectbox("Family", list(FAMILIES), key=state.FAMILY, format_func=lambda k: FAMILIES[k].label)
    opts = _checkpoint_options(fam)
    if st.session_state.get(state.CHECKPOINT) not in opts:
        st.session_state[state.CHECKPOINT] = opts[0]
    choice = sb.selectbox("Checkpoint", opts, key=state.CHECKPOINT, format_func=_label)
    checkpoint = choice
    if choice == CUSTOM_OPTION:
        checkpoint = sb.text_input("Hugging Face id or local folder", key=state.CUSTOM,
                                   placeholder="e.g. bert-base-cased or /data/my-model").strip()
    sb.radio("Device", ["auto", "cpu", "cuda"], key=state.DEVICE, horizontal=True)
    spec, error = None, None
    try:
        resolve_device(st.session_state[state.DEVICE])
        spec = ModelSpec(fam, checkpoint, st.session_state[state.DEVICE])
    except ModelLoadError as e:
        error = str(e)
    st.session_state[state.SPEC] = spec
    st.session_state[state.SPEC_ERROR] = error
    if error:
        sb.error(error)
    elif spec is not None:
        res = availability(spec.checkpoint)
        if res.source == "unavailable":
            sb.warning(f"Not available here: {spec.checkpoint}. Tried: " + "; ".join(res.tried))
        else:
            sb.caption(f"Weights from: **{res.source}**" + (f" — `{res.path}`" if res.path else ""))
    _offline_summary(sb)
    return spec


def _offline_summary(sb) -> None:
    missing = [c.id for f in FAMILIES.values() for c in f.checkpoints if availability(c.id).source == "unavailable"]
    if missing:
        with sb.expander(f"Offline: {len(missing)} official checkpoints cannot be had"):
            st.markdown("These need the Hugging Face Hub, which this machine cannot reach or may not use: "
                        + ", ".join(f"`{m}`" for m in missing)
                        + ".\n\nUse the bundled `encoderlab/*` models, point *custom* at a local folder, "
                          "or run where there is network with `ENCODERLAB_ALLOW_DOWNLOAD=1` "
                          "(or pre-fill the HF cache, e.g. the Docker image does).")

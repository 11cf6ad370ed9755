"""The Attributions page's widgets: what to explain (the target, the model or classifier, which mask, word or
class) and how (the methods and the settings they read). The method picker, its help and which settings appear
come from the method registry, core.inspect.attribution_methods.METHODS. pages/attribution.py lays these out and runs the
jobs; app/views/inspect/attribution.py draws the results."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from app.kit import state, urlstate
from app.kit.cache import attribution_refusal
from app.kit.i18n import explain, t, t_or
from app.kit.render import mini_note
from app.kit.zh_examples import fill_default
from app.views.inspect import attribution as ra
from core.inspect import attribution_estimate as AE
from core.inspect import attribution_inputs as AI
from core.inspect import attribution_methods as AM
from core.inspect import faithfulness as FA
from core.models.cost import BACKWARD_FACTOR, ForwardTiming
from core.models.spec import LoadedModel, ModelSpec
from core.registry import ModelLoadError

TARGETS = tuple(AI.TARGETS)
TASK = {"mask": "mlm", "pair": "pretraining", "class": "seqcls", "token": "tokcls"}
KIND = {"class": "fine-tuned", "token": "fine-tuned-token"}  # which of this session's fine-tunes each target takes
SIDEBAR = "sidebar"  # the classifier choice "the sidebar model"; the others are this session's fine-tuned models
DEFAULT_METHODS = ["lig", "saliency", "ixg", "occlusion"]
SETTINGS = ("baseline", "n_steps", "internal_batch_size", "n_samples")  # the method settings, in widget order
WIDGET = {"internal_batch_size": "ibs", "n_samples": "samples"}  # a setting's widget key, where it differs
REMOVALS = ("default",) + FA.REMOVALS  # how faithfulness removes a token: "default" = the model's own rule


def K(name: str) -> str:
    return state.key("attribution", name)


def tuned_models() -> list:
    kind = KIND.get(st.session_state.get(K("target")), "fine-tuned")
    return [m for m in state.session_models() if m.kind == kind]


def classifier_names() -> list[str]:
    return [SIDEBAR] + [m.label for m in tuned_models()]


# What a link keeps. The text/target fields are bound before the model loads; the class choice needs the model.
TOP_FIELDS = (urlstate.Field(K("target"), choices=TARGETS), urlstate.Field(K("classifier"), choices=classifier_names))
ONE_FIELDS = (
    *(urlstate.Field(K(f"text.{x}")) for x in TARGETS),
    urlstate.Field(K("text_b")),
    urlstate.Field(K("one.mask_index"), "int", lo=1, hi=50),
    urlstate.Field(K("one.word"), max_len=100),
    urlstate.Field(K("one.word_index"), "int", lo=1, hi=200),
    urlstate.Field(K("one.contrast"), max_len=100),
    urlstate.Field(K("one.methods"), "strs", choices=tuple(AM.METHODS)),
    urlstate.Field(K("one.baseline"), choices=tuple(AI.BASELINES)),
    urlstate.Field(K("one.n_steps"), "int", lo=2, hi=1000),
    urlstate.Field(K("one.ibs"), "int", lo=1, hi=1000),
    urlstate.Field(K("one.samples"), "int", lo=10, hi=5000),
    urlstate.Field(K("layers"), "bool"),
    urlstate.Field(K("one.faith"), "bool"),
    urlstate.Field(K("one.removal"), choices=REMOVALS),
    urlstate.Field(K("layer_steps"), "int", lo=2, hi=300),
)


# ------------------------------------------------------------------------------------------------ what to explain
def target_picker() -> str:
    return st.radio(
        t("attribution.explain"),
        TARGETS,
        horizontal=True,
        key=K("target"),
        format_func=ra.option_labels(TARGETS, lambda x: t(f"attribution.target.{x}")),
    )


def model_pick(target: str) -> tuple[bool, ModelSpec | None]:
    """Which model the target explains: the sidebar's (None), or for a class or tag one of this session's
    fine-tunes, picked here. (False, None) after saying why the pick cannot be loaded; the page loads the model."""
    if target not in KIND:
        return True, None
    tuned = tuned_models()
    noun = "tagger" if target == "token" else "classifier"
    pick = st.selectbox(
        t(f"attribution.{noun}"),
        classifier_names(),
        key=K("classifier"),
        format_func=ra.option_labels([SIDEBAR], lambda x: t(f"attribution.sidebar_{noun}")),
        help=t("attribution.classifier_help"),
    )
    if pick != SIDEBAR:
        m = next(m for m in tuned if m.label == pick)
        try:
            return True, ModelSpec(m.family, m.path, st.session_state.get(state.DEVICE, "auto"))
        except ModelLoadError as e:
            st.error(explain(e))
            return False, None
    if not tuned:
        st.caption(t(f"attribution.random_head{'_token' if target == 'token' else ''}"))
    return True, None


def usable(lm: LoadedModel, target: str) -> LoadedModel | None:
    """The page's loaded model (app.kit.loaders.model_or_error, task TASK[target]), or None after saying why it
    cannot explain ``target`` (no pair head for the pair target); what a bundled mini is, under it."""
    if target == "pair" and lm.family.pair_head is None:
        st.warning(
            t_or(f"attribution.no_pair_head.{lm.family.key}", lm.family.pair_head_note)
            + " "
            + t("attribution.pick_pair_family")
        )
        return None
    mini_note(lm.spec.checkpoint, {"mask": "mlm", "pair": lm.family.pair_head}.get(target))  # what a bundled mini is
    return lm


def bind_class(lm: LoadedModel, target: str) -> set[str]:
    """Restore the class a link names, once the model says which classes exist; the keys restored."""
    if target not in ("pair", "class"):
        return set()
    n = len(AI.target_classes(lm, target))
    return urlstate.bind((urlstate.Field(K("one.class"), "int", choices=tuple(range(n))),))


def class_label(lm: LoadedModel, target: str) -> Callable[[int], str]:
    classes = AI.target_classes(lm, target)

    def label(i: int) -> str:
        if target == "pair" and lm.family.pair_head:
            return t_or(f"attribution.pair_class.{lm.family.pair_head}.{i}", classes[i])
        return classes[i]

    return label


def defaults(prefix: str, target: str, lm: LoadedModel) -> None:
    """Widget defaults, set once (a link's values were restored into session state before this)."""
    mask = lm.tokenizer.mask_token or lm.family.mask_token  # the tokenizer's: hfl's Chinese RoBERTa is [MASK]
    text = {
        "mask": f"The capital of France is {mask}, a city on the Seine.",
        "pair": "She opened the door.",
        "class": "The film was a delight from start to finish.",
        "token": "Anna flew from Paris to Tokyo on Monday.",
    }[target]
    for name, value in (
        (f"{prefix}.methods", DEFAULT_METHODS),
        (f"{prefix}.baseline", "pad"),
        (f"{prefix}.n_steps", 50),
        (f"{prefix}.ibs", 50),
        (f"{prefix}.samples", 200),
        (f"{prefix}.mask_index", 1),
        (f"{prefix}.word_index", 1),
        ("layer_steps", 20),
        (f"{prefix}.faith", True),
        (f"{prefix}.removal", "default"),
    ):
        st.session_state.setdefault(K(name), value)
    # the texts: Chinese ones in 中文 with a Chinese-capable model (an untouched example follows the model)
    fill_default(K("text_b"), "It creaked loudly.", "attr_pair_b", lm.spec)
    fill_default(K(f"text.{target}"), text, f"attr_{target}", lm.spec, **({"mask": mask} if target == "mask" else {}))


def target_widgets(prefix: str, target: str, lm: LoadedModel) -> dict:
    """Which mask and word, which word's tag, or which class; returns AttributionConfig fields."""
    if target == "mask":
        c1, c2, c3 = st.columns([1, 2, 2])
        which = c1.number_input(
            t("attribution.which_mask"), 1, 50, key=K(f"{prefix}.mask_index"), persist_state="session"
        )
        word = c2.text_input(t("attribution.word"), key=K(f"{prefix}.word"), persist_state="session")
        other = c3.text_input(
            t("attribution.contrast"),
            key=K(f"{prefix}.contrast"),
            help=t("attribution.contrast_help"),
            persist_state="session",
        )
        return dict(mask_index=int(which) - 1, word=word, contrast_word=other)
    if target == "token":  # the predicted tag of one word is explained
        which = st.number_input(
            t("attribution.which_word"),
            1,
            200,
            key=K(f"{prefix}.word_index"),
            help=t("attribution.which_word_help"),
            persist_state="session",
        )
        return dict(word_index=int(which) - 1)
    n = len(AI.target_classes(lm, target))
    c = st.selectbox(
        t("attribution.class"),
        range(n),
        key=K(f"{prefix}.class"),
        format_func=ra.option_labels(range(n), class_label(lm, target)),
    )
    return dict(class_index=int(c))


# ------------------------------------------------------------------------------------------------ how
def method_settings(prefix: str, lm: LoadedModel, per_layer_option: bool = False) -> dict:
    """The methods picker, then only the settings the picked methods read (their registry ``settings``): no
    baseline for Saliency alone, no steps without Integrated Gradients. Drawn outside the form, so the settings
    follow the picker at once. A hidden setting keeps its value (persist_state) for when it comes back.
    Returns AttributionConfig fields (``layer_steps`` too with ``per_layer_option``)."""
    blocked = AM.unavailable_methods(lm.model)  # checked on its modules, before any run, with the reason
    offered = [k for k in AM.METHODS if k not in blocked]
    picked = st.session_state.get(K(f"{prefix}.methods"), [])
    if any(m in blocked for m in picked):  # e.g. from a link made with another model
        st.session_state[K(f"{prefix}.methods")] = [m for m in picked if m not in blocked]
    # Their labels are in the session's language ("one"'s are bound to the URL, and bind sent them already).
    urlstate.relabel(K(f"{prefix}.{name}") for name in ("methods", "baseline", "removal"))
    methods = st.multiselect(
        t("attribution.methods"),
        offered,
        format_func=ra.option_labels(AM.METHODS, ra.method_label),
        key=K(f"{prefix}.methods"),
        help=ra.methods_help(offered),
    )
    for key_, why in blocked.items():
        st.caption(t("attribution.not_offered", method=ra.method_label(key_), why=explain(why)))
    reads = {s for m in methods for s in AM.METHODS[m].settings}
    per_layer = per_layer_option and bool(st.session_state.get(K("layers")))
    if per_layer:  # LayerIG integrates from the baseline, in batches
        reads |= {"baseline", "internal_batch_size"}
    cols = iter(st.columns(len(SETTINGS)))  # one width for every setting, however many are shown
    for name in (s for s in SETTINGS if s in reads):
        key = K(f"{prefix}.{WIDGET.get(name, name)}")
        col = next(cols)
        if name == "baseline":
            col.selectbox(
                t("attribution.baseline_pick"),
                list(AI.BASELINES),
                key=key,
                persist_state="session",
                format_func=ra.option_labels(AI.BASELINES, ra.baseline_label),
            )
        elif name == "n_steps":
            col.number_input(t("attribution.n_steps"), 2, 1000, key=key, persist_state="session")
        elif name == "internal_batch_size":
            col.number_input(
                t("attribution.ibs"), 1, 1000, key=key, help=t("attribution.ibs_help"), persist_state="session"
            )
        else:
            col.number_input(t("attribution.samples"), 10, 5000, key=key, persist_state="session")
    values = {name: st.session_state[K(f"{prefix}.{WIDGET.get(name, name)}")] for name in SETTINGS}
    out = dict(
        methods=tuple(methods),
        baseline=values["baseline"],
        n_steps=int(values["n_steps"]),
        internal_batch_size=int(values["internal_batch_size"]),
        n_samples=int(values["n_samples"]),
    )
    out.update(faithfulness_settings(prefix, lm))
    if per_layer_option:
        c1, c2 = st.columns([1, 3])
        c1.checkbox(t("attribution.layers"), key=K("layers"), help=t("attribution.layers_help"))
        if per_layer:
            c2.number_input(t("attribution.layer_steps"), 2, 300, key=K("layer_steps"), persist_state="session")
        out["layer_steps"] = int(st.session_state[K("layer_steps")]) if per_layer else 0
    return out


def faithfulness_settings(prefix: str, lm: LoadedModel) -> dict:
    """Whether to measure faithfulness, and how to remove a token (the model's default names its mask token)."""
    c1, c2 = st.columns([1, 3])
    on = c1.checkbox(t("faithfulness.measure"), key=K(f"{prefix}.faith"), help=t("faithfulness.measure_help"))
    default = FA.default_removal(lm.tokenizer)
    mask = lm.tokenizer.mask_token or ""
    name = {
        "default": t(
            "faithfulness.removal_option.default",
            mask=mask if default == "mask" else t("faithfulness.removal_option.delete"),
        ),
        "mask": t("faithfulness.removal_option.mask"),
        "delete": t("faithfulness.removal_option.delete"),
    }
    offered = REMOVALS if lm.tokenizer.mask_token_id is not None else ("default", "delete")
    if st.session_state.get(K(f"{prefix}.removal")) not in offered:
        st.session_state[K(f"{prefix}.removal")] = "default"
    if on:
        c2.selectbox(
            t("faithfulness.removal_pick"),
            offered,
            key=K(f"{prefix}.removal"),
            format_func=name.get,
            persist_state="session",
        )
    removal = st.session_state.get(K(f"{prefix}.removal"), "default")
    return dict(faithfulness=bool(on), removal="" if removal == "default" else removal)


# ------------------------------------------------------------------------------------------------ before a run
TIMINGS = K("estimate.timings")  # (spec, task, tokens, rows) -> ForwardTiming: measured once, kept for the session
TIMINGS_KEEP = 16  # at most this many per session; the oldest goes first


def _timing(lm: LoadedModel, cfg: AI.AttributionConfig) -> ForwardTiming:
    """The timed plain forwards an estimate reads (core.inspect.attribution_estimate.time_forward: one row and one batch of
    the run's rows, at most TIMING_ROWS, after a warm-up), measured once per model, input length and batch and kept
    in this session (TIMINGS_KEEP at most): the methods and their settings change the estimate, not the timing."""
    seq, rows = AE.timing_rows(lm, cfg)
    key = (lm.spec, lm.task, seq, rows)
    cache = st.session_state.setdefault(TIMINGS, {})
    if key not in cache:
        cache[key] = AE.time_forward(lm, cfg, rows)
        while len(cache) > TIMINGS_KEEP:
            cache.pop(next(iter(cache)))
    return cache[key]


def _duration(seconds: float) -> str:
    if seconds < 0.1:
        return t("attribution.estimate_under", seconds="0.1")
    if seconds < 90:
        return t("attribution.estimate_s", seconds=f"{seconds:.1f}" if seconds < 10 else f"{seconds:.0f}")
    return t("attribution.estimate_min", minutes=f"{seconds / 60:.0f}")


def show_estimate(
    where, lm: LoadedModel, cfg: AI.AttributionConfig | None, error: str | None = None, pressed: bool = False
) -> None:
    """Beside Explain: about how many forward passes the picked methods and settings make, and about how long that
    takes on this model (core.inspect.attribution_estimate.estimate). For inputs Explain would refuse, the reason
    instead of a time (``error``: why the settings themselves were refused; ``pressed``: Explain was just pressed,
    and the page's own error says why)."""
    if cfg is None:
        if error and not pressed:  # settings refused (an empty text): the reason, not a time (pressed: the page's
            where.caption(t("attribution.estimate_refused", why=error))  # error under the button says it)
        return
    why = attribution_refusal(
        lm, lm.spec, cfg
    )  # the check Explain runs first (one forward), once per model and settings
    if why is not None:  # an input the model refuses: say why instead of how long
        if not pressed:
            where.caption(t("attribution.estimate_refused", why=explain(why)))
        return
    try:
        est = AE.estimate(lm, cfg, _timing(lm, cfg))
    except (ValueError, RuntimeError) as e:
        if not pressed:
            where.caption(t("attribution.estimate_refused", why=explain(e)))
        return
    grad = t("attribution.estimate_grad", n_backward=f"{est.backwards:,}") if est.backwards else ""
    first = t("attribution.estimate_first") if est.first_run else ""
    where.caption(
        t("attribution.estimate", n=f"{est.forwards:,}", grad=grad, time=_duration(est.seconds)) + first,
        help=t("attribution.estimate_help", rows=min(est.batch, AE.TIMING_ROWS), factor=f"{BACKWARD_FACTOR:g}"),
    )

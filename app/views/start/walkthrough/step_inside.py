"""Step 7: looking inside the model just fine-tuned: its attention on a sentence (core.inspect.attention), and for a [CLS]
classifier (core.walkthrough.checks.is_cls_classifier) the integrated gradients of a class (core.inspect.attribution).
The model is step 6's run (either learning rate), one fine-tuned on any page, or the sidebar's."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, state, urlstate
from app.kit.i18n import explain, t
from app.kit.plot_text import plot_text, plot_texts
from app.kit.walkthrough_work import Flow, Load
from app.kit.zh_examples import chinese_examples
from app.views.start.walkthrough.common import K, Step, axis_labels, device, go_to, record, text_default
from core.inspect import attention as A
from core.inspect import attribution as AT
from core.inspect import attribution_inputs as ATI
from core.models.spec import ModelSpec
from core.registry import FAMILIES
from core.walkthrough.checks import is_cls_classifier

N = 7
SOURCES = ("step6", "step6_high", "session", "sidebar")  # session: fine-tuned on any page
RUNS = {"step6": "good", "step6_high": "high"}
ATTR_STEPS = (2, 200, 20)  # lo, hi, default of the attribution's steps
ATTR_METHOD = "lig"  # integrated gradients on the embeddings (core.inspect.attribution's method key)
SPECIALS = K("s7.specials")  # (cls, sep) of the model the heatmap last showed, for "try this" drawn after render()


def _spec() -> ModelSpec | None:
    runs = st.session_state.get(K("s6.runs")) or {}
    tuned = [m for m in state.session_models() if m.kind == "fine-tuned"]  # the Fine-tune page's too
    step6_done = (runs.get("good") or {}).get("result") is not None
    st.session_state.setdefault(K("s7.source"), "session" if tuned and not step6_done else "step6")
    source = st.radio(
        t("walkthrough.s7.source"),
        SOURCES,
        key=K("s7.source"),
        horizontal=True,
        format_func=lambda s: t(f"walkthrough.s7.src.{s}"),
    )
    if source == "session":
        if not tuned:
            st.info(t("walkthrough.s7.need_any"))
            st.button(t("walkthrough.s7.go_step6"), key=K("s7.go6"), on_click=go_to, args=(6,))
            return None
        labels = [m.label for m in tuned]
        if st.session_state.get(K("s7.tuned")) not in labels:
            st.session_state[K("s7.tuned")] = labels[-1]  # the newest
        pick = st.selectbox(t("walkthrough.s7.tuned"), labels, key=K("s7.tuned"))
        m = next(m for m in tuned if m.label == pick)
        return ModelSpec(m.family, m.path, device())
    if source in RUNS:
        run = runs.get(RUNS[source]) or {}
        if run.get("result") is None:
            if tuned:
                st.info(t("walkthrough.s7.step6_not_run_but_tuned", n=len(tuned)))
                st.button(t("walkthrough.s7.use_session"), key=K("s7.use_session"), on_click=_use_session)
            else:
                st.info(t("walkthrough.s7.need_step6"))
            st.button(t("walkthrough.s7.go_step6"), key=K("s7.go6"), on_click=go_to, args=(6,))
            return None
        return ModelSpec(run["family"], run["result"].model_dir, device())
    spec = state.current_spec()
    if spec is None:
        st.error(explain(st.session_state.get(state.SPEC_ERROR) or t("common.pick_model")))
    return spec


def _use_session() -> None:
    st.session_state[K("s7.source")] = "session"


def _clamp(key: str, valid, default) -> None:
    """A kept value that no longer fits this model (fewer layers, heads or classes) falls back to ``default``."""
    if st.session_state.get(key, default) not in valid:
        st.session_state[key] = default
    st.session_state.setdefault(key, default)


def render() -> Flow[None]:
    st.session_state.pop(SPECIALS, None)
    spec = _spec()
    if spec is None:
        return
    classifier = is_cls_classifier(spec.checkpoint)
    lm = yield Load(spec, "seqcls" if classifier else "base", attentions=True)
    if lm is None:
        return
    name = next((m.label for m in state.session_models() if m.path == spec.checkpoint), spec.checkpoint)
    st.caption(t("walkthrough.s7.model", id=name, family=lm.family.label))
    st.session_state[SPECIALS] = (lm.tokenizer.cls_token or "[CLS]", lm.tokenizer.sep_token or "[SEP]")
    text_default(K("s7.text"), "example.gloss", spec)  # a classifier fine-tuned on English glosses gets English
    text = st.text_input(text_label(spec, name), key=K("s7.text"))
    try:
        att = A.compute_attention(lm, A.AttentionConfig(text, capture_qk=False))
    except ValueError as e:
        st.error(explain(e))
        return
    n_layers, n_heads = att.n_layers, att.n_heads
    _clamp(K("s7.layer"), range(1, n_layers + 1), n_layers)
    _clamp(K("s7.head"), range(-1, n_heads), -1)
    urlstate.relabel((K("s7.head"),))  # "mean of the heads" is in the session's language
    with presenter.settings():
        c1, c2 = st.columns(2)
        layer = c1.slider(t("walkthrough.s7.layer"), 1, n_layers, key=K("s7.layer")) if n_layers > 1 else 1
        head = c2.selectbox(
            t("walkthrough.s7.head"),
            list(range(-1, n_heads)),
            key=K("s7.head"),
            format_func=lambda h: t("walkthrough.s7.mean_heads") if h < 0 else str(h + 1),
        )
    z = att.attentions[layer - 1].astype(np.float32)  # (heads, seq, seq)
    z = z.mean(0) if head < 0 else z[head]
    labels = axis_labels(att.tokens)
    heat = go.Figure(
        go.Heatmap(
            z=z,
            x=labels,
            y=labels,
            colorscale="Blues",
            zmin=0,
            hovertemplate=t("walkthrough.s7.hover") + "<extra></extra>",
        )
    )
    which = t("walkthrough.s7.mean_heads") if head < 0 else str(head + 1)
    title = (
        t("walkthrough.s7.zh_heat_title_mean", layer=layer)
        if head < 0
        else t("walkthrough.s7.heat_title", layer=layer, head=which)
    )
    heat.update_layout(
        title=title,
        height=460,
        yaxis=dict(autorange="reversed"),
        margin=dict(t=40, b=10),
        xaxis_title=t("walkthrough.s7.keys"),
        yaxis_title=t("walkthrough.s7.queries"),
    )
    st.plotly_chart(presenter.scale(heat), key=K("s7.heat"), width="stretch")
    figs, rows = [heat], []
    if not classifier:
        st.info(t("walkthrough.s7.not_classifier"))
    else:
        figs, rows = _attributions(lm, text, figs)
    record(
        N,
        {
            t("walkthrough.in.model"): spec.checkpoint,
            text_label(spec, name): text,
            t("walkthrough.s7.layer"): layer,
            t("walkthrough.s7.head"): which,
        },
        rows=rows,
        figures=figs,
        same=(spec.checkpoint, text),
    )


def text_label(spec: ModelSpec, name: str) -> str:
    """The text box's label: a short English definition for the WordNet classifiers, any Chinese text for a
    model that reads Chinese in 中文."""
    if chinese_examples(spec):
        return t("walkthrough.s7.zh_text_zh", id=name)
    return t("walkthrough.s7.text")


def hint() -> str:
    """ "Try this": in 中文 with a sidebar model that reads Chinese (the Layer lens and Corpus search use it), the
    special tokens of the models it names and a Chinese word of the Chinese corpus to click."""
    spec = state.current_spec()
    if spec is None or not chinese_examples(spec):
        return t("walkthrough.s7.try")
    family = FAMILIES.get(spec.family)
    specials = family.specials if family is not None else {}
    shown = st.session_state.get(SPECIALS)  # the heatmap's model (step 6's run, say), else the sidebar's
    cls, sep = shown or (specials.get("cls_token", "[CLS]"), specials.get("sep_token", "[SEP]"))
    mask = family.mask_token if family is not None else "[MASK]"
    return t(
        "walkthrough.s7.zh_try",
        cls=cls,
        sep=sep,
        mask=mask,
        word=t("walkthrough.s7.zh_word"),
        sense=t("walkthrough.s7.zh_word_sense"),
    )


def quiz(part: str) -> str:
    """The check question naming the separator of the model the heatmap last showed ([SEP], </s>)."""
    if part == "q":
        shown = st.session_state.get(SPECIALS)
        return t("walkthrough.s7.zh_q", sep=shown[1] if shown else "[SEP]")
    return t(f"walkthrough.s7.{part}")


def _attributions(lm, text: str, figs: list) -> tuple[list, list]:
    try:
        probs = ATI.prepare(lm, ATI.AttributionConfig(target="class", text=text)).candidates  # ((class, p), ...)
    except ValueError as e:
        st.error(explain(e))
        return figs, []
    names = [n for n, _ in probs]
    pred = int(np.argmax([p for _, p in probs]))
    st.markdown(t("walkthrough.s7.prediction", label=names[pred], prob=f"{probs[pred][1]:.1%}"))
    _clamp(K("s7.class"), range(len(names)), pred)
    st.session_state.setdefault(K("s7.n_steps"), ATTR_STEPS[2])
    c1, c2 = st.columns([2, 1])
    cls = c1.selectbox(
        t("walkthrough.s7.class"), list(range(len(names))), key=K("s7.class"), format_func=lambda i: names[i]
    )
    with c2, presenter.settings():
        n_steps = st.number_input(t("walkthrough.s7.n_steps"), ATTR_STEPS[0], ATTR_STEPS[1], key=K("s7.n_steps"))
    key = (lm.spec.checkpoint, text, int(cls), int(n_steps))
    if st.button(t("walkthrough.s7.run_attr"), key=K("s7.run"), type="primary", icon=":material/insights:"):
        with st.spinner(t("walkthrough.s7.explaining")):
            try:
                res = AT.attribute(
                    lm,
                    ATI.AttributionConfig(
                        target="class",
                        text=text,
                        class_index=int(cls),
                        methods=(ATTR_METHOD,),
                        n_steps=int(n_steps),
                        internal_batch_size=int(n_steps),
                        faithfulness=False,  # this step shows the map only
                    ),
                )
                st.session_state[K("s7.result")] = (key, res)
            except ValueError as e:
                st.error(explain(e))
    held = st.session_state.get(K("s7.result"))
    if held is None or held[0] != key:
        st.caption(t("walkthrough.s7.not_yet"))
        return figs, []
    res = held[1]
    scores = res.methods[0].scores
    labels = axis_labels(res.tokens)
    bars = go.Figure(
        go.Bar(
            x=labels,
            y=scores,
            marker_color=["#54A24B" if s >= 0 else "#E45756" for s in scores],
            customdata=plot_texts(res.tokens),  # the raw piece
            hovertemplate="%{x} (%{customdata}): %{y:+.4f}<extra></extra>",
        )
    )
    bars.update_layout(
        title=t("walkthrough.s7.bars_title", label=plot_text(names[int(cls)])),
        height=340,
        yaxis_title=t("walkthrough.s7.attr_y"),
        margin=dict(t=40, b=10),
    )
    st.plotly_chart(presenter.scale(bars), key=K("s7.bars"), width="stretch")
    if res.delta_warning:
        st.warning(explain(res.delta_warning))
    rows = [
        {t("walkthrough.s1.col.token"): tok, t("walkthrough.s7.attr_y"): round(float(s), 4)}
        for tok, s in zip(res.tokens, scores)
    ]
    return figs + [bars], rows


STEP = Step(
    N,
    render,
    correct=1,
    hint=hint,
    quiz=quiz,
    links=("attention", "attribution", "lens", "corpus-search"),
    deep_links=(
        ("attention", "walkthrough.s7.link_value_zeroing", {"attention.tab": "mixing", "attention.vz": "1"}),
        ("attribution", "walkthrough.s7.link_patching", {"attribution.tab": "patch"}),
        ("features", "walkthrough.s7.link_features", {}),
    ),
    fields=(urlstate.Field(K("s7.source"), choices=SOURCES), urlstate.Field(K("s7.text"), max_len=500)),
    keep=(K("s7.source"), K("s7.tuned"), K("s7.text"), K("s7.layer"), K("s7.head"), K("s7.class"), K("s7.n_steps")),
)

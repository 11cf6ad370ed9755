"""Switch attention heads off and see the prediction change; rank heads by importance (core.inspect.ablation,
core.inspect.head_importance).

One component, ``heads_panel``, draws the layer x head grid (one row of pills per layer: a click toggles a
head), a text box for "L3H7, L5*", the mode (zero / mean), and the before/after of whatever prediction the page
passes in. The pages call one function each: ``attention_heads`` (the Attention tab), ``fill_mask_heads``,
``pair_heads`` and ``classify_heads`` (Fine-tune's "try it"). ``importance_tab`` draws the options of
core.inspect.head_importance and returns what to run (the page starts it as a background job); ``importance_jobs``
draws the job and its heatmaps and pruning curve. The page loads every model: a view never loads or starts work.

Why pills and not a clickable plotly heatmap: a plotly selection event arrives only after a rerun that has
already drawn the figure, and AppTest cannot click a plotly point; ``st.pills`` toggles reliably in the browser
and in AppTest, and its state is plain session state the text box can write.

Heads are 0-based in text and code ("L3H7": layer 3, head 7, counting from 0 as the other Attention tabs do). A result is shown
only while it was made from the current model, input, heads and mode (app/kit/render.current_result, job_for).
Every label comes from assets/i18n/ablation.toml.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, report, state, urlstate
from app.kit.i18n import explain, t
from app.kit.jobs_panel import job_section
from app.kit.plot_text import plot_text
from app.kit.render import as_text, current_result, run_or_error
from core.base.messages import carry
from core.inspect.ablation import MODES, AblationConfig, AblationError, format_heads, parse_heads
from core.inspect.ablation_predict import AblatedPrediction, ablate_classify, ablate_fill_mask, ablate_pair
from core.inspect.head_importance import exhaustive_seconds, pruning_passes, pruning_seconds
from core.models.spec import LoadedModel, ModelSpec
from core.predict.fill_mask import FillMaskConfig, check_mlm, configs_from_lines, count_masks
from core.predict.sentence_pair import PairConfig, check_pair, pair_head
from core.registry import ModelLoadError, attention_layers

MAX_LABEL = 24  # characters of a label on a chart axis
IMPORTANCE_TEXTS = (
    16,
    64,
    256,
)  # held-out sentences the importance job may use (64: core.inspect.head_importance's default)


def _safe(text: str) -> str:
    """Model or user text for a plotly label: markup characters as entities (they show as typed)."""
    text = text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"
    return plot_text(text)


def model_shape(model) -> tuple[int, int]:
    """(layers, heads) of an encoder: every depth the attention runs at (a shared layer counts once per depth)."""
    cfg = getattr(model, "base_model", model).config
    heads = getattr(cfg, "num_attention_heads", None) or cfg.n_heads
    return len(attention_layers(model)), int(heads)


# ---------------------------------------------------------------------------------------------- the picker
def _keys(scope: str) -> dict[str, str]:
    return {name: state.key(scope, f"ab.{name}") for name in ("spec", "mode", "error", "result", "form")}


def _layer_key(scope: str, layer: int) -> str:
    return state.key(scope, f"ab.L{layer}")


def current_heads(scope: str, n_layers: int, n_heads: int) -> tuple[tuple[int, int], ...]:
    """The heads switched off in the grid of ``scope`` (0-based, sorted)."""
    out = []
    for layer in range(n_layers):
        for h in st.session_state.get(_layer_key(scope, layer)) or ():
            if 0 <= int(h) < n_heads:
                out.append((layer, int(h)))
    return tuple(sorted(out))


def _set_heads(scope: str, n_layers: int, n_heads: int, heads) -> None:
    """Write ``heads`` into the grid's pills and the text box (call from a callback, before they are drawn)."""
    for layer in range(n_layers):
        st.session_state[_layer_key(scope, layer)] = sorted(h for la, h in heads if la == layer)
    st.session_state[_keys(scope)["spec"]] = format_heads(heads, n_heads)


def _from_grid(scope: str, n_layers: int, n_heads: int) -> None:
    """A pill was clicked: the text box follows the grid."""
    k = _keys(scope)
    st.session_state[k["spec"]] = format_heads(current_heads(scope, n_layers, n_heads), n_heads)
    st.session_state.pop(k["error"], None)


def _from_text(scope: str, n_layers: int, n_heads: int) -> None:
    """Apply was pressed: the grid follows the text box, or the text's problem is kept to be shown."""
    k = _keys(scope)
    try:
        heads = parse_heads(st.session_state.get(k["spec"], ""), n_layers, n_heads)
    except AblationError as e:
        st.session_state[k["error"]] = carry(e)
        return
    st.session_state.pop(k["error"], None)
    _set_heads(scope, n_layers, n_heads, heads)


def _clear(scope: str, n_layers: int, n_heads: int) -> None:
    st.session_state.pop(_keys(scope)["error"], None)
    _set_heads(scope, n_layers, n_heads, ())


def head_picker(scope: str, n_layers: int, n_heads: int) -> AblationConfig:
    """The grid, the text box and the mode; returns what is switched off now."""
    k = _keys(scope)
    for layer in range(n_layers):  # a smaller model than the last one: drop heads it does not have
        kept = [h for h in st.session_state.get(_layer_key(scope, layer)) or () if 0 <= int(h) < n_heads]
        if _layer_key(scope, layer) in st.session_state and kept != st.session_state[_layer_key(scope, layer)]:
            st.session_state[_layer_key(scope, layer)] = kept
    st.session_state.setdefault(k["spec"], format_heads(current_heads(scope, n_layers, n_heads), n_heads))
    st.session_state.setdefault(k["mode"], MODES[0])
    urlstate.relabel((k["mode"],))  # its labels are in the session's language
    args = (scope, n_layers, n_heads)
    with st.form(k["form"], border=False):
        c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
        c1.text_input(
            t("ablation.spec"),
            key=k["spec"],
            placeholder=t("ablation.spec_placeholder"),
            help=t("ablation.spec_help", layers=n_layers, heads=n_heads),
        )
        c2.form_submit_button(t("ablation.apply"), on_click=_from_text, args=args, type="primary")
    if st.session_state.get(k["error"]):
        st.error(explain(st.session_state[k["error"]]))
    st.caption(t("ablation.grid_caption"))
    with st.container(height=min(44 * n_layers + 20, 480), border=False):
        for layer in range(n_layers):
            c1, c2 = st.columns([1, 14], vertical_alignment="center")
            c1.markdown(f"**L{layer}**")  # i18n: ok (a layer number)
            c2.pills(
                t("ablation.layer_label", layer=layer),
                list(range(n_heads)),
                selection_mode="multi",
                format_func=_head_label,
                key=_layer_key(scope, layer),
                on_change=_from_grid,
                args=args,
                label_visibility="collapsed",
            )
    c1, c2 = st.columns([3, 1], vertical_alignment="center")
    mode = c1.segmented_control(
        t("ablation.mode"),
        list(MODES),
        key=k["mode"],
        required=True,
        format_func=_mode_labels(),
        help=t("ablation.mode_help"),
    )
    c2.button(t("ablation.clear"), key=state.key(scope, "ab.clear"), on_click=_clear, args=args)
    return AblationConfig(current_heads(scope, n_layers, n_heads), mode or MODES[0])


def _head_label(h: int) -> str:
    return f"H{h}"  # i18n: ok (a head number)


def _mode_labels() -> Callable[[str], str]:
    """A format_func whose labels are fixed now, in this run's language (AppTest formats options again after
    the run, where the session's language can no longer be read)."""
    table = {m: t(f"ablation.mode_opt.{m}") for m in MODES}
    return lambda m: table.get(m, str(m))


# ---------------------------------------------------------------------------------------------- before / after
def before_after_figure(p: AblatedPrediction) -> go.Figure:
    """Grouped bars: each compared label's probability with every head on, and with the chosen heads off."""
    labels = [_safe(x) for x in p.labels]
    x = list(range(len(labels)))  # by position: two pieces that read the same ("Ġthe", "the") stay two groups
    fig = go.Figure()
    fig.add_bar(
        name=t("ablation.before"),
        x=x,
        y=[v * 100 for v in p.before],
        marker_color="#4C78A8",
        text=[_pct(v) for v in p.before],
        textposition="outside",
        hovertext=labels,
    )
    fig.add_bar(
        name=t("ablation.after"),
        x=x,
        y=[v * 100 for v in p.after],
        marker_color="#E45756",
        text=[_pct(v) for v in p.after],
        textposition="outside",
        hovertext=labels,
    )
    fig.update_xaxes(tickvals=x, ticktext=labels)
    top = max([*p.before, *p.after, 1e-9])
    fig.update_layout(
        barmode="group",
        height=340,
        margin=dict(t=60, b=10, l=10, r=10),
        yaxis=dict(
            title=t("ablation.prob"), ticksuffix="%", tickformat="~g", range=[0, min(100.0, top * 130)]
        ),  # percent: a tiny model's 0.005% stays legible
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
        title=t("ablation.fig_title"),
    )
    return fig


def _pct(p: float) -> str:
    """A probability in percent: one decimal, or two significant digits below 0.1% (a tiny model's answers)."""
    return f"{p:.1%}" if p >= 0.001 or p == 0 else f"{p * 100:.2g}%"


def _points(d: float) -> str:
    """A change in probability in percentage points, signed; small changes keep two decimals (never "-0.0")."""
    pts = d * 100
    return f"{pts:+.1f}" if abs(pts) >= 0.1 else f"{pts:+.2f}" if abs(pts) >= 0.005 else f"{pts:+.0e}"


def show_prediction(p: AblatedPrediction, n_heads: int, key: str) -> None:
    """The answer's probability before -> after, whether the top answer changed, and the bars."""
    i = p.labels.index(p.answer_before) if p.answer_before in p.labels else 0
    c1, c2 = st.columns(2)
    c1.metric(
        t("ablation.answer_prob", answer=as_text(p.answer_before)),
        _pct(p.after[i]),
        delta=t("ablation.delta", delta=_points(p.delta), before=_pct(p.before[i])),
        help=t("ablation.answer_help"),
    )
    if p.answer_after == p.answer_before:
        c2.metric(
            t("ablation.top_after"),
            as_text(p.answer_after),
            delta=t("ablation.same"),
            delta_color="off",
            delta_arrow="off",
        )
    else:
        c2.metric(
            t("ablation.top_after"),
            as_text(p.answer_after),
            delta=t("ablation.changed", before=as_text(p.answer_before)),
            delta_color="inverse",
            delta_arrow="off",
        )
    fig = before_after_figure(p)
    st.plotly_chart(presenter.scale(fig), width="stretch", key=key + ".fig")
    if p.after_top:
        st.caption(t("ablation.after_top", top=as_text(", ".join(f"{w} {_pct(q)}" for w, q in p.after_top))))
    st.caption(
        t("ablation.heads_off", heads=format_heads(p.heads, n_heads), n=len(p.heads), mode=_mode_labels()(p.mode))
    )
    report.record_view(
        "ablation",
        t("report.page.ablation"),
        t("report.ablation_title", before=p.answer_before, after=p.answer_after),
        {t("report.in.heads"): format_heads(p.heads, n_heads), t("report.in.mode"): _mode_labels()(p.mode)},
        (key, p.kind, p.heads, p.mode, p.labels, p.before, p.after),
        figures=[fig],
        rows=[
            {t("report.col.label"): x, t("report.col.before"): _pct(b), t("report.col.after"): _pct(a)}
            for x, b, a in zip(p.labels, p.before, p.after)
        ],
    )


def heads_panel(
    scope: str, n_layers: int, n_heads: int, compute: Callable[[AblationConfig], AblatedPrediction], made_from: Any
) -> AblatedPrediction | None:
    """Picker + the recomputed prediction. ``compute(cfg)`` runs core (ablate_*); ``made_from`` names what the
    prediction is of (model, input): a result is shown only for the current ``made_from``, heads and mode."""
    cfg = head_picker(scope, n_layers, n_heads)
    if not cfg.heads:
        st.info(t("ablation.pick_some"))
        return None
    asked = (made_from, cfg)
    rkey = _keys(scope)["result"]
    res = current_result(rkey, asked)
    if res is None:
        with st.spinner(t("ablation.running", n=len(cfg.heads))):
            res = run_or_error(rkey, lambda: compute(cfg), made_from=asked)
    if res is not None:
        show_prediction(res, n_heads, key=state.key(scope, "ab"))
    return res


# ---------------------------------------------------------------------------------------------- the pages
def attention_heads(lm, config, load_task: Callable[[str], LoadedModel]) -> None:
    """The Attention page's "Switch off heads" tab: fill-mask when the text has a mask, else NSP/SOP for a pair
    when the family has that head, else what could be recomputed and how. ``lm`` is the page's model (no task
    head); ``load_task(task)`` is the page's loader of the same checkpoint's "mlm" or "pretraining" model, called
    only when a prediction is recomputed (the tabs all run on every rerun; most visits never open this one), inside
    the recompute, so a model that cannot load says why where the result would be."""
    st.caption(t("ablation.intro"))
    head = pair_head(lm.spec.family)
    if count_masks(config.text):
        kind, task = "fill_mask", "mlm"
        if config.pair:
            st.info(t("ablation.mask_in_a"))
        make = lambda: FillMaskConfig(config.text, top_k=5)  # noqa: E731
        st.markdown(t("ablation.what_fill"))
    elif config.pair and head.kind:
        kind, task = "pair", "pretraining"
        make = lambda: PairConfig(config.text, config.text_b)  # noqa: E731
        st.markdown(t("ablation.what_pair", head=head.kind.upper()))
    elif config.pair and count_masks(config.text_b):  # the masks are in B, which the fill-mask does not read
        st.info(t("ablation.mask_in_b"))
        return
    else:
        st.info(t("ablation.nothing_pair", head=head.kind.upper()) if head.kind else t("ablation.nothing"))
        return
    try:
        cfg = make()
    except ValueError as e:  # a text over the page's limit
        st.error(explain(e))
        return
    st.caption(t("ablation.numbering"))
    n_layers, n_heads = model_shape(lm.model)  # the same checkpoint: the task model has the same heads
    heads_panel(
        "attention",
        n_layers,
        n_heads,
        lambda ab: _ablate(kind, load_task(task), cfg, ab),
        made_from=(kind, lm.spec, cfg),
    )


def _ablate(kind: str, lm, cfg, ab: AblationConfig) -> AblatedPrediction:
    """Recompute with the heads off; raises ValueError (ModelLoadError, FillMaskError, PairError, AblationError)
    with a message for the page (run_or_error shows it)."""
    (check_mlm if kind == "fill_mask" else check_pair)(lm)  # the checkpoint may lack that head
    fn = {"fill_mask": ablate_fill_mask, "pair": ablate_pair}[kind]
    return fn(lm, cfg, ab)


def fill_mask_heads(lm, text: str, top_k: int, strategy: str, per_line: bool = False) -> None:
    """Under a Fill-mask result: an expander that recomputes it with heads off (the first line when per line)."""
    with st.expander(t("ablation.expander")):
        try:
            cfg = (
                configs_from_lines(text, top_k, strategy)[0]
                if per_line
                else FillMaskConfig(text, top_k=top_k, strategy=strategy)
            )
        except ValueError as e:
            st.error(explain(e))
            return
        if per_line:
            st.caption(t("ablation.first_line", text=as_text(cfg.text)))
        n_layers, n_heads = model_shape(lm.model)
        heads_panel(
            "fill_mask", n_layers, n_heads, lambda ab: _ablate("fill_mask", lm, cfg, ab), made_from=(lm.spec, cfg)
        )


def pair_heads(lm, a: str, b: str, seed: int = 0) -> None:
    """Under a Sentence-pair result: the same for the NSP/SOP probability of (A, B)."""
    with st.expander(t("ablation.expander")):
        try:
            cfg = PairConfig(a, b, seed=seed)
        except ValueError as e:
            st.error(explain(e))
            return
        n_layers, n_heads = model_shape(lm.model)
        heads_panel(
            "sentence_pair", n_layers, n_heads, lambda ab: _ablate("pair", lm, cfg, ab), made_from=(lm.spec, cfg)
        )


def classify_heads(load_fm: Callable[[], Any], text: str, scope: str, made_from: Any) -> None:
    """Under Fine-tune's "try it": the classifier's class probabilities with heads off. ``load_fm()`` returns the
    core.predict.classify.FinetunedModel (cached); ``made_from`` names the run, so another run's result never shows."""
    with st.expander(t("ablation.expander")):
        try:
            fm = load_fm()
        except ModelLoadError as e:
            st.error(explain(e))
            return
        n_layers, n_heads = model_shape(fm.model)
        heads_panel(
            scope, n_layers, n_heads, lambda ab: ablate_classify(fm, text, None, ab), made_from=(made_from, text)
        )


# ---------------------------------------------------------------------------------------------- importance
def importance_heatmap(z: np.ndarray, title: str, colorscale: str = "Viridis") -> go.Figure:
    """(layers, heads) scores as a heatmap with 0-based L/H ticks."""
    n_layers, n_heads = z.shape
    fig = go.Figure(
        go.Heatmap(
            z=np.round(np.asarray(z, dtype=float), 5),
            x=[f"H{h}" for h in range(n_heads)],
            y=[f"L{la}" for la in range(n_layers)],
            colorscale=colorscale,
            hovertemplate=t("ablation.imp.hover"),
        )
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=title, height=max(300, 28 * n_layers + 140), margin=dict(t=70, l=10, r=10, b=10))
    return fig


def pruning_figure(r) -> go.Figure:
    """The metric as heads are removed: least-important first against random order."""
    x = [f * 100 for f in r.pruning_fraction]
    fig = go.Figure()
    fig.add_scatter(x=x, y=list(r.pruning_importance), mode="lines+markers", name=t("ablation.imp.order_importance"))
    fig.add_scatter(
        x=x, y=list(r.pruning_random), mode="lines+markers", name=t("ablation.imp.order_random"), line=dict(dash="dash")
    )
    fig.update_layout(
        title=t("ablation.imp.pruning_title", metric=r.metric),
        height=360,
        xaxis_title=t("ablation.imp.removed"),
        yaxis_title=r.metric,
        margin=dict(t=60, l=10, r=10, b=10),
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


def show_importance(r, key: str) -> None:
    """Gradient importance and exhaustive ablation side by side (their Spearman correlation in the title), then
    the pruning curve."""
    st.caption(t("ablation.imp.quote"))
    if r.seconds_exhaustive is None:
        st.caption(
            t("ablation.imp.summary", id=r.checkpoint, n=r.n_texts, seconds_gradient=f"{r.seconds_gradient:,.1f}")
        )
    else:
        st.caption(
            t(
                "ablation.imp.summary_ex",
                id=r.checkpoint,
                n=r.n_texts,
                seconds_gradient=f"{r.seconds_gradient:,.1f}",
                seconds_exhaustive=f"{r.seconds_exhaustive:,.1f}",
                ratio=f"{r.seconds_exhaustive / max(r.seconds_gradient, 1e-9):,.0f}",
            )
        )
    c1, c2 = st.columns(2)
    figs = [importance_heatmap(r.scores, t("ablation.imp.gradient_title"))]
    with c1:
        st.plotly_chart(presenter.scale(figs[0]), width="stretch", key=key + ".grad")
    with c2:
        if r.exhaustive is not None:
            rho = "—" if r.spearman is None else f"{r.spearman:.2f}"
            figs.append(importance_heatmap(r.exhaustive, t("ablation.imp.exhaustive_title", rho=rho), "Magma"))
            st.plotly_chart(presenter.scale(figs[-1]), width="stretch", key=key + ".exh")
        else:
            st.info(t("ablation.imp.no_exhaustive"))
    if r.pruning_fraction:
        figs.append(pruning_figure(r))
        st.plotly_chart(presenter.scale(figs[-1]), width="stretch", key=key + ".prune")
        st.caption(t("ablation.imp.pruning_caption", metric=r.metric))
    report.record_view(
        "importance",
        t("report.page.importance"),
        t("report.importance_title", id=r.checkpoint),
        {t("report.in.model"): r.checkpoint, t("report.in.texts"): r.n_texts, t("report.in.metric"): r.metric},
        key,
        figures=figs,
    )


IMPORTANCE_JOBS = state.key("attention", "imp.jobs")  # the session's head-importance jobs


@dataclass(frozen=True)
class ImportanceAsk:
    """What the head-importance tab asks for: the model and the options; ``go``: Start was pressed in this run
    (the page starts the job, core.inspect.head_importance.importance_job)."""

    spec: ModelSpec
    exhaustive: bool
    n_texts: int
    pruning: bool
    go: bool = False

    @property
    def asked(self) -> tuple:
        """What a shown job must have been made from (app/kit/jobs_panel.job_section)."""
        return (self.spec, self.exhaustive, self.n_texts, self.pruning)


def importance_tab(spec, model=None, device: str = "cpu") -> ImportanceAsk:
    """The Attention page's "Head importance" tab: its options and the button that asks to start
    core.inspect.head_importance as a background job (the page starts it; importance_jobs draws the job made from
    this model and these options). The fast gradient ranking is the default; the exhaustive check is opt-in, with
    its estimated time (``model``: the page's model, for its shape; ``device``: where it runs) under its checkbox."""
    scope = "attention"
    st.caption(t("ablation.imp.intro"))
    ex_key, n_key = state.key(scope, "imp.exhaustive"), state.key(scope, "imp.n_texts")
    pr_key = state.key(scope, "imp.pruning")
    st.session_state.setdefault(ex_key, False)  # the gradient ranking alone: one backward pass, seconds
    st.session_state.setdefault(pr_key, False)  # the pruning curves: 31 more passes, most of a default run's time
    st.session_state.setdefault(n_key, IMPORTANCE_TEXTS[1])
    c1, c2, c3 = st.columns([3, 1, 1], vertical_alignment="center")
    exhaustive = c1.checkbox(t("ablation.imp.exhaustive"), key=ex_key, help=t("ablation.imp.exhaustive_help"))
    ex_note = c1.empty()  # its estimate, under it
    pruning = c1.checkbox(t("ablation.imp.pruning"), key=pr_key, help=t("ablation.imp.pruning_help"))
    n_texts = c2.selectbox(t("ablation.imp.n_texts"), IMPORTANCE_TEXTS, key=n_key, help=t("ablation.imp.n_texts_help"))
    try:  # a model whose heads cannot be located (the generic family): no estimate; the job says why
        n_layers, n_heads = model_shape(model) if model is not None else (0, 0)
    except ModelLoadError:
        n_layers = n_heads = 0
    if n_layers:
        cfg = getattr(model, "base_model", model).config
        hidden = int(getattr(cfg, "hidden_size", None) or getattr(cfg, "dim", 0) or 768)
        est = exhaustive_seconds(n_layers, n_heads, hidden, int(n_texts), device)
        ex_note.caption(
            t(
                "ablation.imp.exhaustive_estimate",
                seconds=f"{max(1, round(est)):,}",
                n=n_layers * n_heads,
                texts=int(n_texts),
            )
        )
        est_p = pruning_seconds(n_layers, n_heads, hidden, int(n_texts), device)
        c1.caption(
            t(
                "ablation.imp.pruning_estimate",
                seconds=f"{max(1, round(est_p)):,}",
                n=pruning_passes(n_layers * n_heads),
                texts=int(n_texts),
            )
        )
    go = c3.button(t("ablation.imp.go"), key=state.key(scope, "imp.go"), type="primary")
    return ImportanceAsk(spec, bool(exhaustive), int(n_texts), bool(pruning), go=bool(go))


def importance_jobs(ask: ImportanceAsk) -> None:
    """The head-importance job made from ``ask`` (its progress, then its views), if this session started one."""
    job_section(
        IMPORTANCE_JOBS,
        ask.asked,
        lambda j: show_importance(j.result, key=state.key("attention", f"imp.{j.id}")),
        key=state.key("attention", "imp"),
    )

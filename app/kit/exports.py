"""The app's downloads, built in one place: the attributions' CSV and standalone HTML (and the coloured-token HTML
the Attributions page shows), the attention's .npz, the probes' CSV. Core returns results; turning them into files
for a person is the app's job.

A figure as a PNG file (``figure_png``) is drawn the way the session report draws its figures (app.kit.report:
kaleido, a CJK face for Chinese labels, axes that make room for their labels).

The attribution palette (diverging: red pushes the explained score down, green up) lives here too, and the
Attributions page's charts take it from here, so the page and its exports always agree.

Every download button of these files is app.kit.download_button.download: its file is made when clicked.
"""

from __future__ import annotations

import csv
import html
import io

import numpy as np
import plotly.graph_objects as go

from app.kit.i18n import explain, lang, t
from app.kit.report import figure_pngs
from core.inspect.attention import AttentionResult
from core.inspect.attribution import BatchResult
from core.represent.probes import ProbeResult

POSITIVE, NEUTRAL, NEGATIVE = "#1a9850", "#ffffff", "#d73027"  # attribution palette: up, zero, down
DIVERGING = [[0.0, NEGATIVE], [0.5, NEUTRAL], [1.0, POSITIVE]]  # the same as a plotly colour scale


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


# ---------------------------------------------------------------------------------------------- attributions
def color(value: float, scale: float) -> str:
    """Diverging colour: red for negative, white at 0, green for positive, saturating at |scale|."""
    v = 0.0 if scale <= 0 else max(-1.0, min(1.0, value / scale))
    if v >= 0:
        r, g, b = (int(255 - v * (255 - c)) for c in _rgb(POSITIVE))
    else:
        r, g, b = (int(255 + v * (255 - c)) for c in _rgb(NEGATIVE))
    return f"#{r:02x}{g:02x}{b:02x}"


def batch_to_csv(batch: BatchResult) -> str:
    """Long format: row, text, target, method, token_index, token, special, score (errors as rows too)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["row", "text", "target", "method", "token_index", "token", "special", "score", "error"])
    for i, (row, res, err) in enumerate(zip(batch.rows, batch.results, batch.errors), start=1):
        if res is None:
            w.writerow([i, row.text, "", "", "", "", "", "", explain(err) if err else ""])
            continue
        for m in res.methods:
            for j, (tok, sp, s) in enumerate(zip(res.tokens, res.special, m.scores)):
                w.writerow([i, row.text, explain(res.target_label), m.method, j, tok, int(sp), f"{s:.6g}", ""])
    return buf.getvalue()


def faithfulness_csv(batch: BatchResult) -> str:
    """Long format, one line per input, ranking and level: row, text, method, ranking (the method's own, reversed,
    or random: the mean of its seeds), level, tokens removed, comprehensiveness, sufficiency, p(x), removal."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(
        ["row", "text", "method", "ranking", "level", "tokens", "comprehensiveness", "sufficiency", "p_x", "removal"]
    )
    for i, (row, res) in enumerate(zip(batch.rows, batch.results), start=1):
        f = None if res is None else res.faithfulness
        if f is None:
            continue
        rankings = [(c.key, "own", c) for c in f.methods] + [(c.key, "reversed", c) for c in f.reversed]
        for method, kind, c in rankings + [("", "random", f.random)]:
            for level, k, comp, suff in zip(f.levels, f.ks, c.comp, c.suff):
                w.writerow(
                    [i, row.text, method, kind, level, k, f"{comp:.6g}", f"{suff:.6g}", f"{f.p_x:.6g}", f.removal]
                )
    return buf.getvalue()


def tokens_html(tokens: tuple[str, ...], scores: np.ndarray, special: np.ndarray | None = None) -> str:
    """Tokens as escaped <span>s coloured by score (diverging), with the score as a tooltip."""
    scale = float(np.max(np.abs(scores))) if len(scores) else 0.0
    spans = []
    for i, (piece, s) in enumerate(zip(tokens, scores)):
        sp = special is not None and bool(special[i])
        style = f"background:{color(float(s), scale)};padding:2px 3px;margin:1px;border-radius:3px;" + (
            "opacity:.55;font-style:italic;" if sp else ""
        )
        spans.append(
            f'<span class="attr-tok" style="{style}" title="{html.escape(f"{s:+.4f}")}">{html.escape(piece)}</span>'
        )
    return '<div class="attr-line" style="line-height:2;font-family:monospace">' + " ".join(spans) + "</div>"


def batch_to_html(batch: BatchResult) -> str:
    """A standalone HTML page (no scripts, no external resources) of every row's coloured tokens."""
    parts = [  # in the session's language, like the page it comes from
        f"<!doctype html><html lang='{lang()}'><head><meta charset='utf-8'>",
        f"<title>{html.escape(t('attribution.export.title'))}</title>",
        "<style>body{font-family:sans-serif;margin:2em}h3{margin-bottom:.2em}.m{color:#555;font-size:.9em}"
        f".err{{color:#b00}}</style></head><body><h1>{html.escape(t('attribution.export.heading'))}</h1>",
        f"<p class='m'>{html.escape(t('attribution.colours'))}</p>",
    ]
    for i, (row, res, err) in enumerate(zip(batch.rows, batch.results, batch.errors), start=1):
        parts.append(f"<h3>{i}. {html.escape(row.text)}</h3>")
        if res is None:
            parts.append(f"<p class='err'>{html.escape(explain(err) if err else '')}</p>")
            continue
        parts.append(f"<p class='m'>{html.escape(explain(res.target_label))} · f(x) = {res.f_x:+.3f}</p>")
        for m in res.methods:
            parts.append(f"<p class='m'>{html.escape(m.label)}</p>" + tokens_html(res.tokens, m.scores, res.special))
    parts.append("</body></html>")
    return "".join(parts)


# ---------------------------------------------------------------------------------------------- attention
def attention_npz(result: AttentionResult) -> bytes:
    """The raw attention (and q/k when captured) as a compressed .npz file, with tokens and masks."""
    buf = io.BytesIO()
    arrays = dict(
        attentions=result.attentions,
        tokens=np.array(result.tokens, dtype=str),
        cls_mask=result.cls_mask,
        sep_mask=result.sep_mask,
        punct_mask=result.punct_mask,
        sentence_b_start=np.array(-1 if result.sentence_b_start is None else result.sentence_b_start),
        checkpoint=np.array(result.checkpoint),
    )
    if result.queries is not None and result.keys is not None:
        arrays.update(queries=result.queries, keys=result.keys)
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------- probes
def probes_csv(result: ProbeResult) -> str:
    """One row per task and depth (ProbeResult.table): accuracy, majority, control, selectivity, best, sizes."""
    buf = io.StringIO()
    rows = result.table()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in rows)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------- figures
def figure_png(fig: go.Figure) -> bytes:
    """``fig`` as a PNG (through kaleido and the local Chromium, about two seconds the first time, then from the
    report's cache). Raises RuntimeError when it cannot be drawn here (no Chromium), with kaleido's reason."""
    pngs, error = figure_pngs([fig.to_json()])
    if pngs[0] is None:
        raise RuntimeError(error or "kaleido wrote no file")
    return pngs[0]

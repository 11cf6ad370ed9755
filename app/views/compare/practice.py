"""The articles' practice, measured: the Speed page's int8 section and the Models page's GLUE table.

Layout and widgets only; the measurements live in core.compare.int8 and core.compare.glue_claims, and the Speed page
starts the int8 job that ``int8_section`` asks for (``int8_result`` then draws it)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app.kit import presenter, state
from app.kit.i18n import lang, t
from app.kit.jobs_panel import job_section
from app.kit.render import as_text, record_once
from core.compare.glue_claims import (
    CLAIM_SOURCE,
    COLUMN_LABELS,
    GLUE_CLAIMS,
    GLUE_COLUMNS,
    claims_rows,
    find_runs,
    full_run,
    share_of_full,
)
from core.compare.int8 import ARTICLE_CLAIM
from core.models import hosted
from core.models.spec import ModelSpec
from core.registry import FAMILIES
from core.train.finetune import runs_root

FP32_COLOR, INT8_COLOR = "#4C78A8", "#F58518"
INT8_JOBS = "speed.int8.made_from"


# ---------------------------------------------------------------------------------------------- int8 (Speed page)
def _mb(b: int) -> float:
    return round(b / 2**20, 2)


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.0%}"  # i18n: ok (a dash: no held-out probe)


def quant_table(res) -> pd.DataFrame:
    """fp32 against int8, one row per measure, with the int8/fp32 ratio."""
    f, q = res.fp32, res.int8
    rows = [
        (
            t("speed.int8.m.disk"),
            f"{_mb(f.disk_bytes):,.1f} MB",
            f"{_mb(q.disk_bytes):,.1f} MB",
            f"{res.disk_ratio:.2f}×",
        ),
        (
            t("speed.int8.m.memory"),
            f"{_mb(f.memory_bytes):,.1f} MB",
            f"{_mb(q.memory_bytes):,.1f} MB",
            f"{res.memory_ratio:.2f}×",
        ),
        (
            t("speed.int8.m.latency", batch=res.batch, seq=res.seq_len),
            f"{f.latency_ms:,.1f} ms",
            f"{q.latency_ms:,.1f} ms",
            f"{q.latency_ms / f.latency_ms:.2f}×",
        ),
        (
            t("speed.int8.m.agree", n=res.n_examples + res.n_heldout),
            t("speed.int8.reference"),
            _pct(res.agreement),
            "–",
        ),  # i18n: ok (a dash)
        (t("speed.int8.m.top1", n=res.n_heldout), _pct(f.heldout_top1), _pct(q.heldout_top1), "–"),
        (t("speed.int8.m.top5", n=res.n_heldout), _pct(f.heldout_top5), _pct(q.heldout_top5), "–"),
    ]
    cols = (t("speed.int8.col.measure"), "fp32", "int8", t("speed.int8.col.ratio"))
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


def quant_chart(res) -> go.Figure:
    """Three panels, fp32 and int8 side by side: size (MB), latency (ms), probe scores (%)."""
    fig = make_subplots(
        rows=1,
        cols=3,
        horizontal_spacing=0.08,
        subplot_titles=(t("speed.int8.chart.size"), t("speed.int8.chart.latency"), t("speed.int8.chart.probe")),
    )
    size_x = [t("speed.int8.chart.disk"), t("speed.int8.chart.memory")]
    probe_x = [t("speed.int8.chart.agree"), t("speed.int8.chart.top1"), t("speed.int8.chart.top5")]
    for name, side, color in (("fp32", res.fp32, FP32_COLOR), ("int8", res.int8, INT8_COLOR)):
        show = name == "fp32"
        fig.add_bar(
            x=size_x,
            y=[_mb(side.disk_bytes), _mb(side.memory_bytes)],
            name=name,
            marker_color=color,
            legendgroup=name,
            row=1,
            col=1,
            text=[f"{_mb(side.disk_bytes):.1f}", f"{_mb(side.memory_bytes):.1f}"],
            textposition="outside",
            cliponaxis=False,
        )
        fig.add_bar(
            x=[t("speed.int8.chart.batch", batch=res.batch, seq=res.seq_len)],
            y=[side.latency_ms],
            name=name,
            marker_color=color,
            legendgroup=name,
            showlegend=False,
            row=1,
            col=2,
            error_y=dict(type="data", array=[side.latency_std_ms]),
            text=[f"{side.latency_ms:.0f}"],
            textposition="inside",
            insidetextanchor="start",
        )  # above would collide with the error bar
        agree = 1.0 if show else res.agreement
        vals = [agree, side.heldout_top1 or 0.0, side.heldout_top5 or 0.0]
        fig.add_bar(
            x=probe_x,
            y=[v * 100 for v in vals],
            name=name,
            marker_color=color,
            legendgroup=name,
            showlegend=False,
            row=1,
            col=3,
            text=[f"{v:.0%}" for v in vals],
            textposition="outside",
            cliponaxis=False,
        )
        if show:
            fig.data[0].showlegend = True
    fig.update_yaxes(range=[0, 115], row=1, col=3)  # the subplot titles carry the units
    fig.update_layout(barmode="group", height=420, margin=dict(t=60, b=10), legend=dict(orientation="h", y=-0.15))
    return fig


def claim_quote() -> None:
    """The article's ALBERT + quantization advice, quoted in its own words (and translated), with its source."""
    zh, en = ARTICLE_CLAIM
    st.markdown(f"> {zh}" + ("" if lang() == "zh" else f"\n>\n> *{en}*"))
    st.caption(t("speed.int8.claim_source"))


def _verdict(res) -> str:
    return t(
        "speed.int8.verdict",
        model=as_text(res.checkpoint),
        disk=f"{1 / res.disk_ratio:.1f}",
        speed=f"{res.speedup:.2f}",
        agree=_pct(res.agreement),
        top5=f"{_pct(res.fp32.heldout_top5)} → {_pct(res.int8.heldout_top5)}",
    )


def _show_int8(job) -> None:
    res = job.result
    st.success(
        t(
            "speed.int8.measured",
            model=as_text(res.checkpoint),
            n=res.quantized_linears,
            threads=res.threads,
            seconds=f"{job.elapsed:,.1f}",
        )
    )
    table = quant_table(res)
    st.markdown(_verdict(res))
    st.dataframe(table, hide_index=True, width="stretch")
    st.plotly_chart(presenter.scale(quant_chart(res)), width="stretch", key=f"speed.int8.chart.{job.id}")
    if res.disagreements:
        with st.expander(t("speed.int8.disagree", n=len(res.disagreements))):
            st.dataframe(
                pd.DataFrame([{t("speed.int8.col.text"): x, "fp32": a, "int8": b} for x, a, b in res.disagreements]),
                hide_index=True,
                width="stretch",
            )
    st.caption(t("speed.int8.probe_note", examples=res.n_examples, heldout=res.n_heldout))
    record_once(
        "speed.recorded",
        f"speed.int8:{job.id}",
        lambda: dict(
            page=t("nav.speed"),
            title=t("speed.int8.report_title", model=res.checkpoint),
            inputs={t("speed.seq"): res.seq_len, t("speed.batch"): res.batch, t("speed.reps"): res.repeats},
            rows=table.to_dict("records"),
            text=_verdict(res),
            figures=[quant_chart(res)],
        ),
    )


@dataclass(frozen=True)
class Int8Ask:
    """What the int8 section asks: ``base`` (the sidebar's model, unquantized) in fp32 and int8 at the page's shape;
    ``go``: Measure was pressed in this run."""

    base: ModelSpec
    seq_len: int
    batch: int
    repeats: int
    go: bool

    @property
    def asked(self) -> tuple:
        """What a measurement's result is shown under."""
        return (self.base.family, self.base.checkpoint, self.seq_len, self.batch, self.repeats)


def int8_section(spec: ModelSpec | None, seq: int, batch: int, reps: int) -> Int8Ask | None:
    """The Speed page's int8 section: the sidebar's model in fp32 and int8, measured in a background job that the
    page starts. Returns what it asks; None (after saying so) without a model."""
    st.subheader(t("speed.int8.title"))
    claim_quote()
    st.markdown(t("speed.int8.intro"))
    if spec is None:
        st.info(t("common.pick_model"))
        return None
    base = replace(spec, quant="")
    st.caption(t("speed.int8.model", model=as_text(base.checkpoint), batch=batch, seq=seq, reps=reps))
    go = st.button(t("speed.int8.measure"), key="speed.int8.go", icon=":material/compress:")
    return Int8Ask(base, int(seq), int(batch), int(reps), go)


def int8_result(ask: Int8Ask | None) -> None:
    """The panel of the int8 measurement made from what the section asks now; else a hint."""
    if ask is None:
        return
    if not job_section(INT8_JOBS, ask.asked, _show_int8, key="speed.int8") and not st.session_state.get(INT8_JOBS):
        st.info(t("speed.int8.hint"))


# ---------------------------------------------------------------------------------------------- GLUE (Models page)
def _session_runs() -> tuple[list[str], dict[str, float]]:
    """This session's fine-tuned model folders, and the samples/s each run measured (kept by the Fine-tune page)."""
    folders = [m.path for m in state.session_models() if m.kind == "fine-tuned"]
    speeds = {}
    for run in st.session_state.get("finetune.runs", []):
        res = run.get("result") if isinstance(run, dict) else None
        if res is not None and getattr(res, "samples_per_s", None):
            speeds[str(res.model_dir)] = float(res.samples_per_s)
    return folders, speeds


def _runs_roots() -> list:
    """Where finished runs are looked for: this session's runs folder; on a local install every session's."""
    mine = runs_root(state.session_id())
    return [mine] if hosted.enabled() else [mine.parent]


def glue_claims_table() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {t("models.glue.col.model"): r["model"], **{COLUMN_LABELS[c]: r[c] for c in GLUE_COLUMNS}}
            for r in claims_rows()
        ]
    )


def measured_table(runs, speeds: dict[str, float]) -> pd.DataFrame:
    """One row per finished fine-tune: model, data, metric, steps, seed, and the article's figure where the data
    is one of the table's GLUE tasks."""
    rows = []
    for r in runs:
        claim = None
        if r.glue_task in GLUE_COLUMNS and r.family in GLUE_CLAIMS:
            claim = GLUE_CLAIMS[r.family][1][GLUE_COLUMNS.index(r.glue_task)]
        sps = r.samples_per_s or speeds.get(r.path)
        rows.append(
            {
                t("models.glue.col.model"): r.checkpoint,
                t("models.glue.col.family"): FAMILIES[r.family].label if r.family in FAMILIES else r.family,
                t("models.glue.col.data"): COLUMN_LABELS.get(r.glue_task or "", r.data),
                t("models.glue.col.metric"): t(f"models.glue.metric.{r.metric}"),
                t("models.glue.col.measured"): f"{r.value * 100:.1f}",
                t("models.glue.col.claim"): "–" if claim is None else f"{claim:.1f}",  # i18n: ok (a dash)
                t("models.glue.col.steps"): r.steps,
                t("models.glue.col.seed"): r.seed,
                t("models.glue.col.batch"): r.batch_size,
                t("models.glue.col.sps"): "–" if not sps else f"{sps:,.1f}",  # i18n: ok (a dash)
            }
        )
    return pd.DataFrame(rows)


def full_run_table(sps: float | None) -> pd.DataFrame:
    out = []
    for task in GLUE_COLUMNS:
        f = full_run(task, sps)
        out.append(
            {
                t("models.glue.col.task"): COLUMN_LABELS[task],
                t("models.glue.col.examples"): f"{f.examples:,}",
                t("models.glue.col.epochs"): f.epochs,
                t("models.glue.col.samples"): f"{f.samples:,}",
                t("models.glue.col.steps32"): f"{-(-f.samples // 32):,}",
                t("models.glue.col.hours"): "–" if f.hours is None else f"{f.hours:,.1f}",
            }
        )  # i18n: ok
    return pd.DataFrame(out)


def glue_section() -> None:
    """The Models page's GLUE section: the article's table as claims, this installation's runs beside it, and
    what a full run would take."""
    st.subheader(t("models.glue.title"))
    st.caption(t("models.glue.source"))
    claims = glue_claims_table()
    st.dataframe(claims, hide_index=True, width="stretch")
    st.caption(t("models.glue.metrics_note"))
    st.markdown("#### " + t("models.glue.measured_title"))
    folders, speeds = _session_runs()
    runs = find_runs(_runs_roots(), extra=tuple(folders))
    fastest = max(
        ((r.samples_per_s or speeds.get(r.path) or 0.0, r) for r in runs), default=(0.0, None), key=lambda x: x[0]
    )
    if runs:
        st.dataframe(measured_table(runs, speeds), hide_index=True, width="stretch")
        st.caption(t("models.glue.measured_note"))
    else:
        st.info(t("models.glue.none"))
    longest = max(runs, key=lambda r: r.steps * r.batch_size, default=None)
    if longest is not None:
        st.warning(
            t(
                "models.glue.cannot",
                steps=longest.steps,
                batch=longest.batch_size,
                share=f"{share_of_full(longest):.3%}",
            )
        )
    else:
        st.warning(t("models.glue.cannot_plain"))
    sps, fast_run = fastest
    st.markdown("#### " + t("models.glue.full_title"))
    st.dataframe(full_run_table(sps or None), hide_index=True, width="stretch")
    if fast_run is not None and sps:
        st.caption(
            t(
                "models.glue.full_note",
                model=as_text(fast_run.checkpoint),
                sps=f"{sps:,.1f}",
                length=fast_run.max_length,
            )
        )
    else:
        st.caption(t("models.glue.full_note_none"))
    record_once(
        "models.recorded",
        "models:glue",
        lambda: dict(
            page=t("nav.models"),
            title=t("models.glue.title"),
            inputs={t("models.in.source"): CLAIM_SOURCE},
            rows=claims.to_dict("records"),
        ),
    )

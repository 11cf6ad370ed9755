"""The Fine-tune page's "Out of memory?" panel: one click measures the same short run with each remedy of
core.train.finetune.REMEDIES (core.train.remedies, in a background job), shown next to the third article's advice.
``oom_form`` draws the form and returns what it asks; the page starts the job (app.kit.finetune_work.start_remedies)
and ``oom_result`` draws its panel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from app.kit.i18n import explain, lang, t
from app.kit.jobs_panel import job_section
from app.kit.render import record_once
from core.train.finetune_config import FinetuneConfig
from core.train.remedies import ARTICLE_OOM, ARTICLE_OSCILLATION, MAX_STEPS

JOBS = "remedies.made_from"
STEPS = "remedies.steps"
DEFAULT_STEPS = 6
NO_VALUE = "–"  # i18n: ok (a dash: not measured)


def advice() -> None:
    """The article's two troubleshooting items, in its own words (and translated)."""
    for zh, en in (ARTICLE_OSCILLATION, ARTICLE_OOM):
        st.markdown(f"> {zh}" + ("" if lang() == "zh" else f"\n>\n> *{en}*"))
    st.caption(t("remedies.advice_source"))


def _x(v: float | None) -> str:
    return NO_VALUE if v is None else f"{v:.2f}×"


def _num(v: float | None, fmt: str) -> str:
    return NO_VALUE if v is None else format(v, fmt)


def remedies_table(res) -> pd.DataFrame:
    """One row per run: remedy, settings, peak memory, its ratio to the baseline, steps/s, its ratio, a note."""
    cpu = res.device == "cpu"
    rows = []
    for r in res.rows:
        note = t("remedies.note.unchanged") if not r.changed else explain(r.error or "")
        row = {
            t("remedies.col.remedy"): t("remedies.baseline") if r.name == "baseline" else t(f"remedies.name.{r.name}"),
            t("remedies.col.settings"): explain(r.settings),
            t("remedies.col.peak"): _num(r.peak_mb, ",.0f"),
        }
        if cpu:
            row[t("remedies.col.train_mb")] = _num(r.train_mb, ",.0f")
        row.update(
            {
                t("remedies.col.memory_ratio"): _x(r.memory_ratio),
                t("remedies.col.steps"): _num(r.steps_per_s, ",.2f"),
                t("remedies.col.speed_ratio"): _x(r.speed_ratio),
                t("remedies.col.note"): note,
            }
        )
        rows.append(row)
    df = pd.DataFrame(rows)
    if not any(df[t("remedies.col.note")]):  # every run ran: no column of blanks
        df = df.drop(columns=[t("remedies.col.note")])
    return df


def _show(job) -> None:
    res = job.result
    st.success(
        t(
            "remedies.measured",
            n=len([r for r in res.rows if r.changed]),
            steps=res.steps,
            rows=res.train_rows,
            device=res.device,
            threads=res.threads,
            seconds=f"{job.elapsed:,.0f}",
        )
    )
    table = remedies_table(res)
    st.dataframe(table, hide_index=True, width="stretch")
    st.caption(t("remedies.how_cpu") if res.device == "cpu" else t("remedies.how_gpu"))
    record_once(
        "remedies.recorded",
        f"remedies:{job.id}",
        lambda: dict(
            page=t("nav.finetune"),
            title=t("remedies.report_title"),
            inputs={t("remedies.col.settings"): explain(res.rows[0].settings), t("remedies.steps"): res.steps},
            rows=table.to_dict("records"),
        ),
    )


@dataclass(frozen=True)
class RemediesAsk:
    """What the panel asks: the remedies measured for ``cfg`` on ``data`` (LabelledData or TokenData), ``steps``
    steps each; ``go``: Measure was pressed in this run; ``asked``: what a measurement's result is shown under."""

    cfg: FinetuneConfig
    data: Any
    steps: int
    go: bool
    asked: tuple


def oom_form(cfg: FinetuneConfig | None, data) -> RemediesAsk | None:
    """The article's advice, then the form measuring the remedies for ``cfg`` on ``data`` (None when no data is
    loaded yet); returns what it asks, or None after saying that settings or data are missing."""
    advice()
    st.markdown(t("remedies.intro"))
    if cfg is None or data is None:
        st.info(t("remedies.need_settings"))
        return None
    st.session_state.setdefault(STEPS, DEFAULT_STEPS)
    c1, c2 = st.columns([1, 2])
    steps = c1.number_input(t("remedies.steps"), 2, MAX_STEPS, key=STEPS)
    asked = (cfg, data.fingerprint(), int(steps))
    c2.caption(t("remedies.steps_help", rows=int(steps) * cfg.batch_size))
    go = st.button(t("remedies.measure"), key="remedies.go", icon=":material/memory:")
    return RemediesAsk(cfg, data, int(steps), go, asked)


def oom_result(ask: RemediesAsk | None) -> None:
    """The panel of the measurement made from what the form asks now (or why none shows)."""
    if ask is not None:
        job_section(JOBS, ask.asked, _show, key="remedies")

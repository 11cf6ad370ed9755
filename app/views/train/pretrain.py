"""The Pretraining lab's renderers: curves per run, the live panel, the finished-run summary and its report
entry. The page (pages/pretrain.py) keeps the form and the layout."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from app.kit import presenter, state
from app.kit.i18n import t
from core.registry import FAMILIES

PAGE = "pretrain"
MASKINGS = ("dynamic", "static")


def K(name: str) -> str:
    return state.key(PAGE, name)


CURVES = ("mlm_loss", "mlm_acc", "heldout_top5", "nsp_acc", "sop_acc")


def curves(jobs, metric: str) -> go.Figure:
    """One line per run for ``metric`` against the step."""
    fig = go.Figure()
    for j in jobs:
        pts = [(m["step"], m[metric]) for m in j.metrics if metric in m]
        if pts:
            fig.add_scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines+markers", name=j.name)
    fig.update_layout(
        title=t(f"pretrain.curve.{metric}") if metric in CURVES else metric,
        xaxis_title=t("pretrain.step"),
        height=300,
        margin=dict(t=40, b=10),
        legend=dict(orientation="h"),
    )
    return fig


def pair_metric(j) -> str:
    return next((k for k in ("nsp_acc", "sop_acc") if any(k in m for m in j.metrics)), "mlm_acc")


def live(j) -> None:
    a, b = st.columns(2)
    a.plotly_chart(
        presenter.scale(curves([j], "mlm_loss")), width="stretch", key=f"pretrain.loss.{j.id}.{len(j.metrics)}"
    )
    b.plotly_chart(
        presenter.scale(curves([j], pair_metric(j))), width="stretch", key=f"pretrain.pair.{j.id}.{len(j.metrics)}"
    )
    samples = next((m["samples"] for m in reversed(j.metrics) if m.get("samples")), None)
    if samples:
        st.caption(t("pretrain.samples_caption"))
        st.dataframe(
            [
                {
                    t("pretrain.col.text"): s["text"],
                    t("pretrain.col.gold"): " ".join(s["gold"]),
                    t("pretrain.col.guess"): " ".join(s["pred"]),
                }
                for s in samples
            ],
            hide_index=True,
            width="stretch",
        )


def _summary(j) -> str:
    f = j.result.final
    msg = t(
        "pretrain.summary",
        name=j.name,
        top1=f"{f['mlm_top1']:.1%}",
        top5=f"{f['mlm_top5']:.1%}",
        unigram=f"{f['unigram_top5']:.1%}",
    )
    if "pair_acc" in f:
        msg += t("pretrain.summary_pair", acc=f"{f['pair_acc']:.1%}")
    return msg


def done(j) -> None:
    r = j.result
    state.register_session_model(j.name, r.family, r.out, "pretrained")  # the job's name: fixed at submit
    st.success(_summary(j) + t("pretrain.summary_end", seconds=f"{r.wall_s:,.0f}", label=j.name))
    live(j)


def report_entry(j) -> dict:
    """The keyword arguments of report.record for a finished job: the config, final held-out metrics, curves."""
    r, cfg, f = j.result, j.result.config, j.result.final
    yes_no = lambda v: t("pretrain.yes") if v else t("pretrain.no")  # noqa: E731
    upload_name = st.session_state.get(K("corpus_names"), {}).get(j.id)
    inputs = {
        t("pretrain.family"): FAMILIES[r.family].label,
        t("pretrain.corpus"): upload_name or t("pretrain.corpus_opt.bundled"),
        t("pretrain.masking"): t_masking(cfg.get("masking", "dynamic")),
        t("pretrain.wwm"): yes_no(cfg.get("whole_word")),
        t("pretrain.rep.pair"): (cfg.get("pair_objective") or "").upper() or t("pretrain.no"),
        t("pretrain.distill"): yes_no(cfg.get("teacher")),
        t("pretrain.size"): cfg.get("size", ""),
        t("pretrain.steps"): f"{r.steps} / {cfg.get('steps', r.steps)}",
        t("pretrain.seed"): cfg.get("seed", 0),
        t("pretrain.rep.batch"): cfg.get("batch_size", ""),
        t("pretrain.rep.max_len"): cfg.get("max_len", ""),
        t("pretrain.rep.lr"): cfg.get("lr", ""),
        t("pretrain.rep.params"): f"{r.params:,}",
    }
    metric, value = t("pretrain.rep.metric"), t("pretrain.rep.value")
    pct = lambda k: f"{f[k]:.1%}"  # noqa: E731
    rows = [
        (t("pretrain.rep.top1"), pct("mlm_top1")),
        (t("pretrain.rep.top5"), pct("mlm_top5")),
        (t("pretrain.rep.unigram_top1"), pct("unigram_top1")),
        (t("pretrain.rep.unigram_top5"), pct("unigram_top5")),
    ]
    if "mlm_loss" in f:
        rows.append((t("pretrain.rep.mlm_loss"), f"{f['mlm_loss']:.3f}"))
    if "pair_acc" in f:
        rows += [(t("pretrain.rep.pair_acc"), pct("pair_acc")), (t("pretrain.rep.pair_majority"), pct("pair_majority"))]
    rows.append((t("pretrain.rep.wall"), t("pretrain.seconds", seconds=f"{r.wall_s:,.0f}")))
    figs = [curves([j], "mlm_loss"), curves([j], "heldout_top5")]
    if pair_metric(j) != "mlm_acc":
        figs.append(curves([j], pair_metric(j)))
    return dict(
        page=t("nav.pretrain"),
        title=t("pretrain.rep.title", name=j.name),
        inputs=inputs,
        rows=[{metric: a, value: b} for a, b in rows],
        figures=figs,
    )


def t_masking(m: str) -> str:
    return t(f"pretrain.masking_opt.{m}") if m in MASKINGS else m

"""Step 6: fine-tuning with the seeds' settings against ten times the learning rate: two short runs of one model as
background jobs (core.walkthrough.checks.lr_pair_plan on core.train.finetune), their live and final loss curves, their
held-out accuracy and what the pair says (lr_verdict, worded by verdict_text from what the runs measured: on the
bundled minis the 10x run wins, core/walkthrough/lr_measure.py). Both models join the session's model picker."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app.kit import presenter, state, urlstate
from app.kit.i18n import explain, t
from app.kit.jobs_panel import job_panel
from app.kit.walkthrough_work import Flow, LrPair, find_job
from app.kit.zh_examples import chinese_examples
from app.views.start.walkthrough.common import K, Step, device, record
from core.registry import FAMILIES
from core.walkthrough.checks import (
    LR_FACTOR,
    LRS,
    S6_BATCH,
    S6_DATA,
    S6_MAX_LEN,
    finetune_choices,
    jitter,
    lr_verdict,
)

N = 6
STEPS = (2, 200, 30)  # lo, hi, default: read by the widget and the URL field
DEFAULT_LR = 5e-5
KINDS = ("good", "high")


def _options() -> list[str]:
    opts = [f"{fam}|{ckpt}" for fam, ckpt in finetune_choices()]
    spec = state.current_spec()
    if spec is not None and f"{spec.family}|{spec.checkpoint}" not in opts:
        opts.append(f"{spec.family}|{spec.checkpoint}")
    return opts


def _label(opt: str) -> str:
    fam, ckpt = opt.split("|", 1)
    return f"{FAMILIES[fam].label} · {ckpt}"


def _ask(opt: str, lr: float, steps: int) -> LrPair:
    fam, ckpt = opt.split("|", 1)
    return LrPair(fam, ckpt, lr, steps, device())


def _loss_figure(runs: dict) -> go.Figure:
    """Training loss of both runs side by side, on one y-scale."""
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        subplot_titles=[t(f"walkthrough.s6.col.{k}", lr=f"{runs[k]['lr']:.0e}") for k in KINDS],
    )
    for col, (kind, color) in enumerate(zip(KINDS, ("#4C78A8", "#E45756")), start=1):
        run = runs[kind]
        hist = [h for h in (run["result"].history if run["result"] is not None else ()) if h.get("loss") is not None]
        fig.add_trace(
            go.Scatter(
                x=[h["step"] for h in hist],
                y=[h["loss"] for h in hist],
                mode="lines+markers",
                line=dict(color=color),
                showlegend=False,
                hovertemplate=t("walkthrough.s6.hover") + "<extra></extra>",
            ),
            row=1,
            col=col,
        )
    fig.update_xaxes(title_text=t("walkthrough.s6.step"))
    fig.update_yaxes(title_text=t("walkthrough.s6.loss"), row=1, col=1)
    fig.update_layout(height=340, margin=dict(t=40, b=10))
    return fig


def _live(job, kind: str) -> None:
    """The loss so far, while a run goes (from the job's metrics)."""
    hist = [m for m in list(job.metrics) if m.get("loss") is not None]
    if len(hist) < 2:
        return
    fig = go.Figure(
        go.Scatter(
            x=[m["step"] for m in hist],
            y=[m["loss"] for m in hist],
            mode="lines",
            hovertemplate=t("walkthrough.s6.hover") + "<extra></extra>",
        )
    )
    fig.update_layout(
        height=200, margin=dict(t=10, b=10), xaxis_title=t("walkthrough.s6.step"), yaxis_title=t("walkthrough.s6.loss")
    )
    st.plotly_chart(presenter.scale(fig), key=K(f"s6.live.{kind}.{job.id}"), width="stretch")


def _verdict(runs: dict) -> str:
    return verdict_text(lr_verdict(runs["good"]["result"], runs["high"]["result"]))


def verdict_text(v) -> str:
    """What the page says about the pair (a core.walkthrough.checks.LrVerdict): which run scored higher, and which
    loss jumped more, each as the runs measured it."""
    if v.good is None or v.high is None:
        return t(f"walkthrough.s6.verdict.{v.kind}")
    nums = dict(
        good=f"{v.good:.1%}",
        high=f"{v.high:.1%}",
        jitter_good=f"{v.jitter_good:.3f}",
        jitter_high=f"{v.jitter_high:.3f}",
        majority=f"{v.majority:.1%}",
    )
    return (
        t(f"walkthrough.s6.verdict.{v.kind}", **nums)
        + " "
        + t("walkthrough.s6.jitter_more" if v.jumpier else "walkthrough.s6.jitter_less", **nums)
    )


def _running(job_id: int) -> bool:
    job = find_job(job_id)
    return job is not None and not job.done


def _collect(runs: dict) -> None:
    """Pick up finished jobs (kept in the session: a later error cannot lose them)."""
    for run in runs.values():
        job = find_job(run["job_id"])
        if job is not None and job.done and run["result"] is None and run["error"] is None:
            if job.status == "done":
                run["result"] = job.result
            else:
                run["error"] = job.error or job.status


def render() -> Flow[None]:
    opts = _options()
    if not opts:
        st.warning(t("walkthrough.s6.no_model"))
        return
    default = opts[0]  # the distilled family's bundled model when it is here: the fastest to fine-tune
    if st.session_state.get(K("s6.model")) not in opts:
        st.session_state[K("s6.model")] = default
    st.session_state.setdefault(K("s6.lr"), DEFAULT_LR)
    st.session_state.setdefault(K("s6.steps"), STEPS[2])
    if chinese_examples():  # English data only: say so, and that the Chinese-capable model can still be picked
        st.info(t("walkthrough.s6.zh_english_data", id=state.current_spec().checkpoint))
    model = st.selectbox(
        t("walkthrough.s6.model"), opts, key=K("s6.model"), format_func=_label, help=t("walkthrough.s6.model_help")
    )
    with presenter.settings():
        c1, c2 = st.columns(2)
        lr = c1.select_slider(t("walkthrough.s6.lr"), LRS, key=K("s6.lr"), format_func=lambda x: f"{x:.0e}")
        steps = c2.number_input(t("walkthrough.s6.steps"), STEPS[0], STEPS[1], key=K("s6.steps"))
    st.caption(
        t(
            "walkthrough.s6.settings",
            lr=f"{lr:.0e}",
            high=f"{lr * LR_FACTOR:.0e}",
            steps=int(steps),
            batch=S6_BATCH,
            max_len=S6_MAX_LEN,
        )
    )
    runs = st.session_state.get(K("s6.runs"))
    busy = runs is not None and any(_running(r["job_id"]) for r in runs.values())
    if st.button(
        t("walkthrough.s6.start"), key=K("s6.start"), type="primary", disabled=busy, icon=":material/play_arrow:"
    ):
        try:  # the page starts both runs (a refusal of either cancels the other)
            st.session_state[K("s6.runs")] = yield _ask(model, float(lr), int(steps))
        except ValueError as e:
            st.error(explain(e))
        runs = st.session_state.get(K("s6.runs"))
    if not runs:
        st.caption(t("walkthrough.s6.not_yet"))
        return
    _collect(runs)
    good = runs["good"]
    registered: set = st.session_state.setdefault(K("s6.registered"), set())
    fresh = [r for r in runs.values() if r["result"] is not None and r["result"].model_dir not in registered]
    for run in fresh:  # the seeds' run for step 7 and every page; the 10x one too, to compare them
        state.register_session_model(
            f"walkthrough {run['family']} lr={run['lr']:.0e}", run["family"], run["result"].model_dir, kind="fine-tuned"
        )
        registered.add(run["result"].model_dir)
    if fresh:
        st.session_state[K("s7.source")] = "step6"  # step 7 looks inside the new model
        st.rerun()  # once, so the sidebar picker (drawn before this page) lists the new models
    cols = st.columns(2)
    for col, kind in zip(cols, KINDS):
        run = runs[kind]
        with col:
            st.markdown("**" + t(f"walkthrough.s6.col.{kind}", lr=f"{run['lr']:.0e}") + "**")
            if run["result"] is None and run["error"] is None:
                job_panel(
                    run["job_id"],
                    on_done=lambda j: st.rerun(),
                    on_running=lambda j, k=kind: _live(j, k),
                    key=K(f"s6.job.{kind}"),
                )
            elif run["error"] is not None:
                st.error(t("walkthrough.s6.failed", error=explain(run["error"])))
            else:
                r = run["result"]
                st.metric(
                    t("walkthrough.s6.acc"),
                    f"{r.accuracy:.1%}",
                    t("walkthrough.s6.vs_majority", delta=f"{r.accuracy - r.majority_rate:+.1%}"),
                )
                j = jitter(r.history)
                st.caption(
                    t(
                        "walkthrough.s6.run_caption",
                        steps=r.steps,
                        seconds=f"{r.train_seconds:,.1f}",
                        loss=f"{r.history[-1]['loss']:.3f}" if r.history else "–",
                        jitter=f"{j:.3f}" if j is not None else "–",
                    )
                )
    if not all(r["result"] is not None or r["error"] is not None for r in runs.values()):
        return
    fig = _loss_figure(runs)
    st.plotly_chart(presenter.scale(fig), key=K("s6.fig"), width="stretch")
    verdict = _verdict(runs)
    st.markdown(verdict)
    if any(r["result"] is not None for r in runs.values()):
        st.success(t("walkthrough.s6.registered", family=FAMILIES[good["family"]].label), icon=":material/check:")
    record(
        N,
        {
            t("walkthrough.in.model"): good["checkpoint"],
            t("walkthrough.s6.lr"): f"{good['lr']:.0e}",
            t("walkthrough.s6.steps"): good["steps"],
            t("walkthrough.s6.data"): S6_DATA,
        },
        rows=[
            {
                t("walkthrough.s6.col.run"): t(f"walkthrough.s6.col.{k}", lr=f"{r['lr']:.0e}"),
                t("walkthrough.s6.acc"): f"{r['result'].accuracy:.1%}" if r["result"] is not None else r["error"],
                t("walkthrough.s6.jitter"): round(jitter(r["result"].history) or 0.0, 4)
                if r["result"] is not None
                else "",
            }
            for k, r in runs.items()
        ],
        text=verdict,
        figures=[fig],
    )


STEP = Step(
    N,
    render,
    correct=0,
    links=("finetune",),
    fields=(
        urlstate.Field(K("s6.lr"), "float", choices=LRS),
        urlstate.Field(K("s6.steps"), "int", lo=STEPS[0], hi=STEPS[1]),
    ),
    keep=(K("s6.model"), K("s6.lr"), K("s6.steps")),
)

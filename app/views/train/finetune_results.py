"""The Fine-tune page's finished runs: the result view (sequence and token), try-it boxes, and the comparison
across runs. A try-it box needs the run's classifier only once something is typed and sent, inside the run's panel:
the page passes its loader in (``load``, app.kit.finetune_work.trained_model), as it does for the heads-off panel."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from app.kit import presenter
from app.kit.download_button import download
from app.kit.i18n import explain, t
from app.kit.model_choice import pick
from app.views.inspect.ablation import classify_heads
from app.views.train.finetune import K
from app.views.train.finetune_charts import (
    TOKEN_CSS,
    confusion,
    curves,
    heldout_sentences_html,
    layer_weights_chart,
    stop_reason_label,
    tagged_html,
    try_chart,
)
from app.views.train.finetune_report import record_prediction
from app.views.train.finetune_slices import Slicing, compare_two, run_slices
from core.predict.classify import FinetunedModel, classify, tag, zip_folder
from core.registry import ModelLoadError
from core.train.finetune import FinetuneResult

# A finished run's classifier, loaded (cached) by the page's side; raises ModelLoadError.
Loader = Callable[[FinetuneResult], FinetunedModel]


def result_view(name: str, result: FinetuneResult, load: Loader, slicing: Slicing | None = None) -> None:
    """Metrics, curves, confusion matrix, worst errors, slices, try-it box, download and links to other pages.
    ``load`` gives the run's classifier for the try-it box; ``slicing``: the page's keyword and regex."""
    if result.token_metrics is not None:
        token_result_view(name, result, load)
        return
    c = st.columns(6)
    c[0].metric(
        t("finetune.m.accuracy"),
        f"{result.accuracy:.1%}",
        t("finetune.m.vs_majority", delta=f"{result.accuracy - result.majority_rate:+.1%}"),
    )
    c[1].metric(t("finetune.m.macro_f1"), f"{result.macro_f1:.3f}")
    c[2].metric(t("finetune.m.steps"), f"{result.steps}", stop_reason_label(result.stop_reason), delta_color="off")
    c[3].metric(t("finetune.m.time"), t("finetune.seconds", seconds=f"{result.train_seconds:,.1f}"))
    c[4].metric(t("finetune.m.samples_per_s"), f"{result.samples_per_s:,.1f}")
    c[5].metric(t("finetune.m.padding"), f"{result.padding_saved:.0%}", help=t("finetune.m.padding_help"))
    st.caption(
        t(
            "finetune.result_caption",
            device=result.device,
            precision=result.precision,
            trained=f"{result.params_trainable:,}",
            total=f"{result.params_total:,}",
            best=result.best_step,
        )
    )
    st.plotly_chart(
        presenter.scale(curves([(name, list(result.history) + list(result.evals))])), key=K(f"curves.{name}")
    )
    left, right = st.columns([2, 3])
    left.plotly_chart(presenter.scale(confusion(result)), key=K(f"cm.{name}"))
    with right:
        st.markdown(t("finetune.worst_errors"))
        errs = result.worst_errors(10)
        if errs:  # a static table: the text wraps and every column stays in view (a data grid cut them off)
            cols = {c: t(f"finetune.col.{c}") for c in ("text", "true", "predicted", "confidence", "p_true")}
            rows = [{**e, "confidence": f"{e['confidence']:.0%}", "p_true": f"{e['p_true']:.2f}"} for e in errs]
            st.table(pd.DataFrame(rows).rename(columns=cols), hide_index=True)
        else:
            st.success(t("finetune.no_errors"))
    _mix_view(name, result)
    run_slices(name, result, slicing)
    _try_it(name, result, load)
    _run_buttons(name, result)


def _pick(family: str, checkpoint: str) -> None:
    pick(family, checkpoint)
    st.toast(t("finetune.picked", id=checkpoint))


def _try_it(name: str, result: FinetuneResult, load: Loader) -> None:
    with st.form(K(f"try.{name}")):
        text = st.text_area(
            t("finetune.try_text"), key=K(f"try_text.{name}"), height=80, placeholder=t("finetune.try_placeholder")
        )
        go_ = st.form_submit_button(t("finetune.classify"))
    if go_ and text.strip():
        try:
            fm = load(result)
        except ModelLoadError as e:
            st.error(t("finetune.cannot_load", error=explain(e)))
            return
        probs = [float(p) for p in classify(fm, [text.strip()])[0]]
        fig = try_chart(fm.label_names, probs)
        st.plotly_chart(presenter.scale(fig), key=K(f"try_chart.{name}"))
        record_prediction(name, result, text.strip(), list(fm.label_names), probs, fig)
        st.session_state[K(f"try_done.{name}")] = text.strip()
    elif go_:
        st.warning(t("finetune.type_first"))
    if text.strip() and st.session_state.get(K(f"try_done.{name}")) == text.strip():  # heads off, same text
        classify_heads(
            lambda: load(result),
            text.strip(),
            K(f"try.{name}"),
            made_from=result.model_dir,
        )


def compare(finished: list[tuple[str, FinetuneResult]], slicing: Slicing | None = None) -> None:
    """A table and overlaid curves across this session's finished runs, one comparison per task: a sequence run's
    accuracy and a token run's entity F1 measure different things, so they are never put side by side. Sequence
    runs then go two at a time, slice by slice (``slicing``: the page's keyword and regex; finetune_slices)."""
    tasks = [k for k in ("sequence", "token") if any(r.config.task == k for _, r in finished)]
    st.caption(t("finetune.compare_like" if len(tasks) == 1 else "finetune.compare_split"))
    for task in tasks:
        runs = [(n, r) for n, r in finished if r.config.task == task]
        if len(tasks) > 1:
            st.markdown(t("finetune.compare_task", task=t(f"finetune.task_opt.{task}"), n=len(runs)))
        df = pd.DataFrame([_compare_row(n, r) for n, r in runs])
        st.dataframe(
            df.rename(columns={c: t(f"finetune.col.{c}") for c in df.columns}),
            hide_index=True,
            key=K(f"compare.table.{task}"),
        )
        st.plotly_chart(
            presenter.scale(curves([(n, list(r.history) + list(r.evals)) for n, r in runs])),
            key=K(f"compare.curves.{task}"),
        )
        if task == "sequence":
            compare_two(runs, slicing)


def _compare_row(n: str, r: FinetuneResult) -> dict:
    """One run's row: what both tasks share, then its own task's measures (a token run has no pooling choice)."""
    head = dict(run=n, family=r.config.family, checkpoint=r.config.checkpoint, data=r.data_name)
    own = (
        dict(accuracy=round(r.accuracy, 4), macro_f1=round(r.macro_f1, 4), majority=round(r.majority_rate, 4))
        if r.token_metrics is None
        else dict(
            entity_f1=round(r.token_metrics.f1, 4),
            token_accuracy=round(r.token_metrics.token_accuracy, 4),
            majority=round(r.token_metrics.majority_accuracy, 4),
        )
    )
    tail = dict(
        steps=r.steps,
        seconds=round(r.train_seconds, 1),
        samples_per_s=round(r.samples_per_s, 1),
        params_m=round(r.params_total / 1e6, 2),
        trained_m=round(r.params_trainable / 1e6, 2),
        lr=r.config.lr,
        batch=r.config.batch_size,
        max_len=r.config.max_length,
    )
    if r.token_metrics is None:
        tail["pooling"] = r.config.pooling
    return {**head, **own, **tail, "device": r.device}


def _run_buttons(name: str, result) -> None:
    """A finished run's three buttons, for sequence and token runs alike: download its folder, pick it in the
    sidebar, or go back to the checkpoint it started from."""
    d1, d2, d3 = st.columns(3)
    download(
        d1,
        t("finetune.download"),
        lambda: zip_folder(result.model_dir),
        f"{name}.zip",
        "application/zip",
        K(f"dl.{name}"),
    )
    d2.button(
        t("finetune.pick"),
        key=K(f"pick.{name}"),
        on_click=_pick,
        args=(result.config.family, result.model_dir),
        help=t("finetune.pick_help"),
    )
    d3.button(
        t("finetune.orig"),
        key=K(f"orig.{name}"),
        on_click=_pick,
        args=(result.config.family, result.config.checkpoint),
        help=t("finetune.orig_help"),
    )


def _mix_view(name: str, result: FinetuneResult) -> None:
    if result.layer_weights is None:
        return
    st.markdown(t("finetune.mix.title"))
    st.plotly_chart(presenter.scale(layer_weights_chart(result)), key=K(f"mix.{name}"))
    top = max(range(len(result.layer_weights)), key=result.layer_weights.__getitem__)
    st.caption(
        t(
            "finetune.mix.caption",
            gamma=f"{result.layer_gamma:.2f}",
            top=t("finetune.mix.embeddings") if top == 0 else t("finetune.mix.layer", n=top),
            weight=f"{result.layer_weights[top]:.3f}",
            even=f"{1 / len(result.layer_weights):.3f}",
        )
    )


def token_result_view(name: str, result: FinetuneResult, load: Loader) -> None:
    """A token run: entity P/R/F1 and token accuracy against the majority tag, curves, per-type table, held-out
    sentences with predicted entities, try-it tagging, download and links."""
    tm = result.token_metrics
    c = st.columns(6)
    c[0].metric(
        t("finetune.tok.m.f1"),
        f"{tm.f1:.3f}",
        t("finetune.tok.m.vs_majority", delta=f"{tm.f1 - tm.majority_f1:+.3f}", tag=tm.majority_tag),
    )
    c[1].metric(t("finetune.tok.m.precision"), f"{tm.precision:.3f}")
    c[2].metric(t("finetune.tok.m.recall"), f"{tm.recall:.3f}")
    c[3].metric(
        t("finetune.tok.m.accuracy"),
        f"{tm.token_accuracy:.1%}",
        t("finetune.tok.m.vs_majority", delta=f"{tm.token_accuracy - tm.majority_accuracy:+.1%}", tag=tm.majority_tag),
    )
    c[4].metric(t("finetune.m.steps"), f"{result.steps}", stop_reason_label(result.stop_reason), delta_color="off")
    c[5].metric(t("finetune.m.time"), t("finetune.seconds", seconds=f"{result.train_seconds:,.1f}"))
    st.caption(
        t("finetune.tok.baseline", tag=tm.majority_tag, acc=f"{tm.majority_accuracy:.1%}", f1=f"{tm.majority_f1:.3f}")
    )
    if tm.words_truncated:
        st.caption(t("finetune.tok.truncated", n=tm.words_truncated, max_len=result.config.max_length))
    st.caption(
        t(
            "finetune.result_caption",
            device=result.device,
            precision=result.precision,
            trained=f"{result.params_trainable:,}",
            total=f"{result.params_total:,}",
            best=result.best_step,
        )
    )
    st.plotly_chart(
        presenter.scale(curves([(name, list(result.history) + list(result.evals))])), key=K(f"curves.{name}")
    )
    left, right = st.columns([2, 3])
    with left:
        st.markdown(t("finetune.tok.per_label"))
        cols = {k: t(f"finetune.tok.col.{k}") for k in ("label", "precision", "recall", "f1", "support")}
        st.dataframe(
            pd.DataFrame(list(tm.per_label)).rename(columns=cols),
            hide_index=True,
            key=K(f"per_label.{name}"),
            column_config={
                cols[k]: st.column_config.NumberColumn(format="%.3f") for k in ("precision", "recall", "f1")
            },
        )
    with right:
        st.markdown(t("finetune.tok.heldout"))
        types = tuple(sorted({n.split("-", 1)[1] for n in result.label_names if "-" in n}))
        st.html(heldout_sentences_html(tm, types))
    _mix_view(name, result)
    _tag_it(name, result, types, load)
    _run_buttons(name, result)


def _tag_it(name: str, result: FinetuneResult, types: tuple[str, ...], load: Loader) -> None:
    with st.form(K(f"tag.{name}")):
        text = st.text_input(
            t("finetune.tok.try_text"),
            key=K(f"tag_text.{name}"),
            max_chars=1000,
            placeholder=t("finetune.tok.try_placeholder"),
        )
        go_ = st.form_submit_button(t("finetune.tok.tag"))
    if go_ and not text.strip():
        st.warning(t("finetune.type_first"))
        return
    if not text.strip() or not (go_ or st.session_state.get(K(f"tag_done.{name}")) == text.strip()):
        return
    try:
        fm = load(result)
    except ModelLoadError as e:
        st.error(t("finetune.cannot_load", error=explain(e)))
        return
    tagged = tag(fm, [text.strip()])[0]
    st.session_state[K(f"tag_done.{name}")] = text.strip()
    if not tagged:
        st.warning(t("finetune.type_first"))
        return
    words, tags_ = [w for w, _, _ in tagged], [g for _, g, _ in tagged]
    st.html(TOKEN_CSS + f'<div class="tk-s">{tagged_html(words, tags_, types)}</div>')
    cw, ct, cp = (t(f"finetune.tok.col.{k}") for k in ("word", "tag", "probability"))
    st.dataframe(
        pd.DataFrame([{cw: w, ct: g, cp: p} for w, g, p in tagged]),
        hide_index=True,
        key=K(f"tag_table.{name}"),
        column_config={cp: st.column_config.ProgressColumn(min_value=0, max_value=1)},
    )

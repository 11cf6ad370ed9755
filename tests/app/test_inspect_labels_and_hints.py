"""Labels and hints on the Look-inside and Predict pages: tokens shown without Ġ/▁ (Fill-mask's charts and tables,
Attention, Attributions), the Switch-off-heads hint for a mask in sentence B, head importance's fast default and
its estimate, the query/key layout, the Speed chart's labels, the attributions estimate for a refused text, and an
attribution result marked out of date when its text changes."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from app.kit.render import speed_chart
from app.views.inspect import attention_figures as AF
from app.views.inspect.attribution import bar_chart, for_export, shown_tokens
from app.views.predict.results import fill_rows, topk_bar
from app.views.start.walkthrough.step_mlm import fill_figure
from core.base.paths import ASSETS
from core.inspect import attention as A
from core.inspect import attribution_estimate as AE
from core.inspect.attribution import attribute
from core.inspect.attribution_inputs import AttributionConfig
from core.models.loading import ModelSpec, load
from core.predict.fill_mask import FillMaskConfig, fill_mask
from core.runtime.backend import runner
from tests.app.conftest import new_app, open_page, page_path

MARKERS = ("Ġ", "▁")
BUNDLED = ("bert", "roberta", "albert", "distilbert")


def _clean(labels) -> bool:
    return all(not any(m in str(x) for m in MARKERS) for x in labels)


def _bundled(fam: str, task: str = "mlm", **kw):
    return load(ModelSpec(fam, str(ASSETS / "models" / f"{fam}-mini"), "cpu"), task, **kw)


# ---------------------------------------------------------------------------------------------- 1. tokens
@pytest.mark.parametrize("fam", BUNDLED)
def test_fill_mask_chart_and_table_labels_use_the_display_form(fam):
    lm = _bundled(fam)
    r = fill_mask(lm, FillMaskConfig("The capital of France is [MASK], a city on the [MASK].", top_k=8))
    pieces = [c.piece for m in r.masks for c in m.candidates]
    if fam in ("roberta", "albert"):
        assert any(mk in p for p in pieces for mk in MARKERS)  # the raw pieces do carry markers
    for m in r.masks:
        fig = topk_bar(m, "t")
        assert _clean(fig.layout.yaxis.ticktext) and len(fig.layout.yaxis.ticktext) == len(m.candidates)
        assert [c[0] for c in fig.data[0].customdata] == [
            c.piece.replace("<", "&lt;").replace(">", "&gt;") for c in m.candidates
        ]  # the raw piece in the hover
    for row in fill_rows([r]):
        assert _clean(row.values()), row
    if fam == "roberta":  # the walkthrough's masking step draws the same result with the same labels
        fig = fill_figure(r)
        for i, m in enumerate(r.masks, start=1):
            axis = fig.layout[f"yaxis{'' if i == 1 else i}"]
            assert _clean(axis.ticktext) and len(axis.ticktext) == len(m.candidates)
        assert _clean(a.text for a in fig.layout.annotations)


@pytest.mark.parametrize("fam", BUNDLED)
def test_attention_labels_use_the_display_form(fam):
    lm = _bundled(fam, "base", attentions=True)
    r = A.compute_attention(lm, A.AttentionConfig("Tokenization of unbelievable words in Paris."))
    assert _clean(r.labels) and len(r.labels) == len(r.tokens)


def test_attribution_charts_and_exports_use_the_display_form():
    lm = _bundled("roberta")
    res = attribute(
        lm,
        AttributionConfig(target="mask", text="The capital of France is <mask>, on the Seine.", methods=("saliency",)),
    )
    assert any(mk in p for p in res.tokens for mk in MARKERS)
    assert not AE.first_run(lm.model)  # a finished run: the next estimate on this model is not a first run's
    assert _clean(shown_tokens(res)) and _clean(for_export(res).tokens) and _clean([res.target_label])
    fig = bar_chart(res, "saliency")
    assert _clean(fig.data[0].x) and not _clean(fig.data[0].customdata)  # raw pieces in the hover only


def test_fill_mask_page_table_and_charts_show_no_markers(use_tiny_zoo):
    at = new_app()
    at.sidebar.selectbox(key="sidebar.family").set_value("roberta").run()
    at.switch_page(page_path("fill_mask")).run()
    at.text_area(key="fill_mask.text").set_value("The [MASK] sat on the [MASK] today.")
    next(b for b in at.button if b.label == "Predict").click().run()
    assert not at.exception, at.exception
    frames = at.dataframe
    assert frames and _clean(frames[0].value.astype(str).to_numpy().ravel())
    charts = at.get("plotly_chart")
    assert len(charts) == 2
    for c in charts:
        spec = json.loads(c.proto.spec)
        assert _clean(spec["layout"]["yaxis"].get("ticktext", [])), spec["layout"]["yaxis"]


# ---------------------------------------------------------------------------------------------- 2. attention hint
def _heads_tab(fam: str, text: str, text_b: str, pair: bool):
    from types import SimpleNamespace

    from app.views.inspect.ablation import attention_heads
    from core.inspect.attention import AttentionConfig
    from core.models.loading import ModelSpec, load

    spec = ModelSpec(fam, f"encoderlab/{fam}-mini", "cpu")
    attention_heads(SimpleNamespace(spec=spec), AttentionConfig(text, text_b, pair), lambda task: load(spec, task))


@pytest.mark.parametrize("fam", ["roberta", "distilbert"])
def test_switch_off_heads_says_where_the_mask_is(fam):
    at = AppTest.from_function(
        _heads_tab, args=(fam, "The cat sat down.", "It was [MASK].", True), default_timeout=60
    ).run()
    assert not at.exception, at.exception
    infos = " ".join(i.value for i in at.info)
    assert "Nothing to recompute" not in infos and "sentence B" in infos


def test_attention_page_with_a_mask_offers_the_heads(use_tiny_zoo):
    from tests.app.conftest import submit_attention

    at = submit_attention(open_page("attention"), "The cat sat on the [MASK].")
    assert not at.exception, at.exception
    assert not any("Nothing to recompute" in i.value for i in at.info)
    assert any("Recomputed: the fill-mask top 5" in m.value for m in at.markdown)
    # 3. head importance: the gradient ranking alone by default, the exhaustive check's estimate beside its box
    assert at.checkbox(key="attention.imp.exhaustive").value is False
    assert any("Ticked, the job takes about" in c.value for c in at.caption)


# ---------------------------------------------------------------------------------------------- 4. q/k layout
def test_qk_figure_keeps_tick_numbers_off_the_titles():
    n, d = 12, 16
    rng = np.random.default_rng(0)
    v = A.QKView(
        query=rng.normal(size=d),
        keys=rng.normal(size=(n, d)),
        product=rng.normal(size=(n, d)),
        scores=rng.normal(size=n),
        weights=np.full(n, 1 / n),
    )
    fig = AF.qk_figure(v, [f"t{i}" for i in range(n)], "t0")
    lay = fig.layout
    assert lay.xaxis.showticklabels is False  # the query strip's numbers (they sat on the lower titles)
    area = lay.height - lay.margin.t - lay.margin.b
    strip_bottom, lower_top = lay.yaxis.domain[0], lay.yaxis2.domain[1]
    gap_px = (strip_bottom - lower_top) * area
    lower_titles = [a for a in lay.annotations if abs(a.y - lower_top) < 1e-6]
    assert len(lower_titles) == 3 and all(a.yanchor == "bottom" for a in lower_titles)
    assert gap_px >= 36  # room for a title (16 px font) and nothing else between the strip and the plots below
    assert (lay.yaxis.domain[1] - strip_bottom) * area >= 20  # the strip itself stays visible


# ---------------------------------------------------------------------------------------------- 5. speed chart
def test_speed_chart_labels_sit_above_the_error_bars():
    rows = tuple(
        SimpleNamespace(label=f"m{i}", latency_ms=lat, latency_std_ms=sd, throughput=1.0)
        for i, (lat, sd) in enumerate([(12.0, 3.0), (5.0, 0.5), (30.0, 8.0)])
    )
    fig = speed_chart(SimpleNamespace(rows=rows))
    bar = next(tr for tr in fig.data if tr.type == "bar")
    assert not bar.text and bar.textposition != "outside"  # no value label for the error bar to strike through
    labels = next(tr for tr in fig.data if tr.type == "scatter")
    assert labels.mode == "text" and labels.textposition == "top center"
    assert list(labels.y) == [r.latency_ms + r.latency_std_ms for r in rows]
    assert list(labels.text) == ["12.0 ms", "5.0 ms", "30.0 ms"]
    assert fig.layout.yaxis.range[1] > max(labels.y)


# ---------------------------------------------------------------------------------------------- 6. estimate
def _estimate(text: str, checkpoint: str):
    import streamlit as st

    from app.views.inspect.attribution_widgets import show_estimate
    from core.inspect.attribution_inputs import AttributionConfig
    from core.models.loading import ModelSpec, load

    lm = load(ModelSpec("bert", checkpoint, "cpu"), "mlm")
    show_estimate(st, lm, AttributionConfig(target="mask", text=text, methods=("saliency",)))


def test_attribution_estimate_shows_the_refusal_not_a_time(tiny_models):
    ckpt = str(tiny_models["bert"])
    at = AppTest.from_function(_estimate, args=("No mask in this text at all.", ckpt), default_timeout=60).run()
    caps = " ".join(c.value for c in at.caption)
    assert "Explain would stop here" in caps and "forward passes" not in caps
    at = AppTest.from_function(_estimate, args=("The capital of France is [MASK].", ckpt), default_timeout=60).run()
    caps = " ".join(c.value for c in at.caption)
    assert "forward passes" in caps and "Explain would stop here" not in caps
    assert "the first run on this model takes longer" in caps  # a fresh model: its one-off costs are not timed


# ---------------------------------------------------------------------------------------------- 7. stale result
def test_attribution_result_is_marked_stale_when_the_text_changes(use_tiny_zoo):
    at = new_app()
    at.switch_page(page_path("attribution")).run()
    at.multiselect(key="attribution.one.methods").set_value(["saliency"]).run()
    next(b for b in at.button if b.label == "Explain").click().run()
    job = runner().get(at.session_state["attribution.attribution.job"])
    runner().wait(job, timeout=120)
    at.run()
    assert any("Explaining" in m.value for m in at.markdown)
    at.text_area(key="attribution.text.mask").set_value("Rome is the [MASK] of Italy.").run()  # no Explain
    assert not at.exception, at.exception
    assert not any("Explaining" in m.value for m in at.markdown)
    assert any("so it is not shown" in i.value for i in at.info)
    at.text_area(key="attribution.text.mask").set_value(at.session_state["attribution.attribution.run"][1].text)
    at.text_input(key="attribution.one.word").set_value("city").run()  # Word A changes too
    assert any("so it is not shown" in i.value for i in at.info)

"""Workshop mode, the shared parts: language, links (URL state) for the sidebar, presenter view, session report."""

from __future__ import annotations

import plotly.graph_objects as go
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest

from app.kit import report
from app.kit.i18n import catalog
from tests.app.conftest import ROOT, new_app, open_page


def _open(params: dict[str, str]) -> AppTest:
    return open_page(None, params)


def _warnings(at) -> str:
    return " ".join(w.value for w in at.warning)


def test_chinese_from_the_link(use_tiny_zoo):
    at = _open({"lang": "zh"})
    assert at.session_state["ui.lang"] == "zh"
    labels = [s.label for s in at.sidebar.selectbox]
    assert catalog()["sidebar.family"]["zh"] in labels and "Family" not in labels
    assert catalog()["sidebar.presenter"]["zh"] in [t.label for t in at.sidebar.toggle]


def test_switching_language_in_the_sidebar(use_tiny_zoo):
    at = new_app()
    at.sidebar.selectbox(key="ui.lang").set_value("zh").run()
    assert not at.exception
    assert catalog()["sidebar.checkpoint"]["zh"] in [s.label for s in at.sidebar.selectbox]
    assert at.query_params["lang"] == ["zh"] or at.query_params["lang"] == "zh"


def test_link_restores_the_model(use_tiny_zoo):
    at = _open({"family": "roberta", "model": "encoderlab/roberta-mini"})
    assert at.session_state["sidebar.family"] == "roberta"
    assert at.session_state["sidebar.checkpoint"] == "encoderlab/roberta-mini"
    assert not _warnings(at)


def test_stale_or_bad_link_falls_back_with_a_notice(use_tiny_zoo):
    at = _open({"family": "gpt2", "model": "/tmp/finetuned-in-another-session", "device": "tpu"})
    text = _warnings(at)
    assert "`family`" in text and "`model`" in text and "`device`" in text
    assert at.session_state["sidebar.family"] in ("bert", "roberta", "albert", "distilbert")
    assert at.session_state["sidebar.checkpoint"].startswith("encoderlab/")
    assert at.session_state["sidebar.device"] == "auto"


def test_the_url_follows_the_picker(use_tiny_zoo):
    at = new_app()
    at.sidebar.selectbox(key="sidebar.family").set_value("albert").run()
    at.run()  # the URL is written at the start of each run from the state the widgets left
    qp = at.query_params
    value = qp["family"]
    assert (value[0] if isinstance(value, list) else value) == "albert"


def test_presenter_view_and_pinned_model(use_tiny_zoo):
    at = _open({"present": "1", "pin": "1", "family": "albert"})
    assert not at.exception
    assert at.session_state["ui.present"] is True
    picker = at.sidebar.selectbox(key="sidebar.family")
    assert picker.disabled and picker.value == "albert"
    assert any("font-size" in h.proto.body for h in at.get("html"))  # the projector stylesheet
    assert not [r for r in at.sidebar.radio if r.key == "sidebar.device"]  # configuration folded away


def test_report_html_is_one_offline_file_with_png_figures():
    fig = go.Figure(go.Bar(x=["a", "b"], y=[1, 2]))
    entry = report.Entry(
        "e1",
        "Fill-mask",
        "The capital of France is [MASK].",
        {"model": "encoderlab/bert-mini"},
        ({"mask": 1, "piece": "paris", "probability": 0.91},),
        "",
        (fig.to_json(),),
        "now",
    )
    html = report.build_html([entry])
    assert html.startswith("<!doctype html>") and "paris" in html and "encoderlab/bert-mini" in html
    assert "data:image/png;base64," in html  # drawn by kaleido through the local Chromium
    assert "<script" not in html and "http" not in html.replace("http-equiv", "")  # nothing to fetch


def test_report_records_replace_by_id_and_are_capped():
    import streamlit as st

    st.session_state.clear()
    for i in range(report.MAX_ENTRIES + 5):
        report.record(f"id{i % (report.MAX_ENTRIES + 3)}", "p", f"t{i}", {"i": i})
    items = report.entries()
    assert len(items) == report.MAX_ENTRIES
    assert len({e.entry_id for e in items}) == len(items)
    st.session_state.clear()


def test_chinese_checkpoints_are_suggested_or_explained(use_tiny_zoo):
    """With 中文 chosen the sidebar names the Chinese checkpoints; offline it says why they cannot be had."""
    at = _open({"lang": "zh"})
    text = " ".join(c.value for c in at.sidebar.caption) + " ".join(i.value for i in at.sidebar.info)
    assert "bert-base-chinese" in text and "hfl/chinese-roberta-wwm-ext" in text


def test_report_download_counts_this_runs_results(use_tiny_zoo):
    """The sidebar's report panel is drawn after the page, so a result recorded in this run is counted."""
    at = _open({"fill_mask.text": "The cat sat on the [MASK]."})
    at.switch_page(str(ROOT / "pages" / "fill_mask.py")).run()
    assert not at.exception, at.exception
    n = len(at.session_state["report.entries"])
    assert n >= 1
    labels = [e.label for e in at.sidebar.expander]
    assert catalog()["sidebar.report"]["en"].format(n=n) in labels, labels


def test_url_field_parsing():
    import pytest

    from app.kit.urlstate import Field

    assert Field("k", "int", lo=1, hi=50).parse("12") == 12
    assert Field("k", "float", lo=0.0, hi=1.0).parse("0.25") == 0.25
    assert Field("k", "bool").parse("1") is True and Field("k", "bool").parse("off") is False
    assert Field("k", "ints", choices=range(12)).parse("0,3,11") == [0, 3, 11]
    assert Field("k", "strs", choices=("a|x", "b|y")).parse("b|y") == ["b|y"]
    assert Field("k", "ints").render([1, 2]) == "1,2" and Field("k", "bool").render(False) == "0"
    for field, raw in [
        (Field("k", "int", lo=1, hi=50), "999"),
        (Field("k", "int"), "three"),
        (Field("k", "bool"), "maybe"),
        (Field("k", choices=("a", "b")), "c"),
        (Field("k", "ints", choices=range(12)), "3,12"),
        (Field("k", max_len=5), "too long"),
    ]:
        with pytest.raises(ValueError):
            field.parse(raw)


# ---------------------------------------------------------------------------------------------- report figures
def _report_figures() -> dict[str, tuple[go.Figure, list[str]]]:
    """The figures the pages put into the report, drawn by the pages' own functions, with the tick labels each
    must show: fill-mask bars (the words), an attention map (token rows), a confusion matrix (class names),
    attributions side by side (method names)."""
    from types import SimpleNamespace as NS

    import numpy as np

    from app.views.inspect import attention_figures as render_attention
    from app.views.inspect import attribution as render_attribution
    from app.views.predict import results as render_predict
    from app.views.train import finetune_charts as render_finetune

    words = ["paris", "lyon", "marseille", "toulouse", "bordeaux"]
    mask = NS(
        candidates=[
            NS(piece=w, prob=p, token_id=i) for i, (w, p) in enumerate(zip(words, (0.5, 0.2, 0.1, 0.05, 0.02)))
        ],
        original=None,
    )
    tokens = ["[CLS]", "the", "capital", "of", "france", "is", "[MASK]", ".", "[SEP]"]
    att = render_attention.heatmap(np.full((9, 9), 1 / 9), tokens, tokens, "layer 1 · head 1")
    classes = ("negative", "neutral", "positive")
    cm = render_finetune.confusion(NS(label_names=classes, confusion=[[5, 1, 0], [2, 3, 1], [0, 1, 9]]))
    methods = [NS(method=k, scores=np.linspace(-1, 1, len(tokens))) for k in ("lig", "saliency", "ixg", "occlusion")]
    res = NS(tokens=tuple(tokens), methods=methods)
    side = render_attribution.methods_heatmap(res)
    return {
        "fill-mask": (render_predict.topk_bar(mask, "mask 1"), [f"{w}" for w in words]),
        "attention": (att, tokens),
        "confusion": (cm, list(classes)),
        "methods": (side, [render_attribution.method_label(m.method) for m in methods]),
    }


def test_report_figures_keep_their_axis_titles_and_tick_labels():
    """Issue 14: in the report the fill-mask bars lost their words, the attention map its rows, the confusion
    matrix its class names, and method names were cut ("…ed Gradients"). Chromium lays out exactly the figure
    the report hands kaleido and measures every tick label and axis title: each must be whole and inside."""
    import plotly.io as pio
    from playwright.sync_api import sync_playwright

    from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS

    figures = _report_figures()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page()
        for name, (fig, expected) in figures.items():
            drawn = report.report_figure(fig.to_json())
            page.set_content(pio.to_html(drawn, include_plotlyjs=True, full_html=True, config={"staticPlot": True}))
            page.wait_for_selector(".main-svg")
            boxes = page.evaluate("""() => {
                const svg = document.querySelector('.main-svg').getBoundingClientRect();
                const pick = sel => [...document.querySelectorAll(sel)].map(e => {
                    const b = e.getBoundingClientRect();
                    return {text: e.textContent, left: b.left - svg.left, right: b.right - svg.left,
                            top: b.top - svg.top, bottom: b.bottom - svg.top};
                });
                return {w: svg.width, h: svg.height, ticks: pick('.xtick text, .ytick text'),
                        titles: pick('.xtitle, .ytitle, .gtitle')};
            }""")
            labels = [b["text"].strip() for b in boxes["ticks"]]
            for want in expected:
                assert any(want in got for got in labels), (name, want, labels)
            for b in boxes["ticks"] + boxes["titles"]:
                assert b["left"] >= 0 and b["right"] <= boxes["w"] and b["top"] >= 0 and b["bottom"] <= boxes["h"], (
                    name,
                    b,
                    boxes["w"],
                    boxes["h"],
                )
            titles = {b["text"] for b in boxes["titles"]}
            for axis in ("xaxis", "yaxis"):
                title = getattr(drawn.layout, axis).title.text
                if title:
                    assert title in titles, (name, axis, title, titles)
        browser.close()
    # And the report draws them all as PNG.
    pngs, error = report.figure_pngs([f.to_json() for f, _ in figures.values()])
    assert error is None and all(p and p.startswith(b"\x89PNG") for p in pngs)


def test_a_report_figure_that_cannot_be_drawn_is_logged_and_said(monkeypatch):
    """Issue 22: a PNG failure was dropped silently; now it is logged and the report names the reason."""
    import logging

    import plotly.io as pio

    class Keep(logging.Handler):
        records: list = []

        def emit(self, record):
            self.records.append(record)

    def broken(*a, **k):
        raise RuntimeError("no browser found")

    monkeypatch.setattr(pio, "write_images", broken)
    fig = go.Figure(go.Bar(x=["a", "b"], y=[1, 3], name="a figure never drawn before"))
    entry = report.Entry("e1", "Fill-mask", "t", {}, (), "", (fig.to_json(),), "now")
    keep = Keep(logging.WARNING)
    logging.getLogger("app.kit.report").addHandler(keep)
    try:
        html = report.build_html([entry])
    finally:
        logging.getLogger("app.kit.report").removeHandler(keep)
    assert "no browser found" in html and "could not be drawn as PNG" in html
    assert any("no browser found" in r.getMessage() for r in keep.records)


def test_report_is_prepared_with_progress_then_downloaded(use_tiny_zoo, monkeypatch):
    """Issue 14: the report download took 19-31 s behind a tiny spinner. Now *Prepare the report* draws it with a
    progress bar, and the download button serves exactly what was prepared until the session records more. The
    button gives the browser nothing to fetch until clicked (app.kit.download_button.download): its click hands over the
    prepared file, outside the script run."""
    on_click = {}  # file name -> what a click runs (Streamlit's own registration, watched)
    add = MediaFileManager.add_deferred

    def watched(self, data_callable, mimetype, coordinates, file_name=None, **kw):
        on_click[file_name] = data_callable
        return add(self, data_callable, mimetype, coordinates, file_name, **kw)

    monkeypatch.setattr(MediaFileManager, "add_deferred", watched)
    at = _open({"fill_mask.text": "The cat sat on the [MASK]."})
    at.switch_page(str(ROOT / "pages" / "fill_mask.py")).run()
    assert not at.exception, at.exception
    assert not [b for b in at.sidebar.button if b.key == "sidebar.report_dl"]  # nothing built yet
    next(b for b in at.sidebar.button if b.key == "sidebar.report_build").click().run()
    assert not at.exception, at.exception
    made_from, html = at.session_state["sidebar.report_built"]
    assert len(made_from) == len(at.session_state["report.entries"]) >= 1
    assert b"<img" in html and b"The cat sat on the" in html
    at.run()  # the page records the same result again: the prepared file still matches
    assert not at.exception, at.exception
    assert not [b for b in at.sidebar.button if b.key == "sidebar.report_build"]
    (button,) = [b for b in at.sidebar.get("download_button") if b.proto.label.startswith("Download report")]
    assert button.proto.deferred_file_id and not button.proto.url
    assert on_click["encoderlab-session.html"]() == html


def test_report_progress_reaches_one_and_figures_are_cached(monkeypatch):
    """build_html reports the share of figures drawn; a figure drawn once is not drawn again."""
    import time

    import plotly.io as pio

    figs = [go.Figure(go.Bar(x=["a", "b"], y=[1, time.time() + i])).to_json() for i in range(3)]
    seen: list[float] = []
    pngs, error = report.figure_pngs(figs, seen.append)
    assert error is None and all(p.startswith(b"\x89PNG") for p in pngs)
    assert seen and seen[-1] == 1.0 and seen == sorted(seen)

    def no_browser(*a, **k):
        raise AssertionError("drawn again")

    monkeypatch.setattr(pio, "write_images", no_browser)
    again, error = report.figure_pngs(figs)
    assert error is None and again == pngs

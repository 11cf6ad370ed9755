"""The session report: Markdown rendered, long axis titles kept whole, the views that record,
the panel on every page state, and a follower's count."""

from __future__ import annotations

from app.kit import report
from tests.app.conftest import page_for, page_path
from tests.app.test_corpus_search_page import CORPUS, _build, cs_env  # noqa: F401 - the fixture


def _panel_labels(at) -> list[str]:
    return [e.label for e in at.sidebar.expander]


def test_corpus_search_keeps_the_report_panel_before_a_word_is_picked(cs_env):  # noqa: F811
    at = page_for("corpus_search")
    at.radio(key="corpus_search.source").set_value("paste").run()
    at.text_area(key="corpus_search.text").set_value(CORPUS)
    _build(at, cs_env)
    at.text_input(key="corpus_search.query").set_value("The bank of the river was muddy.").run()
    assert at.pills[0].value is None  # no word picked: the page stops early
    assert any(label.startswith("Session report") for label in _panel_labels(at)), _panel_labels(at)
    # a word picked: the result is recorded, and counted
    at.pills[0].set_value(at.pills[0].options.index("river")).run()
    items = at.session_state[report.ENTRIES]
    assert any(k.startswith("corpus_search:") for k in items), list(items)
    assert "Session report · 1 recorded" in _panel_labels(at)


def test_a_page_that_ends_early_keeps_the_report_panel():
    """Attention with a refused text ends the page early (app.kit.flow.end_page): the sidebar's report panel, drawn
    after the page, is still there (st.stop() made every later Streamlit call raise, so it vanished)."""
    at = page_for("attention")
    at.text_area(key="attention.text").set_value("")
    at.button(key="FormSubmitter:attention.form-Show attention").click().run()
    assert not at.exception, at.exception
    assert at.error, "the empty text is refused on the page"
    assert any(label.startswith("Session report") for label in _panel_labels(at)), _panel_labels(at)


def test_no_page_calls_st_stop():
    """st.stop() would end the frame around the page too (the report panel, the room's publishing): pages end early
    with app.kit.flow.end_page."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = [
        f"{p.relative_to(root)}:{n.lineno}"
        for d in ("pages", "app")
        for p in sorted((root / d).rglob("*.py"))
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "stop"
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "st"
    ]
    assert not found, found


# ---------------------------------------------------------------------------------------------- the file itself
def test_markdown_in_titles_texts_and_cells_is_rendered_not_shown_raw():
    from app.kit.render import as_text

    e = report.Entry(
        "e1",
        "Walkthrough",
        "6. **Fine-tuning**",
        {"text": "2 **3**"},
        rows=({"run": "**10×** run", "n": 3},),
        text=f"**The 10× run did worse**: typed `{as_text('a*b*c <i>x</i>')}`\n- one\n- two",
    )
    html = report.build_html([e])
    assert "**" not in html.split("<table>", 1)[1].split("</table>", 1)[1]  # outside the inputs (typed as is)
    assert "<h2>6. <strong>Fine-tuning</strong></h2>" in html
    assert "<strong>The 10× run did worse</strong>" in html and "• one<br>• two" in html
    assert "a*b*c &lt;i&gt;x&lt;/i&gt;" in html and "<i>" not in html  # user text: its characters, never markup
    assert "<td><strong>10×</strong> run</td>" in html
    assert "<td>2 **3**</td>" in html  # an input is the user's own text, shown as typed


def test_a_long_vertical_axis_title_is_broken_to_fit_its_plot():
    """The attribution bars (320 px high) had a y title longer than the plot: kaleido cut it at both ends."""
    import plotly.graph_objects as go

    title = "Integrated Gradients (Sundararajan et al.) attribution"
    fig = go.Figure(go.Bar(x=["a", "b"], y=[1, -1])).update_layout(
        yaxis_title=title, height=320, margin=dict(t=30, b=10)
    )
    drawn = report.report_figure(fig.to_json())
    lines = drawn.layout.yaxis.title.text.split("<br>")
    assert len(lines) >= 2 and " ".join(lines) == title
    room = 0.6 * (320 - 30 - 10)
    assert all(report._text_px(ln, 14) <= room for ln in lines if " " in ln)
    short = report.report_figure(go.Figure().update_layout(yaxis_title="loss").to_json())
    assert short.layout.yaxis.title.text == "loss"
    assert "<br>" in report.wrap_title("积分梯度归因值积分梯度归因值积分梯度归因值", 100)


def test_a_followers_count_says_which_results_it_only_followed():
    """A follower's screen runs the presenter's inputs: right after joining it had "4 recorded", though it did
    nothing itself. Entries recorded while following are marked, and the panel says how many."""
    from streamlit.testing.v1 import AppTest

    from app.room import session as room_session

    assert (report.ROOM_ROLE, report.ROOM_FOLLOWING, report.FOLLOWER) == (
        room_session.ROLE,
        room_session.FOLLOWING,
        room_session.FOLLOWER,
    )

    def script():
        import streamlit as st

        from app.kit import report

        st.session_state["room.role"], st.session_state["room.following"] = "follower", True
        report.record("a", "Fill-mask", "followed", {})
        st.session_state["room.following"] = False  # broke away: its own result
        report.record("b", "Fill-mask", "own", {})
        st.write(report.panel_label(report.entries()))

    at = AppTest.from_function(script, default_timeout=60).run()
    assert not at.exception, at.exception
    (label,) = (m.value for m in at.markdown)
    assert label == "Session report · 2 recorded (1 of them shown by following the room's presenter)"
    html = report.build_html(list(at.session_state[report.ENTRIES].values()))
    assert html.count("followed from the room") == 1


# ---------------------------------------------------------------------------------------------- the views record
def _entries(at) -> dict:
    return at.session_state[report.ENTRIES] if report.ENTRIES in at.session_state else {}


def test_attention_map_in_the_report_has_axis_titles(use_tiny_zoo):
    import json

    from tests.app.conftest import submit_attention

    at = submit_attention(page_for("attention"), "The cat sat on the [MASK].")
    entry = next(e for k, e in _entries(at).items() if k.startswith("attention:"))
    layout = json.loads(entry.figures[0])["layout"]
    assert layout["xaxis"]["title"]["text"] == "key: the token attended to"
    assert layout["yaxis"]["title"]["text"] == "query: the token attending"


def test_layer_lens_and_projector_results_are_recorded(use_tiny_zoo, tmp_path, monkeypatch):
    from tests.app.conftest import click
    from tests.app.test_projector_page import _fill

    monkeypatch.setenv("ENCODERLAB_LENS_DIR", str(tmp_path / "lens"))
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    at = page_for("lens")
    at.text_area(key="lens.text").set_value("The cat sat on the [MASK].")
    click(at, "Look through the layers")
    (lens,) = [e for k, e in _entries(at).items() if k.startswith("lens:")]
    assert lens.page == "Layer lens" and len(lens.figures) == 2 and "first choice" in lens.text
    at.run()  # a rerun draws the same result: the same entry, not a copy
    assert len([k for k in _entries(at) if k.startswith("lens:")]) == 1
    at.switch_page(page_path("projector")).run()
    _fill(at)
    (proj,) = [e for k, e in _entries(at).items() if k.startswith("projector:")]
    assert len(proj.figures) == 2 and len(proj.rows) == 3 and "bank" in proj.title


def _show_ablation():
    from app.views.inspect.ablation import show_prediction
    from core.inspect.ablation_predict import AblatedPrediction

    p = AblatedPrediction(
        "fill_mask",
        ((0, 1), (1, 0)),
        "zero",
        ("mat", "floor"),
        (0.6, 0.2),
        (0.3, 0.4),
        "mat",
        "floor",
        -0.3,
        (("floor", 0.4), ("mat", 0.3)),
    )
    show_prediction(p, 2, key="fill_mask.ab")


def _show_importance():
    import numpy as np

    from app.views.inspect.ablation import show_importance
    from core.inspect.head_importance import ImportanceResult

    r = ImportanceResult(
        "encoderlab/bert-mini",
        "mlm",
        np.ones((2, 2)),
        np.ones((2, 2)),
        0.5,
        (0.0, 0.5, 1.0),
        (2.0, 2.5, 4.0),
        (2.0, 3.0, 4.0),
        "MLM loss",
        16,
        1.0,
        4.0,
    )
    show_importance(r, key="attention.imp.7")


def test_switch_off_heads_and_head_importance_are_recorded():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_show_ablation, default_timeout=60).run()
    assert not at.exception, at.exception
    (ab,) = _entries(at).values()
    assert ab.page == "Switch off heads" and "mat → floor" in ab.title and len(ab.rows) == 2 and ab.figures
    at = AppTest.from_function(_show_importance, default_timeout=60).run()
    assert not at.exception, at.exception
    (imp,) = _entries(at).values()
    assert imp.page == "Head importance" and len(imp.figures) == 3

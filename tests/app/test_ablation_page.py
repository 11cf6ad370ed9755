"""AppTest: switching heads off on Attention, Fill-mask and Sentence pair; the word-level and selection views;
the head-importance job (tiny zoo)."""

from __future__ import annotations

import json

import pytest

from tests.app.conftest import page_for, submit_attention

RESULT = {
    "attention": "attention.ab.result",
    "fill_mask": "fill_mask.ab.result",
    "sentence_pair": "sentence_pair.ab.result",
}


def _titles(at) -> list[str]:
    """Every chart's title, read as one line (app.kit.presenter.scale wraps a long title with <br>s)."""
    return [
        json.loads(el.proto.spec)["layout"].get("title", {}).get("text", "").replace("<br>", " ")
        for el in at.get("plotly_chart")
    ]


def _apply(at, scope: str, spec: str):
    at.text_input(key=f"{scope}.ab.spec").set_value(spec)
    at.button(key=f"FormSubmitter:{scope}.ab.form-Apply").click().run()
    assert not at.exception, at.exception
    return at


def _errors(at) -> list[str]:
    return [e.value for e in at.error]


@pytest.fixture()
def attention_at(use_tiny_zoo):
    """A fresh session of its own on the Attention page (tiny zoo) with a masked sentence shown: no test sees
    another's choices."""
    return submit_attention(page_for("attention"), "The cat sat on the [MASK] today.")


def test_attention_tabs_and_switching_one_head_off(attention_at):
    at = attention_at
    labels = [tab.label for tab in at.tabs]
    assert {"Words", "Switch off heads", "Head importance"} <= set(labels)
    assert not at.metric  # every head on: nothing recomputed yet
    assert any("Every head is on" in i.value for i in at.info)
    _apply(at, "attention", "l0h0")
    assert not _errors(at)
    res = at.session_state[RESULT["attention"]]
    assert res.kind == "fill_mask" and res.heads == ((0, 0),) and res.mode == "zero"
    i = res.labels.index(res.answer_before)
    assert res.after[i] != res.before[i] and res.delta == pytest.approx(res.after[i] - res.before[i])
    assert at.session_state["attention.ab.L0"] == [0]  # the grid follows the text box
    assert any(m.label.startswith("P(") for m in at.metric)
    assert any("Switched off (1): L0H0" in c.value for c in at.caption)
    assert "Before and after" in _titles(at)


def test_bad_spec_says_what_is_valid_and_keeps_the_grid(attention_at):
    at = _apply(attention_at, "attention", "l0h0")  # a good choice first
    assert at.session_state["attention.ab.L0"] == [0]
    at = _apply(at, "attention", "L7H1")
    assert any("there is no layer 7" in e and "2 layers of 4 heads" in e for e in _errors(at)), _errors(at)
    _apply(at, "attention", "head one")
    assert any("'head' is not a head" in e for e in _errors(at)), _errors(at)
    assert at.session_state["attention.ab.L0"] == [0]  # the last good choice still holds


def test_grid_click_and_mean_mode_recompute(attention_at):
    at = _apply(attention_at, "attention", "L0H0")  # one head off already; the grid adds another
    assert at.session_state["attention.ab.L0"] == [0] and not at.session_state["attention.ab.L1"]
    at.pills(key="attention.ab.L1").select(3).run()
    assert not at.exception and not _errors(at)
    assert at.text_input(key="attention.ab.spec").value == "L0H0, L1H3"  # the text box follows the grid
    assert at.session_state[RESULT["attention"]].heads == ((0, 0), (1, 3))
    at.button_group(key="attention.ab.mode").set_value("mean").run()
    assert not at.exception and not _errors(at)
    assert at.session_state[RESULT["attention"]].mode == "mean"
    at.button(key="attention.ab.clear").click().run()
    assert at.text_input(key="attention.ab.spec").value == "" and not at.metric


def test_attention_without_a_mask_says_how_to_get_a_prediction(attention_at):
    at = submit_attention(attention_at, "The cat sat on the mat.")
    assert any("write [MASK]" in i.value and "NSP" in i.value for i in at.info)
    assert not at.metric  # no result of the old text stays on screen
    at = submit_attention(attention_at, "The cat sat on the mat.", pair=True, text_b="It was warm.")
    _apply(at, "attention", "L1*")
    res = at.session_state[RESULT["attention"]]
    assert res.kind == "pair" and res.heads == ((1, 0), (1, 1), (1, 2), (1, 3))


def test_word_level_view_and_selection(attention_at):
    at = submit_attention(attention_at, "An unbelievably sleepy cat.")
    titles = _titles(at)
    assert any(t.startswith("Word-level attention") for t in titles), titles
    assert any("merged from several pieces" in c.value and "unbelievably" in c.value for c in at.caption)
    words = at.multiselect(key="attention.w.sel.words")
    words.set_value([1, 2]).run()
    assert not at.exception
    assert any(t.startswith("Mean attention from") for t in _titles(at)), _titles(at)
    at.radio(key="attention.w.direction").set_value("to").run()
    at.radio(key="attention.w.how").set_value("sum").run()
    assert any(t.startswith("Attention to") and "summed" in t for t in _titles(at)), _titles(at)
    at.button_group(key="attention.w.level").set_value("tokens").run()
    assert any(t.startswith("Token-level attention") for t in _titles(at))


def test_fill_mask_expander_recomputes_the_result(use_tiny_zoo):
    at = page_for("fill_mask")
    at.text_area(key="fill_mask.text").set_value("The cat sat on the [MASK].")
    at.button(key="FormSubmitter:fill_mask.form-Predict").click().run()
    assert not at.exception
    assert any(e.label == "Switch off heads" for e in at.expander)
    _apply(at, "fill_mask", "L0*")
    res = at.session_state[RESULT["fill_mask"]]
    assert res.kind == "fill_mask" and len(res.heads) == 4 and res.before_result.text == "The cat sat on the [MASK]."
    assert res.after != res.before
    # a new text: the old before/after is not shown under it
    at.text_area(key="fill_mask.text").set_value("A dog ran to the [MASK].")
    at.button(key="FormSubmitter:fill_mask.form-Predict").click().run()
    assert at.session_state[RESULT["fill_mask"]].before_result.text == "A dog ran to the [MASK]."


def test_sentence_pair_expander_recomputes_the_pair_probability(use_tiny_zoo):
    at = page_for("sentence_pair", "albert")
    at.button(key="FormSubmitter:sentence_pair.form-Score with Sentence Order Prediction").click().run()
    assert not at.exception, at.exception
    _apply(at, "sentence_pair", "*H1")
    assert not _errors(at)
    res = at.session_state[RESULT["sentence_pair"]]
    assert res.kind == "pair" and res.heads == ((0, 1), (1, 1)) and len(res.labels) == 2
    assert sum(res.after) == pytest.approx(1.0) and res.after != res.before


def test_head_importance_job_draws_both_maps_and_the_pruning_curve(attention_at):
    from core.runtime.backend import runner
    from core.runtime.jobs import DONE

    at = attention_at
    at.selectbox(key="attention.imp.n_texts").set_value(16).run()
    at.checkbox(key="attention.imp.exhaustive").check().run()  # off by default (the gradient ranking alone)
    assert at.checkbox(key="attention.imp.pruning").value is False  # the curves too (#46: most of a default run)
    at.checkbox(key="attention.imp.pruning").check().run()
    assert any("passes over the 16 sentences" in c.value for c in at.caption)  # the curves' own estimate
    at.button(key="attention.imp.go").click().run()
    assert not at.exception and not _errors(at), _errors(at)
    jid = at.session_state["jobs.attention.importance"][-1]
    job = runner().wait(runner().get(jid), timeout=240)
    assert job.status == DONE, job.error
    at.run()
    titles = _titles(at)
    assert "Gradient importance |∂loss/∂gate|" in titles
    assert any(t.startswith("Loss increase, one head off · Spearman ρ = ") for t in titles), titles
    assert "Pruning: MLM loss as heads are removed" in titles
    assert any("Michel et al. 2019" in c.value for c in at.caption)
    assert any("16 texts" in c.value and "exhaustive ablation in" in c.value for c in at.caption)
    at.checkbox(key="attention.imp.exhaustive").uncheck().run()  # other options: that job's maps are not shown
    assert "Gradient importance |∂loss/∂gate|" not in _titles(at)

"""Issue 14, major 1: a result is shown only while it matches the current model, target, input and options,
and an error clears it (Fill-mask, Compare, Sentence pair, Speed, Attention)."""

from __future__ import annotations

from tests.app.conftest import click, page_for

STALE = "The last result was made for another model"


_page, _submit = page_for, click  # shared in tests/app/conftest.py


def _joint(at) -> list[str]:
    return [m.value for m in at.markdown if "Joint fill" in m.value]


def test_fill_mask_result_follows_text_and_model(use_tiny_zoo):
    at = _page("fill_mask")
    at.text_area(key="fill_mask.text").set_value("The cat sat on the [MASK].")
    _submit(at, "Predict")
    assert _joint(at) and at.get("plotly_chart")
    at.selectbox(key="fill_mask.example").set_value("Paris is the [MASK] of [MASK].").run()  # the text changes
    assert not _joint(at) and not at.get("plotly_chart")
    _submit(at, "Predict")
    assert _joint(at)
    at.sidebar.selectbox(key="sidebar.family").set_value("albert").run()
    assert not _joint(at)
    at.sidebar.selectbox(key="sidebar.family").set_value("bert").run()  # the same model and text again
    assert _joint(at)
    at.text_area(key="fill_mask.text").set_value("no mask here")
    _submit(at, "Predict")
    assert at.error and not _joint(at)


def test_fill_mask_word_result_follows_sentence_and_model(use_tiny_zoo):
    at = _page("fill_mask")
    at.text_input(key="fill_mask.plain").set_value("The embedding was unbelievable.").run()
    at.selectbox(key="fill_mask.word").set_value(1)
    _submit(at, "Mask it and predict")
    assert any("Masked word" in c.value for c in at.caption)
    at.sidebar.selectbox(key="sidebar.family").set_value("albert").run()
    assert not any("Masked word" in c.value for c in at.caption)


def test_compare_result_follows_models_and_text(use_tiny_zoo):
    at = _page("fill_mask")
    _submit(at, "Compare")
    assert len([m for m in at.metric if m.label == "latency"]) == 2
    at.multiselect(key="fill_mask.cmp_models").set_value(["bert|encoderlab/bert-mini"])
    _submit(at, "Compare")
    assert at.error and not [m for m in at.metric if m.label == "latency"]
    at.multiselect(key="fill_mask.cmp_models").set_value(
        ["bert|encoderlab/bert-mini", "roberta|encoderlab/roberta-mini"]
    ).run()
    assert not [m for m in at.metric if m.label == "latency"]  # cleared by the error


def test_sentence_pair_result_follows_model_and_error(use_tiny_zoo):
    at = _page("sentence_pair")
    _submit(at, "Score with Next Sentence Prediction")
    assert len(at.metric) == 3
    at.sidebar.selectbox(key="sidebar.family").set_value("albert").run()
    assert not at.metric and not at.get("plotly_chart")
    at.sidebar.selectbox(key="sidebar.family").set_value("bert").run()
    assert len(at.metric) == 3
    at.text_area(key="sentence_pair.a").set_value(" ")
    _submit(at, "Score with Next Sentence Prediction")
    assert at.error and not at.metric


def test_sentence_pair_batch_follows_rows(use_tiny_zoo):
    from core.runtime.backend import runner

    at = _page("sentence_pair")
    at.text_area(key="sentence_pair.csv").set_value("a,b,label\nShe sat down.,Then she slept.,1\nx y,z w,0\n")
    _submit(at, "Score all rows")
    job = max((j for j in runner().jobs() if j.name == "Next Sentence Prediction on 2 pairs"), key=lambda j: j.id)
    runner().wait(job, timeout=120)
    at.run()
    assert {m.label for m in at.metric} >= {"accuracy", "rows"}
    at.selectbox(key="sentence_pair.example_csv").set_value("NSP: next vs random sentence").run()  # other rows
    assert not at.metric and any(STALE in c.value for c in at.caption)
    at.text_area(key="sentence_pair.csv").set_value("a,b\nx,y\n")
    _submit(at, "Score all rows")
    assert at.error and not at.metric


def test_speed_result_is_cleared_by_an_error(use_tiny_zoo):
    from core.runtime.backend import runner

    at = _page("speed")
    at.select_slider(key="speed.seq").set_value(16)
    at.select_slider(key="speed.batch").set_value(1)
    at.number_input(key="speed.reps").set_value(1)
    at.multiselect(key="speed.families").set_value(["distilbert"])
    at.button[0].click().run()
    job = max((j for j in runner().jobs() if j.name == "Speed"), key=lambda j: j.id)
    runner().wait(job, timeout=300)
    at.run()
    assert any("Measured on" in s.value for s in at.success)
    at.multiselect(key="speed.families").set_value([])
    at.button[0].click().run()
    assert not at.exception and at.error and not at.success
    at.run()
    assert not at.success


def test_attention_comparison_is_cleared_by_an_error(use_tiny_zoo, monkeypatch):
    at = _page("attention")
    at.button(key="attention.cmp.run").click().run()
    assert not at.exception and any("next-layer" in m.label for m in at.metric), [m.label for m in at.metric]
    import core.inspect.attention

    def broken(*_a, **_k):
        raise ValueError("broken on purpose")

    monkeypatch.setattr(core.inspect.attention, "compute_attention", broken)
    at.button(key="attention.cmp.run").click().run()
    assert any("broken on purpose" in e.value for e in at.error)
    monkeypatch.undo()
    at.run()
    assert not any("next-layer" in m.label for m in at.metric)

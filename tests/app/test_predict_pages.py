"""AppTest: the Fill-mask and Sentence pair pages on the tiny zoo, the four families, and their bad inputs."""
from __future__ import annotations

import pytest

from tests.app.conftest import new_app, page_path


def _page(name: str, family: str = "bert"):
    at = new_app()
    if family != "bert":
        at.sidebar.selectbox(key="sidebar.family").set_value(family).run()
    at.switch_page(page_path(name)).run()
    assert not at.exception, at.exception
    return at


def _errors(at) -> str:
    return " ".join(e.value for e in at.error)


def _submit(at, label: str):
    next(b for b in at.button if b.label == label).click().run()
    assert not at.exception, at.exception
    return at


def test_fill_mask_each_family_shows_pieces_and_charts(use_tiny_zoo, family):
    at = _page("fill_mask", family)
    at.text_area(key="fill_mask.text").set_value("The embedding of the [MASK] was [MASK].")
    at.slider(key="fill_mask.type.top_k").set_value(12)
    _submit(at, "Predict")
    assert not at.error, _errors(at)
    strips = [m.value for m in at.markdown if "encoderlab-tokens" in m.value]
    mask = {"roberta": "&lt;mask&gt;"}.get(family, "[MASK]")
    assert strips and strips[0].count(mask) == 2
    marker = {"bert": "##", "distilbert": "##", "roberta": "Ġ", "albert": "▁"}[family]
    assert marker in strips[0]
    charts = at.get("plotly_chart")
    assert len(charts) == 2
    assert any("Joint fill" in m.value for m in at.markdown)
    assert len(at.dataframe) == 1  # the per-mask table for several masks


def test_fill_mask_iterative_and_bad_inputs(use_tiny_zoo):
    at = _page("fill_mask")
    at.radio(key="fill_mask.type.strategy").set_value("iterative")
    at.text_area(key="fill_mask.text").set_value("My [MASK] plays the [MASK] every evening.")
    _submit(at, "Predict")
    assert any("most confident first" in m.value for m in at.markdown)
    for text, fragment in [("", "empty"), ("No mask here.", "no [MASK]"), ("[MASK] " * 30 + "x", "30 masks"),
                           ("[MASK] [MASK]", "only masks")]:
        at.text_area(key="fill_mask.text").set_value(text)
        _submit(at, "Predict")
        assert fragment in _errors(at), (text, _errors(at))
    at.text_area(key="fill_mask.text").set_value("[CLS] Café\u0301 😀 北京 שלום is [MASK]. [SEP]")
    _submit(at, "Predict")
    info = " ".join(i.value for i in at.info)
    assert "Removed [CLS], [SEP]" in info and "Right-to-left" in info and "CJK" in info
    long = " ".join(["the river flows slowly through the old town"] * 40)
    at.text_area(key="fill_mask.text").set_value(long + " the [MASK] sat " + long)
    _submit(at, "Predict")
    assert any("window around the masks" in w.value for w in at.warning)


def test_fill_mask_one_text_per_line_runs_as_a_batch(use_tiny_zoo):
    at = _page("fill_mask")
    at.text_area(key="fill_mask.text").set_value("The [MASK] is blue.\nA [MASK] fell.\n\nWe ate [MASK].")
    at.checkbox(key="fill_mask.per_line").check()
    _submit(at, "Predict")
    assert not at.error, _errors(at)
    assert len(at.main.expander) == 3 and len(at.get("plotly_chart")) == 3
    assert any("per text, batch of 3" in c.value for c in at.caption)
    at.text_area(key="fill_mask.text").set_value("The [MASK] is blue.\nno mask")
    _submit(at, "Predict")
    assert "Line 2: The text has no [MASK]" in _errors(at)


def test_fill_mask_examples_and_whole_word(use_tiny_zoo):
    at = _page("fill_mask")
    at.selectbox(key="fill_mask.example").set_value("Paris is the [MASK] of [MASK].").run()
    assert at.text_area(key="fill_mask.text").value == "Paris is the [MASK] of [MASK]."
    assert any("北京" in o for o in at.selectbox(key="fill_mask.example").options)  # Chinese examples too
    at.text_input(key="fill_mask.plain").set_value("The embedding was unbelievable.").run()
    word = at.selectbox(key="fill_mask.word")
    assert word.options[1].startswith("embedding")
    word.set_value(1)
    _submit(at, "Mask it and predict")
    assert not at.error, _errors(at)
    cap = " ".join(c.value for c in at.caption)
    assert "Masked word **embedding** → 3 piece(s)" in cap and "##bed" in cap


def test_fill_mask_compare_models_side_by_side(use_tiny_zoo):
    at = _page("fill_mask")
    ms = at.multiselect(key="fill_mask.cmp_models")
    assert ms.value == ["bert|encoderlab/bert-mini", "roberta|encoderlab/roberta-mini"]
    ms.set_value(["bert|encoderlab/bert-mini", "roberta|encoderlab/roberta-mini", "albert|encoderlab/albert-mini"])
    _submit(at, "Compare")
    assert not at.error, _errors(at)
    lat = [m for m in at.metric if m.label == "latency"]
    assert len(lat) == 3 and all(m.value.endswith(" ms") for m in lat)
    at.multiselect(key="fill_mask.cmp_models").set_value(["bert|encoderlab/bert-mini"])
    _submit(at, "Compare")
    assert "Pick 2 to 4 models" in _errors(at)


def test_fill_mask_checkpoint_without_mlm_head(use_tiny_zoo):
    from core.tokenizer_build import minilm_folder

    at = new_app()
    at.sidebar.selectbox(key="sidebar.checkpoint").set_value("custom (Hub id or local folder)…").run()
    at.sidebar.text_input(key="sidebar.custom").set_value(str(minilm_folder())).run()
    at.switch_page(page_path("fill_mask")).run()
    assert not at.exception
    assert "no trained MLM head" in _errors(at)


@pytest.mark.parametrize("family, label", [("bert", "P(IsNext)"), ("albert", "P(in order)")])
def test_sentence_pair_probe(use_tiny_zoo, family, label):
    at = _page("sentence_pair", family)
    _submit(at, "Score with " + ("Next Sentence Prediction" if family == "bert" else "Sentence Order Prediction"))
    assert not at.error, _errors(at)
    labels = [m.label for m in at.metric]
    assert labels == [f"{label} (A, B)", f"{label} (B, A)", f"{label} (A, other topic)"]
    assert len(at.get("plotly_chart")) == 1
    at.text_area(key="sentence_pair.b").set_value("   ")
    _submit(at, "Score with " + ("Next Sentence Prediction" if family == "bert" else "Sentence Order Prediction"))
    assert "Sentence B is empty" in _errors(at)


@pytest.mark.parametrize("family, why", [("roberta", "dropped NSP"), ("distilbert", "distilled")])
def test_sentence_pair_explains_missing_head(use_tiny_zoo, family, why):
    at = _page("sentence_pair", family)
    assert any(why in i.value and "has no sentence-pair head" in i.value for i in at.info)
    assert not at.error and not at.button  # nothing to press, nothing failed


def test_sentence_pair_batch_csv_runs_as_a_job(use_tiny_zoo):
    from core.jobs import runner

    at = _page("sentence_pair")
    at.selectbox(key="sentence_pair.example_csv").set_value("NSP: next vs random sentence").run()
    _submit(at, "Score all rows")
    assert not at.error, _errors(at)
    jobs = [j for j in runner().jobs() if j.name == "Next Sentence Prediction on 20 pairs"]
    assert jobs, "no job was submitted"
    runner().wait(jobs[-1], timeout=120)
    at.run()
    assert not at.exception and jobs[-1].status == "done", jobs[-1].error
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["rows"] == "20" and metrics["accuracy"].endswith("%")
    assert len(at.dataframe) == 1 and len(at.dataframe[0].value) == 20
    for csv, fragment in [("a,b\nx,y\n", "lacks the column(s) label"),
                          ("a,b,label\n" + "x,y,1\n" * 501, "limit is 500"),
                          ("a,b,label\nx,y,perhaps\n", "label 'perhaps'")]:
        at.text_area(key="sentence_pair.csv").set_value(csv)
        _submit(at, "Score all rows")
        assert fragment in _errors(at), (csv[:20], _errors(at))

"""AppTest: the Fill-mask and Sentence pair pages on the tiny zoo, every registered family, and their bad inputs."""

from __future__ import annotations

import pytest

from tests.app.conftest import click, new_app, open_page, page_for, page_path

_page, _submit = page_for, click  # shared in tests/app/conftest.py


def _errors(at) -> str:
    return " ".join(e.value for e in at.error)


def test_fill_mask_each_family_shows_pieces_and_charts(use_tiny_zoo, tiny_models, family):
    import html

    from core.registry import FAMILIES

    fam = FAMILIES[family]
    if fam.bundled:
        at = _page("fill_mask", family)
    else:  # a family with no bundled mini: its tiny model as a custom folder
        at = open_page("fill_mask", {"family": family, "model": "custom", "custom": str(tiny_models[family])})
    at.text_area(key="fill_mask.text").set_value(f"The embedding of the {fam.mask_token} was {fam.mask_token}.")
    at.slider(key="fill_mask.type.top_k").set_value(12)
    _submit(at, "Predict")
    assert not at.error, _errors(at)
    strips = [m.value for m in at.markdown if "encoderlab-tokens" in m.value]
    assert strips and strips[0].count(html.escape(fam.mask_token)) == 2
    marker = {"wordpiece": "##", "bpe": "Ġ", "unigram": "▁"}[fam.piece_kind]
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
    assert "fill step" in at.dataframe[0].value.columns  # the order masks were filled in
    at.radio(key="fill_mask.type.strategy").set_value("independent")
    _submit(at, "Predict")
    assert "fill step" not in at.dataframe[0].value.columns  # one pass fills every mask: no order to show
    for text, fragment in [
        ("", "empty"),
        ("No mask here.", "no [MASK]"),
        ("[MASK] " * 30 + "x", "30 masks"),
        ("[MASK] [MASK]", "only masks"),
    ]:
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
    assert len([e for e in at.main.expander if e.label != "Switch off heads"]) == 3 and len(at.get("plotly_chart")) == 3
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
    assert "Masked word **embedding** → 3 piece(s)" in cap and "bed" in cap and "##" not in cap  # pieces as written


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
    from core.models.tokenizer_build import minilm_folder

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
    assert all(i.value.count("has no sentence-pair head") <= 1 for i in at.info)  # said once, not twice
    page_buttons = [
        b for b in at.button if not b.key.startswith("room.")
    ]  # the sidebar's Join a room is not the page's
    assert not at.error and not page_buttons  # nothing to press on the page, nothing failed


def test_sentence_pair_batch_csv_runs_as_a_job(use_tiny_zoo):
    from core.runtime.backend import runner

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
    for csv, fragment in [
        ("a,b\nx,y\n", "lacks the column(s) label"),
        ("a,b,label\n" + "x,y,1\n" * 501, "limit is 500"),
        ("a,b,label\nx,y,perhaps\n", "label 'perhaps'"),
    ]:
        at.text_area(key="sentence_pair.csv").set_value(csv)
        _submit(at, "Score all rows")
        assert fragment in _errors(at), (csv[:20], _errors(at))


# ---------------------------------------------------------------------------------------------- workshop features
def _linked(name: str, params: dict[str, str]):
    """The page opened from a shared link: a session whose URL carries ``params`` it did not write itself."""
    at = new_app()
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(page_path(name)).run()
    assert not at.exception, at.exception
    return at


def _bars(chart) -> int:
    import json

    return len(json.loads(chart.proto.spec)["data"][0]["y"])


def _title(chart) -> str:
    import json

    return json.loads(chart.proto.spec)["layout"]["title"]["text"]


def _entries(at) -> list:
    return list(at.session_state["report.entries"].values()) if "report.entries" in at.session_state else []


def _chinese(monkeypatch):
    """A session in 中文. AppTest formats widget options (format_func) outside the script run, where the
    session's language cannot be read, so the test pins the language for those calls too."""
    monkeypatch.setattr("app.kit.i18n.lang", lambda: "zh")
    at = new_app()
    at.session_state["ui.lang"] = "zh"
    return at


def test_fill_mask_in_chinese(use_tiny_zoo, monkeypatch):
    at = _chinese(monkeypatch)
    at.switch_page(page_path("fill_mask")).run()
    assert not at.exception, at.exception
    assert at.title[0].value == "完形填空（Fill-mask）"
    assert [tab.label for tab in at.tabs][:3] == ["输入 [MASK]", "遮盖一个词", "比较模型"]
    assert at.text_area(key="fill_mask.text").label == "含 [MASK] 的文本（可以有多个）"
    at.radio(key="fill_mask.type.strategy").set_value("iterative")
    at.text_area(key="fill_mask.text").set_value("My [MASK] plays the [MASK] every evening.")
    _submit(at, "预测")
    assert not at.error, _errors(at)
    assert any("**联合填充**（逐个填充，最有把握的先填）" in m.value for m in at.markdown)
    assert "第 1 个 [MASK]" in _title(at.get("plotly_chart")[0]).replace("<br>", " ")  # wrapped outside its (…)
    word = at.selectbox(key="fill_mask.word")
    assert word.options[0] == "The  （第 1 个词）"


def test_fill_mask_link_restores_and_predicts_at_once(use_tiny_zoo):
    at = _linked(
        "fill_mask",
        {"fill_mask.text": "The [MASK] is blue.", "fill_mask.type.top_k": "7", "fill_mask.type.strategy": "iterative"},
    )
    assert at.text_area(key="fill_mask.text").value == "The [MASK] is blue."
    assert at.slider(key="fill_mask.type.top_k").value == 7
    assert at.radio(key="fill_mask.type.strategy").value == "iterative"
    assert not at.error and not at.warning, (_errors(at), [w.value for w in at.warning])
    assert any("Joint fill" in m.value for m in at.markdown)  # no click needed
    charts = at.get("plotly_chart")
    assert len(charts) == 1 and _bars(charts[0]) == 7
    entries = _entries(at)
    assert len(entries) == 1 and entries[0].inputs["top-k per mask"] == "7"
    at.run()  # a rerun of the same link does not predict (or record) again
    assert len(_entries(at)) == 1


def test_fill_mask_bad_link_values_fall_back(use_tiny_zoo):
    at = _linked(
        "fill_mask",
        {
            "fill_mask.text": "A [MASK] fell.",
            "fill_mask.type.top_k": "999",
            "fill_mask.type.strategy": "sideways",
            "fill_mask.cmp_models": "bert|nope",
        },
    )
    notice = " ".join(w.value for w in at.warning)
    assert "not valid here" in notice
    assert all(p in notice for p in ("fill_mask.type.top_k", "fill_mask.type.strategy", "fill_mask.cmp_models"))
    assert at.slider(key="fill_mask.type.top_k").value == 5
    assert at.radio(key="fill_mask.type.strategy").value == "independent"
    assert at.multiselect(key="fill_mask.cmp_models").value == [
        "bert|encoderlab/bert-mini",
        "roberta|encoderlab/roberta-mini",
    ]
    assert _bars(at.get("plotly_chart")[0]) == 5  # the text was good: it still predicts, with the default top-k
    assert at.query_params["fill_mask.type.top_k"] == "5"  # the address bar now holds what is on screen


def test_fill_mask_link_to_a_masked_word_and_a_comparison(use_tiny_zoo):
    at = _linked(
        "fill_mask",
        {
            "fill_mask.plain": "The embedding was unbelievable.",
            "fill_mask.word": "1",
            "fill_mask.word.top_k": "3",
            "fill_mask.cmp_models": "bert|encoderlab/bert-mini,albert|encoderlab/albert-mini",
            "fill_mask.cmp_text": "A [MASK] fell.",
            "fill_mask.cmp.top_k": "4",
        },
    )
    assert at.selectbox(key="fill_mask.word").value == 1
    cap = " ".join(c.value for c in at.caption)
    assert "Masked word **embedding** → 3 piece(s)" in cap
    assert at.multiselect(key="fill_mask.cmp_models").value == [
        "bert|encoderlab/bert-mini",
        "albert|encoderlab/albert-mini",
    ]
    assert at.text_input(key="fill_mask.cmp_text").value == "A [MASK] fell."
    assert at.slider(key="fill_mask.cmp.top_k").value == 4
    _submit(at, "Compare")
    kinds = sorted(e.entry_id.split(":")[1] for e in _entries(at))
    assert kinds == ["compare", "word"]
    cmp = next(e for e in _entries(at) if ":compare:" in e.entry_id)
    assert {r["model"] for r in cmp.rows} == {"encoderlab/bert-mini", "encoderlab/albert-mini"}
    assert all(len(r["top-k (piece probability)"].split(" · ")) == 4 for r in cmp.rows)


def test_fill_mask_prediction_lands_in_the_report_and_the_url(use_tiny_zoo):
    at = _page("fill_mask")
    at.text_area(key="fill_mask.text").set_value("The embedding of the [MASK] was [MASK].")
    at.slider(key="fill_mask.type.top_k").set_value(3)
    _submit(at, "Predict")
    (entry,) = _entries(at)
    assert entry.page == "Fill-mask" and entry.entry_id.startswith("fill_mask:type:")
    assert entry.inputs["model"] == "encoderlab/bert-mini"
    assert entry.inputs["text"] == "The embedding of the [MASK] was [MASK]."
    assert [r["mask"] for r in entry.rows] == [1, 2]
    assert all(len(r["top-k (piece probability)"].split(" · ")) == 3 for r in entry.rows)
    assert len(entry.figures) == 2
    _submit(at, "Predict")  # the same prediction again replaces its entry
    assert len(_entries(at)) == 1
    at.run()
    assert at.query_params["fill_mask.text"] == "The embedding of the [MASK] was [MASK]."
    assert at.query_params["fill_mask.type.top_k"] == "3"


def test_predict_pages_in_presenter_view(use_tiny_zoo):
    at = new_app()
    at.session_state["ui.present"] = True
    at.switch_page(page_path("fill_mask")).run()
    assert not at.exception, at.exception
    assert "Settings" in [e.label for e in at.main.expander]
    _submit(at, "Predict")
    assert any("Joint fill" in m.value for m in at.markdown)
    at.switch_page(page_path("sentence_pair")).run()
    assert not at.exception, at.exception
    assert "Settings" in [e.label for e in at.main.expander]


def test_sentence_pair_link_scores_at_once(use_tiny_zoo):
    at = _linked(
        "sentence_pair",
        {
            "family": "albert",
            "model": "encoderlab/albert-mini",
            "sentence_pair.a": "The sun rose.",
            "sentence_pair.b": "Birds began to sing.",
            "sentence_pair.probe": "0",
            "sentence_pair.seed": "3",
            "sentence_pair.threshold": "0.33",
        },
    )
    assert not at.error, _errors(at)
    assert at.text_area(key="sentence_pair.a").value == "The sun rose."
    assert at.checkbox(key="sentence_pair.probe").value is False
    assert at.number_input(key="sentence_pair.seed").value == 3
    assert at.slider(key="sentence_pair.threshold").value == 0.35  # snapped to the slider's 0.05 steps
    assert [m.label for m in at.metric] == ["P(in order) (A, B)", "P(in order) (B, A)"]  # no click needed
    (entry,) = _entries(at)
    assert entry.page == "Sentence pair (NSP/SOP)" and len(entry.figures) == 1
    assert [r["pair"] for r in entry.rows] == ["(A, B)", "(B, A)"] and "P(in order)" in entry.rows[0]
    bad = _linked("sentence_pair", {"sentence_pair.seed": "-4", "sentence_pair.threshold": "2"})
    assert "not valid here" in " ".join(w.value for w in bad.warning)
    assert bad.number_input(key="sentence_pair.seed").value == 0
    assert bad.slider(key="sentence_pair.threshold").value == 0.5


def test_sentence_pair_in_chinese_and_batch_report(use_tiny_zoo, monkeypatch):
    from core.runtime.backend import runner

    at = _chinese(monkeypatch)
    at.switch_page(page_path("sentence_pair")).run()
    assert not at.exception, at.exception
    assert at.title[0].value == "句对（NSP / SOP）"
    _submit(at, "用 下一句预测 (NSP) 打分")
    assert [m.label for m in at.metric] == ["P(IsNext) (A, B)", "P(IsNext) (B, A)", "P(IsNext) (A, 其他话题)"]
    assert any("如何解读探针" in m.value for m in at.markdown)
    at.selectbox(key="sentence_pair.example_csv").set_value("NSP: next vs random sentence").run()
    assert (
        at.selectbox(key="sentence_pair.example_csv").format_func("NSP: next vs random sentence")
        == "NSP：下一句 vs 随机句子"
    )
    _submit(at, "给所有行打分")
    jobs = [j for j in runner().jobs() if j.name == "下一句预测 (NSP)：20 个句对"]
    assert jobs, "no job was submitted"
    runner().wait(jobs[-1], timeout=120)
    at.run()
    assert not at.exception and "准确率" in [m.label for m in at.metric]
    batch = [e for e in _entries(at) if ":batch:" in e.entry_id]
    assert len(batch) == 1 and "准确率" in batch[0].text and len(batch[0].figures) == 1
    assert len(batch[0].rows) == 2  # the confusion matrix
    at.run()
    assert len([e for e in _entries(at) if ":batch:" in e.entry_id]) == 1  # recorded once, not on every rerun


def test_sentence_pair_shows_the_bundled_models_card(monkeypatch):
    """With a bundled mini, the scores come with its held-out pair accuracy, so an untrained-looking SOP head is
    read for what it is."""
    import json

    from core.base.paths import zoo_dir

    monkeypatch.delenv("ENCODERLAB_ZOO", raising=False)
    card = zoo_dir() / "albert-mini" / "encoderlab_card.json"
    if not card.exists():
        pytest.skip("bundled zoo not built (make models)")
    acc = json.loads(card.read_text())["heldout"]["pair_acc"]
    at = _linked(
        "sentence_pair",
        {
            "family": "albert",
            "model": "encoderlab/albert-mini",
            "sentence_pair.a": "The sun rose.",
            "sentence_pair.b": "Birds began to sing.",
            "sentence_pair.probe": "0",
        },
    )
    assert not at.error, _errors(at)
    # issue 14: its SOP head did not learn (below always guessing the majority): said so, and no chart drawn
    warning = " ".join(w.value for w in at.warning)
    assert "SOP head did not learn" in warning and f"{acc:.1%}" in warning
    assert not at.get("plotly_chart")


def test_presenter_view_scales_chart_fonts(use_tiny_zoo):
    """Issue 14: in presenter view the charts (the content) had the small default fonts."""
    import json

    at = _page("fill_mask")
    _submit(at, "Predict")
    normal = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]
    at.sidebar.toggle(key="ui.present").set_value(True).run()
    _submit(at, "Predict")
    big = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]
    assert big["font"]["size"] >= 20 and normal.get("font", {}).get("size", 12) < 20
    # the axes' own sizes too: Streamlit's chart theme sets them, and they win over layout.font
    assert big["xaxis"]["tickfont"]["size"] >= 20 and big["yaxis"]["tickfont"]["size"] >= 20
    assert big["height"] > normal["height"]

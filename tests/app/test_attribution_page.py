"""AppTest: the Attributions page on the tiny zoo: each target, the job panel, bad input, and the batch tab."""

from __future__ import annotations

import types

import pytest

from core.runtime.backend import runner
from tests.app.conftest import new_app, page_path

P = "attribution"
IG_LABEL = "Integrated Gradients (on the embeddings)"  # what the "lig" entry runs (it was "Layer Integrated Gradients")


def _page(family: str = "bert", target: str | None = None):
    at = new_app()
    if family != "bert":
        at.sidebar.selectbox(key="sidebar.family").set_value(family).run()
    at.switch_page(page_path(P)).run()
    assert not at.exception, at.exception
    if target:
        at.radio(key=f"{P}.target").set_value(target).run()
        assert not at.exception, at.exception
    return at


def _click(at, label: str):
    next(b for b in at.button if b.label == label).click().run()
    assert not at.exception, at.exception
    return at


def _finish(at, name: str = "attribution"):
    """Wait for the page's job in the process-wide runner, then rerun so the panel draws the result."""
    job = runner().get(at.session_state[f"{P}.{name}.job"])
    runner().wait(job, timeout=120)
    assert job.status == "done", (job.status, job.error)
    at.run()
    assert not at.exception, at.exception
    return at


def _html(at) -> str:
    return " ".join(h.proto.body for h in at.get("html"))


def _errors(at) -> str:
    return " ".join(e.value for e in at.error)


@pytest.mark.parametrize("fam", ["bert", "roberta"])
def test_mask_target_runs_and_colours_tokens(use_tiny_zoo, fam):
    at = _page(fam)
    at.multiselect(key=f"{P}.one.methods").set_value(["lig", "saliency", "occlusion"])
    at.checkbox(key=f"{P}.layers").check()
    _click(at, "Explain")
    _finish(at)
    html = _html(at)
    assert html.count('class="attr-tok"') >= 3 * 5 and "background:#" in html
    assert any("Explaining" in m.value for m in at.markdown)
    charts = at.get("plotly_chart")
    assert len(charts) == 5  # bar, methods side by side, rank correlation, faithfulness curves, per-layer heatmap
    downloads = [b for b in at.get("download_button") if b.key.startswith("attribution.")]
    assert len(downloads) == 3  # + faithfulness
    # each file is made on a click: drawing a button gives the browser nothing to fetch (app.kit.download_button.download)
    assert all(b.proto.deferred_file_id and not b.proto.url for b in downloads)


def test_pair_target_and_family_without_pair_head(use_tiny_zoo):
    at = _page("albert", "pair")
    at.multiselect(key=f"{P}.one.methods").set_value(["lig", "saliency"])
    _click(at, "Explain")
    _finish(at)
    assert "SOP logit" in " ".join(m.value for m in at.markdown)
    at = _page("roberta", "pair")
    assert "no sentence-pair head" in " ".join(w.value for w in at.warning)


def test_class_target_offers_session_fine_tuned_models(use_tiny_zoo, tiny_models, tmp_path):
    from core.models.tiny import make_tiny

    folder = make_tiny("distilbert", tmp_path / "clf", task="seqcls")
    at = _page(target="class")
    at.session_state["session.models"] = {}
    at.run()
    from app.kit.state import SessionModel

    at.session_state["session.models"] = {"my-clf": SessionModel("my-clf", "distilbert", str(folder), "fine-tuned")}
    at.run()
    box = at.selectbox(key=f"{P}.classifier")
    assert "my-clf" in box.options
    box.set_value("my-clf").run()
    assert not at.exception, at.exception
    _click(at, "Explain")
    _finish(at)
    assert "class 'LABEL_0'" in " ".join(m.value for m in at.markdown)


def test_bad_inputs_get_messages(use_tiny_zoo):
    at = _page()
    cases = [("", "empty"), ("no mask in this text", "has no mask"), ("word " * 200 + "[MASK]", "reads at most")]
    for text, fragment in cases:
        at.text_area(key=f"{P}.text.mask").set_value(text)
        _click(at, "Explain")
        assert fragment in _errors(at), (text, _errors(at))
    at.text_area(key=f"{P}.text.mask").set_value("Paris is the [MASK] of France.")
    for word, fragment in [("☃", "not in this model's vocabulary"), ("unbelievably", "sub-tokens")]:
        at.text_input(key=f"{P}.one.word").set_value(word)
        _click(at, "Explain")
        assert fragment in _errors(at), (word, _errors(at))
    at.text_input(key=f"{P}.one.word").set_value("")
    at.multiselect(key=f"{P}.one.methods").set_value([])
    _click(at, "Explain")
    assert "at least one" in _errors(at)


def test_batch_tab_needs_a_file(use_tiny_zoo):
    at = _page()
    _click(at, "Explain all rows")
    assert "Upload a CSV" in _errors(at)


# ---------------------------------------------------------------------------------------------- workshop
def _link(params: dict, state: dict | None = None):
    """A fresh session opening the Attributions page from a link (its first run is that page, as in a browser)."""
    from streamlit.testing.v1 import AppTest

    from tests.app.conftest import MAIN

    at = AppTest.from_file(MAIN, default_timeout=120)
    at.query_params.update(params)
    for k, v in (state or {}).items():
        at.session_state[k] = v
    at.switch_page(page_path(P)).run()
    assert not at.exception, at.exception
    return at


def test_link_runs_the_attribution(use_tiny_zoo):
    text = "Paris is the [MASK] of France."
    at = _link(
        {
            f"{P}.text.mask": text,
            f"{P}.one.methods": "lig,occlusion",
            f"{P}.one.baseline": "zeros",
            f"{P}.one.n_steps": "8",
        }
    )
    assert not at.warning and not at.error, ([w.value for w in at.warning], _errors(at))
    assert at.text_area(key=f"{P}.text.mask").value == text
    assert at.multiselect(key=f"{P}.one.methods").value == ["lig", "occlusion"]
    assert at.selectbox(key=f"{P}.one.baseline").value == "zeros" and at.number_input(key=f"{P}.one.n_steps").value == 8
    _finish(at)  # the link started the same job the button would have started
    assert any("Explaining" in m.value for m in at.markdown)
    assert len(at.get("plotly_chart")) == 4  # bar, side by side, correlation, faithfulness
    job_id = at.session_state[f"{P}.attribution.job"]
    at.run()  # reruns of the linked view do not start it again
    assert at.session_state[f"{P}.attribution.job"] == job_id
    assert at.query_params[f"{P}.one.methods"] == "lig,occlusion"
    entries = [e for e in at.session_state["report.entries"].values() if e.entry_id.startswith("attribution:")]
    assert len(entries) == 1
    e = entries[0]
    assert text in e.inputs.values() and "zero vector" in e.inputs.values()
    res = runner().get(job_id).result
    assert [r["token"] for r in e.rows] == list(res.tokens) and e.rows[0]["token"] == "[CLS]"
    assert e.rows[1]["Occlusion"] == f"{res.method('occlusion').scores[1]:+.4f}"
    assert set(e.rows[0]) == {"token", IG_LABEL, "Occlusion"}
    assert len(e.figures) == 4  # bar chart, methods side by side, rank correlation, faithfulness curves


def test_link_starts_only_what_the_button_would(use_tiny_zoo):
    at = _link({f"{P}.text.mask": "no mask in this text"})
    assert "has no mask" in _errors(at)
    assert f"{P}.attribution.job" not in at.session_state


def test_link_with_a_pair_target_and_class(use_tiny_zoo):
    at = _link(
        {
            "family": "albert",
            f"{P}.target": "pair",
            f"{P}.text.pair": "She opened the door.",
            f"{P}.text_b": "It creaked.",
            f"{P}.one.class": "1",
            f"{P}.one.methods": "saliency",
        }
    )
    assert not at.warning, [w.value for w in at.warning]
    assert at.selectbox(key=f"{P}.one.class").value == 1
    _finish(at)
    assert "SOP" in " ".join(m.value for m in at.markdown)


def test_bad_link_values_fall_back(use_tiny_zoo):
    at = _link({f"{P}.one.n_steps": "5000", f"{P}.one.methods": "lig,magic", f"{P}.target": "nope"})
    notice = " ".join(w.value for w in at.warning)
    assert f"{P}.one.n_steps" in notice and f"{P}.one.methods" in notice and f"{P}.target" in notice, notice
    assert at.number_input(key=f"{P}.one.n_steps").value == 50
    assert at.multiselect(key=f"{P}.one.methods").value == ["lig", "saliency", "ixg", "occlusion"]
    assert at.radio(key=f"{P}.target").value == "mask"
    assert f"{P}.attribution.job" not in at.session_state  # nothing valid came from the link: nothing runs


def test_page_in_chinese(use_tiny_zoo):
    at = _link({"lang": "zh", f"{P}.one.methods": "saliency"})
    assert at.title[0].value == "归因（Attribution）" and not at.error
    assert at.radio(key=f"{P}.target").options[0] == "被遮盖的词（[MASK]）"
    assert "显著性（Saliency）" in at.multiselect(key=f"{P}.one.methods").options
    assert [b.label for b in at.button if b.label == "解释"]
    job = runner().get(at.session_state[f"{P}.attribution.job"])  # the link started it
    runner().wait(job, timeout=120)
    assert job.status == "done", job.error
    # AppTest formats the sidebar's options again between runs, outside the session (so in English): rerun
    # this session from an English run, then switch it to Chinese.
    at = _page()
    at.multiselect(key=f"{P}.one.methods").set_value(["saliency", "occlusion"])
    _finish(_click(at, "Explain"))
    at.session_state["ui.lang"] = "zh"
    at.run()
    assert not at.exception, at.exception
    assert any("解释的是" in m.value for m in at.markdown) and not at.error
    assert "各方法并排比较" in [h.value for h in at.subheader]
    assert "该信哪个解释：忠实度" in [h.value for h in at.subheader]


# ---------------------------------------------------------------------------------------------- faithfulness
def test_faithfulness_sits_beside_the_map_and_says_how_it_removed_a_token(use_tiny_zoo):
    at = _link({f"{P}.text.mask": "Paris is the [MASK] of France.", f"{P}.one.methods": "lig,occlusion"})
    _finish(at)
    assert "Which explanation to trust: faithfulness" in [h.value for h in at.subheader]
    table = next(d.value for d in at.dataframe if "comp_rev" in d.value.columns)
    res = runner().get(at.session_state[f"{P}.attribution.job"]).result
    assert list(table["method"]) == [IG_LABEL, "Occlusion", "random (5 seeds)"]
    assert table["comp"][0] == f"{res.faithfulness.method('lig').aopc_comp:.3f}"
    assert table["suff_rev"][1] == f"{res.faithfulness.reversed_of('occlusion').aopc_suff:.3f}"
    assert table["suff"][2] == f"{res.faithfulness.random.aopc_suff:.3f}" and table["suff_rev"][2] == "—"
    assert any("becomes [MASK], the model's mask token" in c.value for c in at.caption)
    at.selectbox(key=f"{P}.one.removal").set_value("delete").run()
    assert at.query_params[f"{P}.one.removal"] == "delete"  # a link keeps the removal
    _finish(_click(at, "Explain"))
    assert runner().get(at.session_state[f"{P}.attribution.job"]).result.faithfulness.removal == "delete"
    assert any("is deleted from the input" in c.value for c in at.caption)
    at.checkbox(key=f"{P}.one.faith").uncheck().run()
    _finish(_click(at, "Explain"))
    assert "Which explanation to trust: faithfulness" not in [h.value for h in at.subheader]
    assert runner().get(at.session_state[f"{P}.attribution.job"]).result.faithfulness is None


def test_the_batch_ranks_the_methods(use_tiny_zoo):
    from streamlit.testing.v1 import AppTest

    def script():
        import os

        from app.views.inspect import attribution as ra
        from core.inspect.attribution import attribute_batch, read_batch_csv
        from core.models.loading import ModelSpec, load
        from tests.conftest import BUNDLED_NAMES

        folder = os.path.join(os.environ["ENCODERLAB_ZOO"], BUNDLED_NAMES["bert"])
        lm = load(ModelSpec("bert", folder, "cpu"), task="mlm")
        rows = read_batch_csv("text\nParis is the [MASK] of France.\nBerlin is a [MASK] city.\n")
        ra.show_batch(attribute_batch(lm, rows, dict(methods=("saliency", "occlusion"))), "b")

    at = AppTest.from_function(script, default_timeout=120).run()
    assert not at.exception, at.exception
    assert "Which method to trust on these inputs" in [h.value for h in at.subheader]
    verdict = " ".join(s.value for s in at.success)
    assert "On these 2 inputs," in verdict and "the most comprehensive" in verdict
    assert list(next(d.value for d in at.dataframe if "Inputs" in d.value.columns)["Inputs"]) == [2, 2]
    assert "b.fcsv" in [b.key for b in at.get("download_button")]


def test_presenter_view_folds_the_settings(use_tiny_zoo):
    at = _link({"present": "1"})
    assert not at.error
    assert "Settings" in [e.label for e in at.expander]
    _click(at, "Explain")
    _finish(at)
    assert any("Explaining" in m.value for m in at.markdown)


# ---------------------------------------------------------------------------------------------- issue 14
def _shown(at) -> bool:
    return any("Explaining" in m.value for m in at.markdown)


def _stale(at) -> bool:
    return any("not shown" in i.value for i in at.info)


def test_a_result_is_shown_only_while_it_matches_model_target_and_input(use_tiny_zoo):
    """Issue 14: after switching the target or the model, or after an error, the old result stayed on screen."""
    at = _page()
    at.multiselect(key=f"{P}.one.methods").set_value(["saliency"])
    _finish(_click(at, "Explain"))
    assert _shown(at) and not _stale(at)
    at.radio(key=f"{P}.target").set_value("pair").run()  # another target: the masked-word result goes
    assert not _shown(at) and _stale(at)
    at.radio(key=f"{P}.target").set_value("mask").run()  # back to exactly what it was computed for
    assert _shown(at)
    at.sidebar.selectbox(key="sidebar.family").set_value("roberta").run()  # another model
    assert not at.exception, at.exception
    assert not _shown(at) and _stale(at)
    at.sidebar.selectbox(key="sidebar.family").set_value("bert").run()
    assert _shown(at)
    at.text_area(key=f"{P}.text.mask").set_value("")  # an error clears the result
    _click(at, "Explain")
    assert "empty" in _errors(at) and not _shown(at) and not _stale(at)
    assert f"{P}.attribution.job" not in at.session_state


def test_thirty_masks_get_fill_masks_limit(use_tiny_zoo):
    """Issue 14: 30 masks gave all-zero attributions and a NaN correlation matrix instead of a message."""
    at = _page()
    at.text_area(key=f"{P}.text.mask").set_value("Paris " + "[MASK] " * 30 + "France.")
    _click(at, "Explain")
    assert "30 masks; at most 20" in _errors(at), _errors(at)
    assert f"{P}.attribution.job" not in at.session_state
    at.text_area(key=f"{P}.text.mask").set_value("[MASK] [MASK] .")
    _click(at, "Explain")
    assert "only masks" in _errors(at), _errors(at)


@pytest.mark.parametrize("fam", ["bert", "albert"])
def test_deeplift_is_not_offered_where_it_cannot_apply(use_tiny_zoo, fam):
    """Issue 14: DeepLift was offered and refused only after a long run; it is checked on the model first."""
    at = _page(fam)
    options = at.multiselect(key=f"{P}.one.methods").options  # AppTest lists the labels
    assert "DeepLift" not in options and "Saliency" in options
    assert any("DeepLift is not offered for this model" in c.value and "GELU" in c.value for c in at.caption), [
        c.value for c in at.caption
    ]
    # A link that names it (made with another model) drops it with the same reason, and nothing fails.
    at = _link({"family": fam, f"{P}.one.methods": "deeplift,saliency"})
    assert at.multiselect(key=f"{P}.one.methods").value == ["saliency"]


def test_token_target_explains_one_words_tag_of_a_session_token_model(use_tiny_zoo, tmp_path):
    """Issue 21: attributions explain one token's label, for a token classifier fine-tuned in this session."""
    import transformers

    from app.kit.state import SessionModel
    from core.models.tiny import make_tiny

    folder = make_tiny("bert", tmp_path / "tagger", task="base")
    tagger = transformers.AutoModelForTokenClassification.from_pretrained(
        folder, id2label={0: "O", 1: "B-PER", 2: "B-LOC"}, label2id={"O": 0, "B-PER": 1, "B-LOC": 2}
    )
    tagger.save_pretrained(folder)
    at = _page(target="token")
    assert "token-tagging head" in " ".join(c.value for c in at.caption)  # none yet: the sidebar model, said so
    at.session_state["session.models"] = {
        "my-clf": SessionModel("my-clf", "bert", str(folder), "fine-tuned"),  # a sequence classifier: not offered
        "my-tagger": SessionModel("my-tagger", "bert", str(folder), "fine-tuned-token"),
    }
    at.run()
    box = at.selectbox(key=f"{P}.classifier")
    assert "my-tagger" in box.options and "my-clf" not in box.options
    box.set_value("my-tagger").run()
    at.number_input(key=f"{P}.one.word_index").set_value(3)
    at.multiselect(key=f"{P}.one.methods").set_value(["saliency", "occlusion"])
    _click(at, "Explain")
    _finish(at)
    assert "at word 3" in " ".join(m.value for m in at.markdown)
    at.number_input(key=f"{P}.one.word_index").set_value(40)
    _click(at, "Explain")
    assert "word 40 does not exist" in _errors(at)


# ---------------------------------------------------------------------------------------------- the method registry
def _keys(at, kind: str) -> set[str]:
    return {w.key for w in getattr(at, kind)}


def test_the_method_registry_drives_the_picker_and_its_help(use_tiny_zoo):
    """Every registered method is offered (DeepLift only where it applies), in registry order, under its name,
    and the picker's help describes each offered one from the registry."""
    from app.kit.i18n import catalog
    from core.inspect import attribution_methods as A
    from core.models.loading import ModelSpec, load
    from core.registry import bundled_id

    at = _page()
    picker = at.multiselect(key=f"{P}.one.methods")
    model = load(ModelSpec("bert", bundled_id("bert"), "cpu"), task="mlm").model  # the page's (tiny) model
    blocked = A.unavailable_methods(model)
    offered = [k for k in A.METHODS if k not in blocked]
    assert blocked and set(offered) | set(blocked) == set(A.METHODS)
    names = catalog()
    assert picker.options == [names.get(f"attribution.method.{k}", {}).get("en", A.METHODS[k].label) for k in offered]
    for k in offered:
        assert A.METHODS[k].description in picker.help


def test_integrated_gradients_is_named_for_what_it_runs(use_tiny_zoo):
    """It runs IG on the word embeddings (LayerIG of the embedding layer), not LayerIG on a layer one picks."""
    at = _page()
    options = at.multiselect(key=f"{P}.one.methods").options
    assert IG_LABEL in options and not any("Layer Integrated" in o for o in options)
    at = _link({"lang": "zh"})
    assert not any("层积分梯度" in o for o in at.multiselect(key=f"{P}.one.methods").options)


def test_settings_follow_the_picked_methods(use_tiny_zoo):
    """A method that takes no baseline hides the baseline widget; steps and samples show only for the methods
    that read them; a hidden setting keeps its value for when it comes back."""
    at = _page()
    pick = at.multiselect(key=f"{P}.one.methods")
    pick.set_value(["lig"]).run()
    assert {f"{P}.one.baseline"} <= _keys(at, "selectbox")
    assert {f"{P}.one.n_steps", f"{P}.one.ibs"} <= _keys(at, "number_input")
    assert f"{P}.one.samples" not in _keys(at, "number_input")
    at.selectbox(key=f"{P}.one.baseline").set_value("zeros").run()
    at.multiselect(key=f"{P}.one.methods").set_value(["saliency", "ixg"]).run()
    assert not at.exception, at.exception
    assert f"{P}.one.baseline" not in _keys(at, "selectbox")
    assert not {f"{P}.one.n_steps", f"{P}.one.samples", f"{P}.one.ibs"} & _keys(at, "number_input")
    _finish(_click(at, "Explain"))  # runs without the hidden settings
    assert _shown(at)
    at.multiselect(key=f"{P}.one.methods").set_value(["kernelshap"]).run()
    assert at.selectbox(key=f"{P}.one.baseline").value == "zeros"  # kept while hidden
    assert f"{P}.one.samples" in _keys(at, "number_input") and f"{P}.one.n_steps" not in _keys(at, "number_input")
    at.multiselect(key=f"{P}.one.methods").set_value(["saliency"]).run()
    at.checkbox(key=f"{P}.layers").check().run()  # the per-layer heatmap integrates from the baseline
    assert f"{P}.one.baseline" in _keys(at, "selectbox") and f"{P}.layer_steps" in _keys(at, "number_input")


def _estimate(at) -> tuple[int, str]:
    """The forward-pass count and the whole line beside Explain (exactly one such line)."""
    import re

    lines = [c.value for c in at.caption if "forward passes" in c.value]
    assert len(lines) == 1, [c.value for c in at.caption]
    return int(re.search(r"About \*\*([\d,]+)\*\* forward passes", lines[0]).group(1).replace(",", "")), lines[0]


def test_explain_shows_the_passes_and_time_these_settings_take(use_tiny_zoo):
    from transformers import AutoTokenizer

    from app.views.inspect.attribution_widgets import TIMINGS
    from core.inspect import faithfulness as F
    from tests.conftest import BUNDLED_NAMES

    at = _page()
    at.multiselect(key=f"{P}.one.methods").set_value(["lig"]).run()
    at.number_input(key=f"{P}.one.n_steps").set_value(50).run()
    n, line = _estimate(at)
    text = at.text_area(key=f"{P}.text.mask").value
    tok = AutoTokenizer.from_pretrained(str(use_tiny_zoo / BUNDLED_NAMES["bert"]))
    removable = len(tok(text)["input_ids"]) - 3  # not [CLS], [SEP], nor the explained [MASK]
    assert n == 3 + 50 + F.planned_rows(1, removable)  # + the faithfulness rows, measured by default
    at.checkbox(key=f"{P}.one.faith").uncheck().run()
    n, line = _estimate(at)
    assert n == 3 + 50  # the setup (check the input; f(x) and f(baseline)) and one forward per IG step
    assert "50 of them with a backward pass" in line and " s on this model" in line
    assert len(at.session_state[TIMINGS]) == 1  # one timing of this model and text, measured on the page
    at.number_input(key=f"{P}.one.n_steps").set_value(120).run()
    assert _estimate(at)[0] == 3 + 120  # follows the steps at once, without a new measurement
    assert len(at.session_state[TIMINGS]) == 1
    at.multiselect(key=f"{P}.one.methods").set_value(["saliency"]).run()
    n, line = _estimate(at)
    assert n == 3 + 1 and "1 of them with a backward pass" in line
    at.multiselect(key=f"{P}.one.methods").set_value(["occlusion"]).run()
    n, line = _estimate(at)
    # one forward per token, no gradients (the first-run note may name "the backward passes" warming up: look
    # at the pass count's own clause only)
    assert n > 4 and "of them with a backward pass" not in line
    at.multiselect(key=f"{P}.one.methods").set_value([]).run()
    assert not [c for c in at.caption if "forward passes" in c.value]  # nothing to run: nothing estimated


def test_attribution_bar_chart_names_both_axes():
    from app.views.inspect import attribution as ra

    m = types.SimpleNamespace(method="ig", scores=[0.5, -0.2])
    res = types.SimpleNamespace(tokens=["[CLS]", "the"], method=lambda _name: m)
    fig = ra.bar_chart(res, "ig")
    assert fig.layout.xaxis.title.text == "token (position · piece)" and fig.layout.yaxis.title.text == "attribution"
    assert fig.layout.title.text == ra.method_label("ig")  # the method names the chart, not its 320 px y axis


def test_the_estimate_checks_each_model_and_settings_once(use_tiny_zoo, monkeypatch):
    """#46 §2: the estimate beside Explain ran the input check (a forward pass) on every rerun; it goes through the
    app's cache (app.kit.cache.attribution_refusal), once per model and settings."""
    from core.inspect import attribution_inputs as AI

    calls = []
    real = AI.prepare
    monkeypatch.setattr(AI, "prepare", lambda lm, cfg: calls.append(cfg.text) or real(lm, cfg))
    at = _page()
    at.text_area(key=f"{P}.text.mask").set_value("A checked-once sentence about the [MASK] here.").run()
    seen = calls.count("A checked-once sentence about the [MASK] here.")
    assert seen == 1
    at.run()
    at.run()  # reruns with the same model and settings: no new check
    assert calls.count("A checked-once sentence about the [MASK] here.") == 1
    assert _estimate(at)[0] > 0  # and the estimate still shows


# ---------------------------------------------------------------------------------------------- counterfactuals
def test_counterfactuals_tab_finds_edits_and_sends_one_to_explain(use_tiny_zoo):
    text = "Paris is the [MASK] of France and a big city."
    at = _link({f"{P}.tab": "cf", f"{P}.cf.text": text, f"{P}.cf.budget": "1"})
    _finish(at, "cf")  # the link ran the search the button would have run
    res = runner().get(at.session_state[f"{P}.cf.job"]).result
    assert res.budget == 1 and res.found and all(len(c.edits) == 1 for c in res.found)
    assert any("The model answers" in m.value for m in at.markdown)
    diffs = [h.proto.body for h in at.get("html") if "cf-diff" in h.proto.body]
    assert len(diffs) == len(res.found) and all("<del" in d and "<ins" in d for d in diffs)
    assert "[MASK]" in diffs[0]  # the mask is never edited, and the user's text is shown escaped as text
    assert f"{P}.cf.result.csv" in [b.key for b in at.get("download_button")]
    assert any(c.key == f"{P}.cf.result.scatter" for c in at.get("plotly_chart"))
    next(b for b in at.button if b.key == f"{P}.cf.result.send.0").click().run()
    assert not at.exception, at.exception
    assert at.session_state[f"{P}.tab"] == "one" and at.query_params[f"{P}.tab"] == "one"
    assert at.text_area(key=f"{P}.text.mask").value == res.found[0].texts[0]
    _finish(at)  # ... and explained there at once, as its Explain button would
    assert runner().get(at.session_state[f"{P}.attribution.job"]).result.tokens[1:3] == ("paris", "is")


def test_counterfactuals_say_what_is_wrong_before_any_work(use_tiny_zoo):
    at = _link({f"{P}.tab": "cf"})
    at.text_area(key=f"{P}.cf.text").set_value("   ")
    next(b for b in at.button if b.key == f"{P}.cf.go").click().run()
    assert "no text to edit" in _errors(at) and f"{P}.cf.job" not in at.session_state
    at.text_area(key=f"{P}.cf.text").set_value("no mask here")
    next(b for b in at.button if b.key == f"{P}.cf.go").click().run()
    job = runner().get(at.session_state[f"{P}.cf.job"])
    runner().wait(job, timeout=120)
    at.run()
    assert job.status == "error" and "has no [MASK]" in " ".join(e.value for e in at.error)
    at = _page(target="token")
    at.session_state[f"{P}.tab"] = "cf"
    at.run()
    assert any("Counterfactuals are written for" in i.value for i in at.info)

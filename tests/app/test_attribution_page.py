"""AppTest: the Attributions page on the tiny zoo: each target, the job panel, bad input, and the batch tab."""
from __future__ import annotations

import pytest

from core.jobs import runner
from tests.app.conftest import new_app, page_path

P = "attribution"


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
    assert len(charts) == 4  # bar, methods side by side, rank correlation, per-layer heatmap
    assert len(at.get("download_button")) == 2


def test_pair_target_and_family_without_pair_head(use_tiny_zoo):
    at = _page("albert", "pair")
    at.multiselect(key=f"{P}.one.methods").set_value(["lig", "deeplift"])
    _click(at, "Explain")
    _finish(at)
    assert "SOP logit" in " ".join(m.value for m in at.markdown)
    assert "DeepLift does not apply" in " ".join(i.value for i in at.info)
    at = _page("roberta", "pair")
    assert "no sentence-pair head" in " ".join(w.value for w in at.warning)


def test_class_target_offers_session_fine_tuned_models(use_tiny_zoo, tiny_models, tmp_path):
    from core.tiny import make_tiny

    folder = make_tiny("distilbert", tmp_path / "clf", task="seqcls")
    at = _page(target="class")
    at.session_state["session.models"] = {}
    at.run()
    from app.state import SessionModel

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
    cases = [("", "empty"), ("no mask in this text", "has no mask"),
             ("word " * 200 + "[MASK]", "reads at most")]
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

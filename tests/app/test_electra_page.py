"""AppTest: Fill-mask with ELECTRA. A discriminator opens on "Which words look replaced?" (replaced token
detection), a generator fills masks with the same tab beside; bad input gets its message on the page.

Tiny random ELECTRA models (real bert-base-uncased tokenizer) stand in the Hugging Face cache under the official
ids, as they would after a download, so the sidebar lists them and the real from_pretrained path runs."""

from __future__ import annotations

import shutil

import pytest

from app.nav import PAGE_PARAM
from core.models.tiny import make_tiny
from core.predict.replaced_tokens import RTD_TASK
from tests.app.conftest import click, new_app, open_page, page_path

FAM = "electra"
DISC, GEN = f"google/{FAM}-small-discriminator", f"google/{FAM}-small-generator"
COMMIT = "0" * 40
RTD_TAB = "Which words look replaced?"


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    """An HF cache folder holding tiny models under the two official ids (the layout huggingface_hub reads)."""
    cache = tmp_path_factory.mktemp("hf_cache")
    built = tmp_path_factory.mktemp("built")
    for repo, task in ((DISC, RTD_TASK), (GEN, "mlm")):
        folder = make_tiny(FAM, built / repo.replace("/", "__"), seed=0, task=task)
        root = cache / ("models--" + repo.replace("/", "--"))
        (root / "refs").mkdir(parents=True)
        (root / "refs" / "main").write_text(COMMIT)
        shutil.copytree(folder, root / "snapshots" / COMMIT)
    return cache


@pytest.fixture()
def cached(hub_cache, monkeypatch):
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(hub_cache))  # read at each lookup; the env var only at import
    return hub_cache


def _fill_mask_with(checkpoint: str):
    at = new_app()
    at.sidebar.selectbox(key="sidebar.family").set_value(FAM).run()
    at.sidebar.selectbox(key="sidebar.checkpoint").set_value(checkpoint).run()
    at.switch_page(page_path("fill_mask")).run()
    assert not at.exception, at.exception
    return at


def _errors(at) -> str:
    return " ".join(e.value for e in at.error)


def _score(at) -> None:
    click(at, "Score the words")


def test_a_discriminator_opens_on_replaced_words_and_the_replaced_ones_are_marked(cached):
    at = _fill_mask_with(DISC)
    assert at.tabs[0].label == RTD_TAB
    assert any("is a discriminator" in i.value for i in at.info)  # in place of the MLM tabs
    assert at.selectbox(key="fill_mask.rtd.generator").options[-1] == GEN  # the cached generator is offered
    at.text_input(key="fill_mask.rtd.text").set_value("The cat slept on the warm mat all afternoon.")
    _score(at)
    assert not at.error, _errors(at)
    assert len(at.get("plotly_chart")) == 1
    table = at.dataframe[0].value
    assert list(table["word"]) == ["The", "cat", "slept", "on", "the", "warm", "mat", "all", "afternoon", "."]
    assert table["P(replaced)"].between(0, 1).all()
    assert "replaced by the generator" not in table.columns  # nothing was replaced: scored as written

    at.selectbox(key="fill_mask.rtd.generator").set_value(GEN)
    at.number_input(key="fill_mask.rtd.corrupt").set_value(2)
    _score(at)
    assert not at.error, _errors(at)
    table = at.dataframe[0].value
    assert table["replaced by the generator"].sum() == 2
    assert (table.loc[table["replaced by the generator"], "original word"] != "").all()
    assert any("The generator replaced 2 word(s)" in c.value for c in at.caption)
    assert any(m.value.startswith("The discriminator read:") for m in at.markdown)


def test_bad_input_on_the_replaced_words_tab(cached):
    at = _fill_mask_with(DISC)
    for text, corrupt, fragment in [
        ("The [MASK] slept.", 0, "never a mask"),
        ("", 0, "empty"),
        ("The cat slept.", 2, "needs a generator"),
        ("Two words.", 4, "at most 2"),
    ]:
        at.text_input(key="fill_mask.rtd.text").set_value(text)
        at.number_input(key="fill_mask.rtd.corrupt").set_value(corrupt)
        if fragment == "at most 2":
            at.selectbox(key="fill_mask.rtd.generator").set_value(GEN)
        _score(at)
        assert fragment in _errors(at), (text, _errors(at))
        assert not at.get("plotly_chart")  # no stale chart under a form that failed


def test_a_generator_fills_masks_with_the_replaced_words_tab_beside(cached):
    at = _fill_mask_with(GEN)
    assert [t.label for t in at.tabs][-1] == RTD_TAB and at.tabs[0].label != RTD_TAB
    at.text_area(key="fill_mask.text").set_value("The cat sat on the [MASK].")
    click(at, "Predict")
    assert not at.error, _errors(at)
    assert any("encoderlab-tokens" in m.value for m in at.markdown)
    assert at.selectbox(key="fill_mask.rtd.discriminator").options == [DISC]
    assert at.selectbox(key="fill_mask.rtd.generator").options == ["none: score the sentence as written", GEN]
    at.selectbox(key="fill_mask.rtd.generator").set_value(GEN)
    at.number_input(key="fill_mask.rtd.corrupt").set_value(1)
    _score(at)
    assert not at.error, _errors(at)
    assert at.dataframe[-1].value["replaced by the generator"].sum() == 1


def test_without_a_discriminator_the_tab_says_what_to_do(cached, monkeypatch, tmp_path):
    import huggingface_hub.constants as hc

    only_gen = tmp_path / "cache"
    shutil.copytree(cached / ("models--" + GEN.replace("/", "--")), only_gen / ("models--" + GEN.replace("/", "--")))
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(only_gen))
    at = _fill_mask_with(GEN)
    assert any("No ELECTRA discriminator can be had here" in i.value for i in at.info)


def test_a_link_shows_the_scores_at_once(cached):
    at = open_page(
        None,
        {
            PAGE_PARAM: "fill-mask",
            "family": FAM,
            "model": DISC,
            "fill_mask.rtd.text": "The cat slept.",
            "fill_mask.rtd.corrupt": "1",
            "fill_mask.rtd.generator": GEN,
        },
    )
    assert not at.error, _errors(at)
    assert at.dataframe[0].value["replaced by the generator"].sum() == 1

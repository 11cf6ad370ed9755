"""Next to a bundled mini's output, a note says what it is (size, corpus, held-out score from its card) and how to
get a full model, in full once per session and then as one line that opens; a head that did not learn says so and
is not drawn as a result; no note without a card."""

from __future__ import annotations

import json
import shutil

import pytest

from core.base.paths import ASSETS
from tests.app.conftest import click, page_for, page_path
from tests.conftest import BUNDLED_NAMES


@pytest.fixture()
def carded_zoo(tiny_models, tmp_path, monkeypatch):
    """The tiny models under the bundled names, each with the real mini's card (assets/models/*/encoderlab_card.json):
    the page reads the card, the forward pass stays tiny."""
    zoo = tmp_path / "zoo"
    for fam, name in BUNDLED_NAMES.items():
        dst = zoo / name
        shutil.copytree(tiny_models[fam], dst)
        if (card := ASSETS / "models" / name / "encoderlab_card.json").exists():  # xlmr-e5-small: once trained
            shutil.copy(card, dst)
    monkeypatch.setenv("ENCODERLAB_ZOO", str(zoo))
    return zoo


def _card(zoo, name: str) -> dict:
    return json.loads((zoo / name / "encoderlab_card.json").read_text())


@pytest.fixture()
def unlearned_sop(carded_zoo):
    """albert-mini's card as it was before #16's retraining: an SOP head below its majority baseline (46.6%
    against 53.4%), so the "did not learn" path is tested whatever the committed card says."""
    path = carded_zoo / "albert-mini" / "encoderlab_card.json"
    card = json.loads(path.read_text())
    card["heldout"].update(pair_acc=0.4655, pair_majority=0.5345, pairs=595)
    path.write_text(json.dumps(card))
    return carded_zoo


_page, _submit = page_for, click  # shared in tests/app/conftest.py


def _notes(at) -> list[str]:
    return [c.value for c in at.caption if "is a bundled mini" in c.value]


def test_card_numbers_and_heads(unlearned_sop):
    from app.kit.render import head_learned

    assert head_learned("encoderlab/bert-mini", "nsp") is True
    assert head_learned("encoderlab/albert-mini", "sop") is False  # 46.6% against a 53.4% majority
    assert head_learned("encoderlab/roberta-mini", "mlm") is True
    assert head_learned("bert-base-uncased", "nsp") is None  # no card: nothing is claimed


def test_the_committed_cards_heads():
    """The committed minis' own cards: MLM above its bar for all four, NSP above chance; the SOP head as its card
    measured it (tests/core/test_model_quality.py holds the numbers to their bars)."""
    from app.kit.render import head_learned
    from core.models.cards import bundled_card
    from core.registry.pretraining import zoo_recipes

    # the zoo's minis (the bundled XLM-R's card has no unigram bar: test_zh_bundled_model.py)
    for name in zoo_recipes():
        assert head_learned(f"encoderlab/{name}", "mlm") is True, name
    assert head_learned("encoderlab/bert-mini", "nsp") is True
    held = bundled_card("encoderlab/albert-mini")["heldout"]
    assert head_learned("encoderlab/albert-mini", "sop") is (held["pair_acc"] > max(held["pair_majority"], 0.5) + 0.02)


def test_fill_mask_says_what_the_mini_is(carded_zoo):
    at = _page("fill_mask")
    assert not _notes(at)  # nothing predicted yet, nothing to explain
    _submit(at, "Predict")
    (note,) = _notes(at)
    card = _card(carded_zoo, "bert-mini")
    assert "encoderlab/bert-mini" in note and f"{card['params'] / 1e6:.1f}M parameters" in note
    assert "WordNet glosses" in note and "Jane Austen's novels" in note
    assert f"{card['heldout']['mlm_top5']:.1%}" in note and "full model" in note
    assert f"{card['probe']['top5']:.0%} of everyday blanks" in note
    _submit(at, "Compare")
    assert len(_notes(at)) == 1  # the typed result's line
    assert any("are bundled minis" in c.value for c in at.caption)  # once, under the compared columns
    short = [c.value for c in at.caption if c.value.startswith("bundled mini ·")]
    sizes = [f"{_card(carded_zoo, n)['params'] / 1e6:.1f}M" for n in ("bert-mini", "roberta-mini")]
    assert len(short) == 2 and sizes[0] in short[0] and sizes[1] in short[1]  # one per compared column


def test_sentence_pair_head_that_learned_is_drawn_with_its_score(carded_zoo):
    at = _page("sentence_pair")
    _submit(at, "Score with Next Sentence Prediction")
    (note,) = _notes(at)
    held = _card(carded_zoo, "bert-mini")["heldout"]
    assert f"NSP accuracy {held['pair_acc']:.1%}" in note and f"majority: {held['pair_majority']:.1%}" in note
    assert len(at.get("plotly_chart")) == 1 and len(at.metric) == 3


def test_sentence_pair_head_that_did_not_learn_is_not_drawn(unlearned_sop):
    at = _page("sentence_pair", "albert")
    _submit(at, "Score with Sentence Order Prediction")
    warning = " ".join(w.value for w in at.warning)
    assert "SOP head did not learn" in warning and "46.6%" in warning and "53.4%" in warning
    assert not at.get("plotly_chart")  # no chart drawn as if the scores meant something
    assert not any("Reading the probe" in m.value for m in at.markdown)
    (box,) = [e for e in at.main.expander if "not meaningful" in e.label]
    assert len(box.metric) == 3  # the raw numbers stay one click away


def test_attention_says_what_the_mini_is(carded_zoo):
    at = _page("attention", "distilbert")
    (note,) = _notes(at)
    top5 = _card(carded_zoo, "distilbert-mini")["heldout"]["mlm_top5"]
    assert "encoderlab/distilbert-mini" in note and "3 layers" in note and f"{top5:.1%}" in note


def test_no_line_for_a_checkpoint_without_a_card(use_tiny_zoo):
    at = _page("fill_mask")
    _submit(at, "Predict")
    assert not _notes(at) and not any("did not learn" in w.value for w in at.warning)


def _full(at) -> list[str]:
    return [c.value for c in at.caption if "is a bundled mini:" in c.value]


def _boxes(at) -> list:
    return [e for e in at.main.expander if "is a bundled mini (" in e.label]


def test_mini_note_in_full_once_then_one_line(carded_zoo):
    at = page_for("fill_mask")
    click(at, "Predict")
    assert len(_full(at)) == 1 and not _boxes(at)  # first: in full
    click(at, "Predict")
    assert len(_full(at)) == 1 and not _boxes(at)  # and it stays so on this page's reruns
    at.switch_page(page_path("attention")).run()
    assert not at.exception
    (box,) = _boxes(at)  # elsewhere: one line that opens
    card = json.loads((carded_zoo / "bert-mini" / "encoderlab_card.json").read_text())
    assert "encoderlab/bert-mini" in box.label and f"{card['params'] / 1e6:.1f}M" in box.label
    (inside,) = [c.value for c in box.caption]
    assert "is a bundled mini:" in inside and "full model" in inside  # the full note, one click away

"""Issue 14, major 5: next to a bundled mini's output, one line says what it is (size, corpus, held-out score from
its card) and how to get a full model; a head that did not learn says so and is not drawn as a result."""
from __future__ import annotations

import json
import shutil

import pytest

from core.models import ASSETS
from tests.app.conftest import click, page_for
from tests.conftest import BUNDLED_NAMES


@pytest.fixture()
def carded_zoo(tiny_models, tmp_path, monkeypatch):
    """The tiny models under the bundled names, each with the real mini's card (assets/models/*/encoderlab_card.json):
    the page reads the card, the forward pass stays tiny."""
    zoo = tmp_path / "zoo"
    for fam, name in BUNDLED_NAMES.items():
        dst = zoo / name
        shutil.copytree(tiny_models[fam], dst)
        shutil.copy(ASSETS / "models" / BUNDLED_NAMES[fam] / "encoderlab_card.json", dst)
    monkeypatch.setenv("ENCODERLAB_ZOO", str(zoo))
    return zoo


_page, _submit = page_for, click  # shared in tests/app/conftest.py


def _notes(at) -> list[str]:
    return [c.value for c in at.caption if "is a bundled mini" in c.value]


def test_card_numbers_and_heads(carded_zoo):
    from app.render import head_learned

    assert head_learned("encoderlab/bert-mini", "nsp") is True
    assert head_learned("encoderlab/albert-mini", "sop") is False  # 46.6% against a 53.4% majority
    assert head_learned("encoderlab/roberta-mini", "mlm") is True
    assert head_learned("bert-base-uncased", "nsp") is None  # no card: nothing is claimed


def test_fill_mask_says_what_the_mini_is(carded_zoo):
    at = _page("fill_mask")
    assert not _notes(at)  # nothing predicted yet, nothing to explain
    _submit(at, "Predict")
    (note,) = _notes(at)
    card = json.loads((carded_zoo / "bert-mini" / "encoderlab_card.json").read_text())
    assert "encoderlab/bert-mini" in note and "22.9M parameters" in note and "WordNet glosses" in note
    assert f"{card['heldout']['mlm_top5']:.1%}" in note and "full model" in note
    _submit(at, "Compare")
    assert len(_notes(at)) == 1  # the typed result's line
    assert any("are bundled minis" in c.value for c in at.caption)  # once, under the compared columns
    short = [c.value for c in at.caption if c.value.startswith("bundled mini ·")]
    assert len(short) == 2 and "22.9M" in short[0] and "14.1M" in short[1]  # one per compared column


def test_sentence_pair_head_that_learned_is_drawn_with_its_score(carded_zoo):
    at = _page("sentence_pair")
    _submit(at, "Score with Next Sentence Prediction")
    (note,) = _notes(at)
    assert "NSP accuracy 91.2%" in note and "majority: 57.4%" in note
    assert len(at.get("plotly_chart")) == 1 and len(at.metric) == 3


def test_sentence_pair_head_that_did_not_learn_is_not_drawn(carded_zoo):
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
    assert "encoderlab/distilbert-mini" in note and "3 layers" in note and "44.6%" in note


def test_no_line_for_a_checkpoint_without_a_card(use_tiny_zoo):
    at = _page("fill_mask")
    _submit(at, "Predict")
    assert not _notes(at) and not any("did not learn" in w.value for w in at.warning)

"""Walk findings (inspect): a token is shown as the text it stands for (core.base.text.display_piece), never with
the tokenizer's Ġ/▁ markers, for every bundled family; the pages' core results carry that form; the exhaustive
head-importance estimate and the attributions estimate's first-run flag."""
from __future__ import annotations

import sys

import pytest
from transformers import AutoTokenizer

from core.base.paths import ASSETS
from core.base.text import BARE_MARK, display_piece
from core.inspect import attribution_estimate as AE
from core.inspect.head_importance import exhaustive_seconds

BUNDLED = ("bert", "roberta", "albert", "distilbert")
TEXT = "The capital of France is amazingly beautiful, said the tokenization café."
MARKERS = ("Ġ", "▁")


def _tok(family: str):
    return AutoTokenizer.from_pretrained(ASSETS / "models" / f"{family}-mini")


@pytest.mark.parametrize("family", BUNDLED)
def test_display_piece_has_no_markers_for_every_bundled_family(family):
    tok = _tok(family)
    pieces = tok.convert_ids_to_tokens(tok(TEXT)["input_ids"])
    assert any(m in p for p in pieces for m in MARKERS) or family in ("bert", "distilbert")  # the case is real
    for p in pieces + ["Ġ", "▁", "ĠFrance", "▁capital"]:
        for shown in (display_piece(p, tok), display_piece(p)):
            assert shown and not any(m in shown for m in MARKERS), (p, shown)
            assert shown == shown.strip()
    assert display_piece("ĠFrance", tok) == display_piece("ĠFrance") == "France"
    assert display_piece("▁", tok) == BARE_MARK
    assert display_piece(tok.cls_token, tok) == tok.cls_token  # special tokens stay as they are


def test_wordpiece_continuations_keep_their_joiner():
    tok = _tok("bert")
    assert display_piece("##ing", tok) == "##ing"
    assert display_piece("▁capital") == "capital" and display_piece("Ġ") == BARE_MARK


def test_exhaustive_estimate_scales_with_the_work():
    bert_mini = exhaustive_seconds(6, 12, 384, 64)
    assert bert_mini == pytest.approx(33.0)  # what it is calibrated on: the bundled mini's measured run
    assert exhaustive_seconds(6, 12, 384, 16) == pytest.approx(bert_mini / 4)
    assert exhaustive_seconds(6, 12, 384, 64, "cuda") < bert_mini


def test_attribution_estimate_says_when_a_run_is_the_first(monkeypatch):
    import torch

    model = torch.nn.Linear(2, 2)
    monkeypatch.delitem(sys.modules, "captum.attr", raising=False)
    assert AE.first_run() and AE.first_run(model)  # captum not loaded yet: it will be
    monkeypatch.setitem(sys.modules, "captum.attr", object())
    assert not AE.first_run() and AE.first_run(model)  # loaded, but no run has finished on this model
    AE.mark_warm(model)
    assert not AE.first_run(model)

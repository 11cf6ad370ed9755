"""core.base.text.display_piece shows a token as the text it stands for: no Ġ/▁ markers for any bundled family's
tokenizer, no WordPiece ##, special tokens as they are."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from core.base.paths import ASSETS
from core.base.text import BARE_MARK, display_piece

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


def test_wordpiece_continuations_read_as_written_inside_their_word():
    """#46 §5.6: "8·##wny" in charts; a continuation reads as the tokenizer writes it in its word (the raw piece is
    in the hover), for BERT's and DistilBERT's tokenizers and without one."""
    for family in ("bert", "distilbert"):
        tok = _tok(family)
        pieces = tok.tokenize("tokenization")
        assert pieces[0] == "token" and pieces[1].startswith("##"), pieces  # the case is real
        shown = [display_piece(p, tok) for p in pieces]
        assert "".join(shown) == tok.convert_tokens_to_string(pieces) == "tokenization"
        assert display_piece("##ing", tok) == display_piece("##ing") == "ing"
    assert display_piece("##") == "##" and display_piece("#") == "#"  # a hash piece is text
    assert display_piece("▁capital") == "capital" and display_piece("Ġ") == BARE_MARK

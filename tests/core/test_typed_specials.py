"""Typed special tokens ([CLS] [SEP] [PAD], <s> </s>) are taken out with a note on every page's core call, so they
never become real control tokens (issue 14): core/base/text.py, used by fill-mask, sentence pair and attention."""

from __future__ import annotations

import pytest

from core.base.text import strip_typed_specials
from core.inspect.attention import AttentionConfig, compute_attention
from core.models.loading import ModelSpec, load
from core.predict.sentence_pair import PairConfig, PairError, PairRow, predict_pair, score_batch


def test_strip_typed_specials_any_case_and_spacing():
    assert strip_typed_specials("[cls] The cat [SEP]  sat <s>here</s> [PAD]") == (
        "The cat sat here",
        ("[CLS]", "[SEP]", "[PAD]", "<s>", "</s>"),
    )
    assert strip_typed_specials("The [MASK] sat.") == ("The [MASK] sat.", ())  # masks are not control tokens here


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_attention_reads_typed_specials_as_removed(tiny_models, family):
    lm = load(ModelSpec(family, str(tiny_models[family]), "cpu"), task="base", attentions=True)
    tok = lm.tokenizer
    r = compute_attention(lm, AttentionConfig(f"The cat {tok.sep_token} sat [PAD] down [CLS]."))
    assert r.tokens.count(tok.sep_token) == 1 and tok.pad_token not in r.tokens  # only the tokenizer's own
    assert r.tokens.count(tok.cls_token) == 1
    (note,) = r.notes
    assert "Removed" in note and "[PAD]" in note
    plain = compute_attention(lm, AttentionConfig("The cat sat down."))
    assert plain.notes == ()
    with pytest.raises(ValueError, match="only special tokens"):
        AttentionConfig("[CLS] [SEP]")
    with pytest.raises(ValueError, match="Sentence B holds only special tokens"):
        AttentionConfig("A cat.", "<s></s>", pair=True)


def test_sentence_pair_reads_typed_specials_as_removed(tiny_models):
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), "pretraining")
    r = predict_pair(lm, PairConfig("She sat [SEP] down.", "[CLS] Then [PAD] she slept."), probe=False)
    assert all(
        s.tokens.count("[SEP]") == 2 and s.tokens.count("[CLS]") == 1 and "[PAD]" not in s.tokens for s in r.scores
    )
    assert any("Removed [CLS], [SEP], [PAD]" in n for n in r.notes)
    assert r.scores[0].first == "She sat down." and r.scores[0].second == "Then she slept."
    with pytest.raises(PairError, match="only special tokens"):
        predict_pair(lm, PairConfig("[SEP]", "A sentence."))
    b = score_batch(lm, [PairRow("A [SEP] b.", "C d.", 1), PairRow("E f.", "G h.", 0)])
    assert b.notes and "[SEP]" in b.notes[0]
    assert score_batch(lm, [PairRow("A b.", "C d.", 1)]).notes == ()


def test_typed_mask_never_offers_a_bare_word_start_marker(tiny_models):
    """ALBERT's tokenizer makes a typed [MASK] one whole-word piece: a lone "▁" there is no answer (issue 14)."""
    from core.predict.fill_mask import FillMaskConfig, fill_mask_batch

    lm = load(ModelSpec("albert", str(tiny_models["albert"]), "cpu"), "mlm")
    lone = lm.tokenizer.convert_tokens_to_ids("▁")
    assert lone != lm.tokenizer.unk_token_id
    (r,) = fill_mask_batch(lm, [FillMaskConfig("The cat sat on the [MASK] and the [MASK].", top_k=50)])
    for m in r.masks:
        assert all(c.piece != "▁" for c in m.candidates)
    assert "▁" not in r.fill_pieces

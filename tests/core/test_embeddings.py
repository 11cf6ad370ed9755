"""core.walkthrough.embeddings and core.walkthrough.masking_view on tiny models of all four families: the three parts add up (after LayerNorm)
to the model's own embedding output; segments per family; the MLM corruption is BERT's 15% / 80-10-10, dynamic, whole-word."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.models.loading import ModelSpec, load
from core.walkthrough.embeddings import embedding_parts
from core.walkthrough.masking_view import corrupt, masking_shares

A = "the quick brown fox jumps over the lazy dog"
B = "it was not amused by the unexpected interruption"


@pytest.fixture(scope="module")
def models(tiny_models):
    return {f: load(ModelSpec(f, str(p), "cpu"), "mlm") for f, p in tiny_models.items()}


def _reference(lm, text, text_b=None):
    """The model's own embedding layer on the same input (eval mode: no dropout)."""
    base = lm.model.base_model
    enc = lm.tokenizer(text, text_b, return_tensors="pt", return_token_type_ids=True)
    with torch.no_grad():
        if lm.spec.family == "distilbert":
            return base.embeddings(enc["input_ids"])[0].numpy()
        types = enc["token_type_ids"] if base.config.type_vocab_size > 1 else None
        return base.embeddings(input_ids=enc["input_ids"], token_type_ids=types)[0].numpy()


@pytest.mark.parametrize("pair", [False, True])
def test_parts_add_up_to_the_models_embedding_output(models, family, pair):
    lm = models[family]
    if not hasattr(lm.model.base_model.embeddings, "position_embeddings"):  # rotary positions (ModernBERT)
        with pytest.raises(ValueError, match="no BERT-style embedding layer"):
            embedding_parts(lm, A, B if pair else None)
        return
    r = embedding_parts(lm, A, B if pair else None)
    ref = _reference(lm, A, B if pair else None)
    assert r.output.shape == ref.shape
    np.testing.assert_allclose(r.output, ref, atol=1e-5)
    n = len(r.tokens)
    assert len(r.token_type_ids) == len(r.position_ids) == len(r.special) == n
    for arr in (r.token_norms, r.position_norms, r.sum_norms, r.output_norms):
        assert arr.shape == (n,) and np.all(np.isfinite(arr))
    np.testing.assert_allclose(r.output_norms, np.linalg.norm(r.output, axis=-1), rtol=1e-5)
    assert r.special[0] and r.special[-1]  # [CLS] ... [SEP] / <s> ... </s>
    if pair:
        assert r.sentence_b_start is not None and 1 < r.sentence_b_start < n - 1
    else:
        assert r.sentence_b_start is None


def test_segments_positions_and_sizes_per_family(models):
    bert = embedding_parts(models["bert"], A, B)
    assert bert.segments == "ab" and bert.has_segments and bert.type_vocab_size == 2
    assert set(bert.token_type_ids) == {0, 1} and bert.token_type_ids[bert.sentence_b_start] == 1
    assert bert.position_ids == tuple(range(len(bert.tokens)))
    assert not bert.factorized

    roberta = embedding_parts(models["roberta"], A, B)
    assert roberta.segments == "single" and not roberta.has_segments and roberta.type_vocab_size == 1
    assert set(roberta.token_type_ids) == {0}
    np.testing.assert_allclose(roberta.segment_norms, roberta.segment_norms[0])  # one vector added to every token
    pad = models["roberta"].tokenizer.pad_token_id
    assert roberta.position_ids[0] == pad + 1  # positions start after the padding index

    distil = embedding_parts(models["distilbert"], A, B)
    assert distil.segments == "none" and distil.segment_norms is None and distil.type_vocab_size == 0
    assert set(distil.token_type_ids) == {0}

    albert = embedding_parts(models["albert"], A)
    cfg = models["albert"].model.config
    assert albert.factorized and albert.embedding_size == cfg.embedding_size < albert.hidden_size == cfg.hidden_size
    assert albert.output.shape[1] == cfg.embedding_size


def test_empty_text_is_refused(models):
    with pytest.raises(ValueError, match="empty"):
        embedding_parts(models["bert"], "  ")
    with pytest.raises(ValueError, match="empty"):
        corrupt(models["bert"], "", seed=1)


def test_corruption_is_dynamic_and_reproducible(models, family):
    lm = models[family]
    text = " ".join([A, B] * 3)
    one, same, other = corrupt(lm, text, 1), corrupt(lm, text, 1), corrupt(lm, text, 2)
    assert one == same  # a seed is one mask
    assert one.selected != other.selected or one.corrupted != other.corrupted  # a new seed, a new mask
    assert one.selected and all(not one.special[i] for i in one.selected)  # specials are never selected
    for i, a in enumerate(one.actions):
        if a == "mask":
            assert one.corrupted[i] == lm.tokenizer.mask_token
        elif a == "keep" or not a:
            assert one.corrupted[i] == one.tokens[i]
        else:
            assert one.corrupted[i] != one.tokens[i]


def test_shares_are_15_percent_and_80_10_10(models):
    s = masking_shares(models["bert"], " ".join([A, B] * 2), draws=4000, seed=0)
    assert abs(s.selected - 0.15) < 0.01
    assert abs(s.mask - 0.8) < 0.02 and abs(s.random - 0.1) < 0.02 and abs(s.keep - 0.1) < 0.02
    assert abs(s.mask + s.random + s.keep - 1.0) < 1e-9
    with pytest.raises(ValueError, match="draws"):
        masking_shares(models["bert"], A, draws=0)


def test_whole_word_masking_takes_every_piece_of_a_word(models):
    lm = models["bert"]
    text = "unbelievably unremarkable interruptions " * 6
    for seed in range(5):
        v = corrupt(lm, text, seed, whole_word=True)
        picked = set(v.selected)
        for i, w in enumerate(v.words):
            if not v.special[i]:
                assert (i in picked) == (w in picked)  # a piece is selected exactly when its word's first piece is
    assert any(t.startswith("##") for t in v.tokens)  # the text does split into sub-tokens here

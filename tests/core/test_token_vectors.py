"""core/represent/token_vectors: batched hidden states equal one sentence's own forward, rows line up with words."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.models.loading import ModelSpec, load
from core.represent.token_vectors import MAX_SENTENCES, WORD_RE, token_vectors

SENTENCES = [
    "The bank of the river was muddy.",
    "I put money in the bank, unbelievably!",
    "Hi",
    "A much longer sentence about banks, rivers and money, so that the batch needs padding.",
]


@pytest.fixture(scope="module")
def models(tiny_models):
    return {f: load(ModelSpec(f, str(p), "cpu"), "base") for f, p in tiny_models.items()}


def test_batched_rows_equal_each_sentences_own_forward(models, family):
    lm = models[family]
    tv = token_vectors(lm, SENTENCES, batch_tokens=40)  # several batches, padded
    assert tv.layers == tuple(range(tv.num_depths))
    for i, s in enumerate(SENTENCES):
        enc = lm.tokenizer(s, return_tensors="pt")
        with torch.no_grad():
            hs = lm.model.base_model(**enc, output_hidden_states=True).hidden_states
        rows = np.where(tv.sentence_ids == i)[0]
        assert len(rows) >= len(WORD_RE.findall(s)) - 1  # every word has a row (ALBERT may fold a "!" into "y!")
        for d in (0, tv.num_depths - 1):
            want = hs[d][0][tv.positions[rows]].numpy()
            assert np.abs(tv.at(d)[rows] - want).max() < 1e-4, (family, i, d)


def test_words_spans_and_the_word_unit(models, family):
    lm = models[family]
    pieces = token_vectors(lm, SENTENCES, [1])
    words = token_vectors(lm, SENTENCES, [1], unit="word")
    assert set(words.words) <= set(w for s in SENTENCES for w in WORD_RE.findall(s))
    assert "unbelievably" in words.words and "bank" in words.words
    # bank appears once per first two sentences; "banks" is another word
    assert len(words.rows_of("Bank")) == 2 and len(words.rows_of("banks")) == 1
    # a word row is the mean of its pieces
    w = int(words.rows_of("unbelievably")[0])
    rows = np.where((pieces.sentence_ids == words.sentence_ids[w]) & (pieces.word_index == words.word_index[w]))[0]
    assert len(rows) >= 1 and pieces.first_piece[rows[0]] and not pieces.first_piece[rows[1:]].any()
    assert np.allclose(words.at(1)[w], pieces.at(1)[rows].mean(0), atol=1e-5)
    means = words.sentence_means()
    assert means.shape == (1, len(SENTENCES), words.vectors.shape[2])


def test_bad_input_says_what_to_do(models):
    lm = models["bert"]
    with pytest.raises(ValueError, match="no text"):
        token_vectors(lm, ["", "  "])
    with pytest.raises(ValueError, match="Depths must be"):
        token_vectors(lm, ["hello"], [99])
    with pytest.raises(ValueError, match="more than"):
        token_vectors(lm, ["x"] * (MAX_SENTENCES + 1))
    with pytest.raises(ValueError, match="Unit"):
        token_vectors(lm, ["x"], unit="char")

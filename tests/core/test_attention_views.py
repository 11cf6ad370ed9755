"""core.inspect.attention_views: selections and the word-level view, on tiny models of every family (real tokenizers)."""

from __future__ import annotations

import numpy as np
import pytest

from core.base.segment import is_cjk
from core.inspect.attention import AttentionConfig, compute_attention, mixing, relevance, rollout
from core.inspect.attention_views import (
    SelectionConfig,
    WordGroups,
    group_words,
    layer_map,
    selection_attention,
    word_attention,
    word_groups,
    word_view,
)
from core.models.loading import ModelSpec, load

TEXT = "The unbelievably sleepy cat sat on the mat."


@pytest.fixture(scope="module")
def loaded(tiny_models):
    return {f: load(ModelSpec(f, str(p), "cpu"), task="base", attentions=True) for f, p in tiny_models.items()}


def _rand_att(layers=2, heads=3, n=6, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((layers, heads, n, n))
    return x / x.sum(-1, keepdims=True)


# ---------------------------------------------------------------------------------------------- selections
def test_selection_mean_from_is_a_distribution_and_sum_is_the_sum():
    att = _rand_att()
    mean = selection_attention(att, SelectionConfig((1, 3), "mean", "from"))
    total = selection_attention(att, SelectionConfig((3, 1, 3), "sum", "from"))  # duplicates count once
    np.testing.assert_allclose(mean.sum(-1), 1.0)
    np.testing.assert_allclose(total, att[:, :, 1] + att[:, :, 3])
    np.testing.assert_allclose(total.sum(-1), 2.0)


def test_selection_to_reads_columns():
    att = _rand_att()
    to = selection_attention(att, SelectionConfig((0, 4), "sum", "to"))
    np.testing.assert_allclose(to, att[..., :, 0] + att[..., :, 4])
    avg = selection_attention(att, SelectionConfig((0, 4), "mean", "to"))
    np.testing.assert_allclose(avg, to / 2)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(positions=()), "No token is selected"),
        (dict(positions=(0,), how="max"), "sum, mean"),
        (dict(positions=(0,), direction="up"), "'from'"),
    ],
)
def test_selection_config_says_how_to_fix(kwargs, words):
    with pytest.raises(ValueError, match=words):
        SelectionConfig(**kwargs)


def test_selection_outside_the_text():
    with pytest.raises(ValueError, match="outside 0..5"):
        selection_attention(_rand_att(), SelectionConfig((7,)))


# ---------------------------------------------------------------------------------------------- word maps
def test_word_attention_to_is_sum_from_is_mean_on_a_hand_made_grouping():
    att = _rand_att(n=5)
    g = WordGroups(
        words=("[CLS]", "un·believ·able", "[SEP]"),
        pieces=("", "", ""),
        groups=((0,), (1, 2, 3), (4,)),
        special=(True, False, True),
        sentence_b_start=None,
        n_tokens=5,
    )
    w = word_attention(att, g)
    assert w.shape == (2, 3, 3, 3)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(w[..., 0, 1], att[..., 0, 1:4].sum(-1), atol=1e-6)  # TO a word: sum of its pieces
    np.testing.assert_allclose(w[..., 1, 0], att[..., 1:4, 0].mean(-1), atol=1e-6)  # FROM a word: mean of them
    np.testing.assert_allclose(w[..., 1, 1], att[..., 1:4, 1:4].sum(-1).mean(-1), atol=1e-6)
    with pytest.raises(ValueError, match="another text"):
        word_attention(_rand_att(n=6), g)


def test_layer_map_is_one_head_or_their_mean_per_token_or_per_word():
    att = _rand_att(n=5)
    np.testing.assert_allclose(layer_map(att, 1, 2), att[1, 2])
    np.testing.assert_allclose(layer_map(att, 0), att[0].mean(0))
    g = WordGroups(("[CLS]", "ab", "[SEP]"), ("", "", ""), ((0,), (1, 2, 3), (4,)), (True, False, True), None, 5)
    np.testing.assert_allclose(layer_map(att, 1, None, g), word_attention(att[1].mean(0)[None, None], g)[0, 0])
    with pytest.raises(ValueError, match="another text"):
        layer_map(_rand_att(n=6), 0, None, g)


def test_mixing_holds_the_layer_the_rollout_and_their_shares():
    att = _rand_att(layers=3, n=5)
    m = mixing(att, 1, 0)
    np.testing.assert_allclose(m.raw, att[1].mean(0))
    np.testing.assert_allclose(m.rollout, rollout(att))
    np.testing.assert_allclose(m.raw_relevance, relevance(att[1].mean(0), 0))
    np.testing.assert_allclose(m.rollout_relevance.sum(), 1.0)


def test_group_words_splits_cjk_runs_by_character():
    # byte-level BPE: a run of CJK characters is one pre-token, and each character is 3 byte pieces
    tokens = ["<s>", "a", "b", "c", "d", "e", "f", "Ġok", "</s>"]
    word_ids = [None, 0, 0, 0, 0, 0, 0, 1, None]
    seq = [None, 0, 0, 0, 0, 0, 0, 0, None]
    offs = [(0, 0), (0, 1), (0, 1), (0, 1), (1, 2), (1, 2), (1, 2), (3, 5), (0, 0)]
    g = group_words(tokens, word_ids, seq, offs, ["我爱 ok"])
    assert g.words == ("<s>", "我", "爱", "ok", "</s>")
    assert g.groups == ((0,), (1, 2, 3), (4, 5, 6), (7,), (8,))
    assert g.special == (True, False, False, False, True)


@pytest.mark.parametrize("fam", ["bert", "roberta", "albert", "distilbert"])
def test_word_view_on_every_family(loaded, fam):
    lm = loaded[fam]
    cfg = AttentionConfig(TEXT)
    r = compute_attention(lm, cfg)
    wv = word_view(lm.tokenizer, cfg, r.attentions)
    g = wv.groups
    assert g.n_tokens == r.n_tokens
    assert sorted(i for grp in g.groups for i in grp) == list(range(r.n_tokens))  # every piece once
    assert g.special[0] and g.special[-1] and g.words[0] == r.tokens[0] and g.words[-1] == r.tokens[-1]
    assert wv.attentions.shape == (r.n_layers, r.n_heads, g.n_words, g.n_words)
    np.testing.assert_allclose(wv.attentions.sum(-1), 1.0, atol=5e-3)  # rows still sum to 1 (float16 input)
    # the text's words come back as written (punctuation may stay with its word in SentencePiece)
    joined = " ".join(w for w, s in zip(g.words, g.special) if not s)
    for word in ("unbelievably", "sleepy", "cat", "mat"):
        assert word in joined.lower()
    multi = [i for i in g.merged()]
    assert multi, "the tiny tokenizers split 'unbelievably' into pieces"
    i = next(i for i, w in enumerate(g.words) if w.lower().startswith("unbelievably"))
    assert len(g.groups[i]) >= 3  # a word of (at least) 3 pieces
    a = r.attentions.astype(np.float64)
    pcs = list(g.groups[i])
    np.testing.assert_allclose(wv.attentions[..., 0, i], a[..., 0, pcs].sum(-1), atol=1e-3)
    np.testing.assert_allclose(wv.attentions[..., i, 0], a[..., pcs, 0].mean(-1), atol=1e-3)


def test_word_view_for_a_pair(loaded):
    lm = loaded["roberta"]
    cfg = AttentionConfig("The cat slept.", "It was tired.", pair=True)
    r = compute_attention(lm, cfg)
    g = word_groups(lm.tokenizer, cfg)
    assert g.n_tokens == r.n_tokens
    b = g.sentence_b_start
    assert b is not None and g.words[b] == "It" and g.groups[b][0] == r.sentence_b_start


def test_word_view_chinese_words_are_the_segmenters(loaded):
    """Chinese with the WordPiece tokenizer and a byte-level BPE one: the words are the 词 of core.base.segment
    (喜欢 is one word of two characters) either way, punctuation a word of its own."""
    text = "我喜欢猫。"
    for fam in ("bert", "roberta"):
        lm = loaded[fam]
        cfg = AttentionConfig(text)
        r = compute_attention(lm, cfg)
        g = word_groups(lm.tokenizer, cfg)
        chars = [w for w, s in zip(g.words, g.special) if not s]
        assert "".join(chars) == text, (fam, g.words)
        assert chars == ["我", "喜欢", "猫", "。"], (fam, g.words)
        if fam == "roberta":  # bytes: three pieces per character, merged back
            assert any(len(grp) > 1 for grp, s in zip(g.groups, g.special) if not s)
        np.testing.assert_allclose(word_attention(r.attentions, g).sum(-1), 1.0, atol=5e-3)


def test_is_cjk():
    assert is_cjk("猫") and is_cjk("あ") and not is_cjk("a") and not is_cjk("。")

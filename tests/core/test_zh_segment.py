"""Chinese words (词) from the one segmenter (core.base.segment, jieba) wherever "word" matters (issue #30, part 1).

Real Chinese sentences through: the segmenter itself (offline, quiet, no cache file); whole-word masking, which must
mask every token of a 词 together, with BERT's 15% and 80/10/10 holding over many draws (the Walkthrough's masking
view and the Pretraining lab's instances); fill-mask's words; the Words attention view; corpus search and the
projector's words. The models are tiny random ones on tokenizers trained here on Chinese text: a WordPiece one
(one token per character, as BERT's) and a Unigram one (several characters per piece, as XLM-R's).
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from core.base import segment
from core.base.messages import read_catalogue
from core.base.paths import ASSETS
from core.base.segment import has_han, regroup, word_spans
from core.data.masking import segment_starts, word_index, word_starts
from core.inspect.attention import AttentionConfig
from core.inspect.attention_views import word_groups
from core.models.loading import ModelSpec, load
from core.models.tiny import tiny_config
from core.models.tokenizer_build import save_tokenizer, train_tokenizer
from core.predict import sentence_pair as sp
from core.predict.fill_mask import FillMaskConfig, encode, words
from core.registry import build_model
from core.represent.corpus_index import query_words
from core.represent.projector import MIN_POINTS, ProjectorConfig, pick_sentences
from core.represent.token_vectors import sentence_words, token_vectors
from core.train.pretrain.data import collate, make_instances, tokenize_documents
from core.walkthrough.masking_view import corrupt, masking_shares

ROOT = Path(__file__).resolve().parents[2]
CAPITAL = "中国的首都是北京。"
MILK = "我每天早上喝一杯牛奶。"
CODE = "我用Python写代码。"
PARK = "今天天气很好，我们去公园散步吧。"
SCHOOL = "我的朋友在大学学习计算机科学。"
SENTENCES = [
    CAPITAL,
    MILK,
    CODE,
    PARK,
    SCHOOL,
    "北京是一个美丽的城市。",
    "他每天早上去公园跑步。",
    "我们一起学习中文吧。",
    "妈妈在厨房做饭。",
    "这本书很有意思。",
]
ENGLISH = ["the quick brown fox jumps over the lazy dog", "python is a programming language", "we write code every day"]
LONG = "".join([CAPITAL, MILK, PARK, SCHOOL] * 2)  # about 60 tokens: enough positions for the share tests


def _words(text: str) -> list[str]:
    return [text[a:b] for a, b in word_spans(text)]


def _tiny(family: str, folder: Path, vocab: int):
    raw = train_tokenizer(family, (SENTENCES + ENGLISH) * 3, vocab_size=vocab)
    tok = save_tokenizer(family, raw, folder)
    torch.manual_seed(0)
    build_model(family, "pretraining", tiny_config(family, len(tok), tok)).save_pretrained(str(folder))
    return load(ModelSpec(family, str(folder), "cpu"), "mlm")


@pytest.fixture(scope="module")
def zh(tmp_path_factory):
    """family -> a tiny model whose tokenizer knows these Chinese sentences: bert (WordPiece, a token per
    character) and xlm-roberta (Unigram, pieces of several characters)."""
    base = tmp_path_factory.mktemp("zh")
    return {"bert": _tiny("bert", base / "bert", 400), "xlm-roberta": _tiny("xlm-roberta", base / "xlmr", 300)}


# What the texts said before the views grouped Chinese by jieba's 词 (#46): each character a word
CHARACTER_WORDS = re.compile(r"Chinese character|character is a word|每个汉字|一个汉字|单个汉字")


def _explain_ci(*keys: str) -> None:
    """The catalogue's en and zh texts of ``keys`` (namespace.key, the namespace a file of assets/i18n) say that
    Chinese words are jieba's 词, and none says each Chinese character is a word."""
    for key in keys:
        ns, name = key.split(".", 1)
        entry = read_catalogue(ASSETS / "i18n" / f"{ns}.toml")[name]
        for lang in ("en", "zh"):
            text = entry[lang]
            assert not CHARACTER_WORDS.search(text), (key, lang, text)
            assert "jieba" in text, (key, lang, text)


def _groups(text: str) -> list[tuple[int, int]]:
    """The 词 each character of ``text`` is in: char index -> word span (the expected grouping)."""
    return {i: (a, b) for a, b in word_spans(text) for i in range(a, b)}


# ---------------------------------------------------------------------------------------------- the segmenter
def test_word_spans_cut_real_sentences_into_ci():
    assert _words(CAPITAL) == ["中国", "的", "首都", "是", "北京"]
    assert _words(MILK) == ["我", "每天", "早上", "喝一杯", "牛奶"]
    assert _words(PARK) == ["今天天气", "很", "好", "我们", "去", "公园", "散步", "吧"]
    code = _words(CODE)
    assert "Python" in code and code[-2:] == ["写", "代码"] and "".join(code) == "我用Python写代码"
    # punctuation and spaces are never words; spans are in order and do not overlap
    for text in SENTENCES:
        spans = word_spans(text)
        assert all(a < b <= c for (a, b), (c, _) in zip(spans, spans[1:]))
        assert not any(ch in "。，" for a, b in spans for ch in text[a:b])


def test_other_text_is_split_as_before():
    assert _words("The quick fox, don't  stop: 42!") == ["The", "quick", "fox", "don", "t", "stop", "42"]
    assert not has_han("plain English, ありがとう") and has_han("我") and has_han("hi 北京")
    assert _words("東京へ行きます") == ["東", "京", "へ", "行", "きます"]  # kana: Japanese, kanji stay one each
    assert word_spans("") == []


def test_regroup_moves_each_chinese_character_into_its_ci():
    per_char = [(i, i + 1) for i in range(len(CAPITAL))]  # one word per character, punctuation too
    assert [CAPITAL[a:b] for a, b in regroup(CAPITAL, per_char)] == ["中国", "的", "首都", "是", "北京", "。"]
    english = [(0, 3), (4, 9), (9, 10)]
    assert regroup("the quick.", english) == english  # no Han characters: unchanged


def test_segmenter_is_offline_quiet_and_writes_no_cache(tmp_path):
    """jieba's dictionary is in its wheel: a fresh process segments with no network, says nothing on stderr and
    leaves no prefix-dict cache in the temp folder (jieba's default would write jieba.cache there)."""
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
        "no_proxy": "",
        "http_proxy": "http://0.0.0.0:9",
        "https_proxy": "http://0.0.0.0:9",
    }
    code = "from core.base.segment import word_spans; print(len(word_spans('中国的首都是北京。')))"
    out = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "5" and out.stderr == ""
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------- word starts
def test_segment_starts_join_the_characters_of_a_ci():
    offsets = [(i, i + 1) for i in range(len(CAPITAL))]  # BERT: one token per character
    starts = word_starts(list(CAPITAL), "wordpiece")
    assert all(starts)  # what word_ids()/the piece rule gives Chinese: every character a word
    got = segment_starts(CAPITAL, offsets, starts)
    assert got == [True, False, True, True, False, True, True, False, True]  # 中国 的 首都 是 北京 。
    assert word_index(got) == [0, 0, 2, 3, 3, 5, 6, 6, 8]
    # Unigram: only the first piece has "▁", pieces of several characters; a lone "▁" opens the first word
    pieces, offs = (
        ["▁", "中国", "的", "首都", "是北", "京", "。"],
        [(0, 0), (0, 2), (2, 3), (3, 5), (5, 7), (7, 8), (8, 9)],
    )
    got = segment_starts(CAPITAL, offs, word_starts(pieces, "unigram"))
    assert got == [True, False, True, True, True, True, True]  # 是北 starts in 是; 京 in 北京; 。 after a 词
    # no Han characters: unchanged
    assert segment_starts("un believ", [(0, 2), (3, 8)], [True, False]) == [True, False]


# ---------------------------------------------------------------------------------------------- whole-word masking
@pytest.mark.parametrize("fam", ["bert", "xlm-roberta"])
def test_whole_word_masking_masks_every_token_of_a_ci_together(zh, fam):
    lm = zh[fam]
    enc = lm.tokenizer(CAPITAL, return_offsets_mapping=True)
    expect = _groups(CAPITAL)
    seen_multi = False
    for seed in range(40):
        v = corrupt(lm, CAPITAL, seed, whole_word=True)
        picked = set(v.selected)
        for i, w in enumerate(v.words):
            if not v.special[i]:
                assert (i in picked) == (w in picked)  # a token is selected exactly when its word's first is
        # the words are the 词: two tokens share a word when their first characters share a 词
        inner = [i for i, s in enumerate(v.special) if not s]
        for i, j in zip(inner, inner[1:]):
            a, b = enc["offset_mapping"][i][0], enc["offset_mapping"][j][0]
            same = expect.get(a) is not None and expect.get(a) == expect.get(b)
            assert (v.words[i] == v.words[j]) == same, (fam, v.tokens, i, j)
            seen_multi |= same
    assert seen_multi  # some 词 here is more than one token
    if fam == "bert":
        assert [t for t in v.tokens if t not in ("[CLS]", "[SEP]")] == list(CAPITAL)  # a token per character
        assert v.words[1:3] == (1, 1) and v.words[4:6] == (4, 4) and v.words[7:9] == (7, 7)  # 中国, 首都, 北京


def _within(share: float, p: float, n: int, z: float = 4.5) -> bool:
    """``share`` is a binomial proportion of ``n`` trials with probability ``p``, within z standard deviations."""
    return abs(share - p) <= z * math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("whole", [False, True])
def test_15_percent_and_80_10_10_hold_on_chinese(zh, whole):
    lm = zh["bert"]
    draws = 2000
    s = masking_shares(lm, LONG, draws=draws, seed=0, whole_word=whole)
    v = corrupt(lm, LONG, 0, whole_word=whole)
    units = len(set(w for w, sp in zip(v.words, v.special) if not sp)) * draws  # words drawn (tokens if not whole)
    if whole:
        assert units < v.candidates * draws  # the 词 join tokens: fewer draws than tokens
    assert _within(s.selected, 0.15, units, z=6)  # a word's tokens go together: count words, and allow more
    n_sel = round(s.selected * v.candidates * draws)
    vocab = len(lm.tokenizer)
    assert _within(s.mask, 0.8, n_sel)
    assert _within(s.random, 0.1 * (1 - 1 / vocab), n_sel)  # a random token that happens to be the original is kept
    assert _within(s.keep, 0.1 + 0.1 / vocab, n_sel)


def test_pretraining_instances_keep_the_ci_together(zh):
    lm = zh["bert"]
    tok = lm.tokenizer
    docs = tokenize_documents([[CAPITAL, MILK], [PARK, SCHOOL]], tok, "bert")
    assert list(docs[0][0].starts) == [True, False, True, True, False, True, True, False, True]
    inst = make_instances(docs, tok, pair=None, max_len=64, seed=0)
    gen = torch.Generator().manual_seed(0)
    together = 0
    for _ in range(30):
        b = collate(inst, tok, generator=gen, mlm_probability=0.3, whole_word=True, vocab_size=len(tok))
        sel = b.labels != -100
        for r, x in enumerate(inst):
            for i, w in enumerate(x.words):
                if w != i:  # a continuation token of a 词: selected exactly when the 词's first token is
                    assert bool(sel[r, i]) == bool(sel[r, w])
                    together += bool(sel[r, i])
    assert together > 0


# ---------------------------------------------------------------------------------------------- other views
def test_fill_mask_words_are_ci_and_mask_all_their_tokens(zh):
    assert [w.text for w in words(CAPITAL)] == ["中国", "的", "首都", "是", "北京"]
    assert [w.text for w in words("The cat sat.")] == ["The", "cat", "sat"]  # English as before
    lm = zh["bert"]
    e = encode(lm, FillMaskConfig(CAPITAL, word=4))
    assert e.masked_word == "北京" and len(e.mask_positions) == 2
    assert lm.tokenizer.convert_ids_to_tokens(list(e.originals)) == ["北", "京"]


@pytest.mark.parametrize("fam", ["bert", "xlm-roberta"])
def test_words_attention_view_groups_a_ci(zh, fam):
    lm = zh[fam]
    g = word_groups(lm.tokenizer, AttentionConfig(CAPITAL))
    inner = [w for w, s in zip(g.words, g.special) if not s]
    assert "北京" in inner and "首都" in inner and "".join(inner) == CAPITAL
    if fam == "bert":
        assert inner == ["中国", "的", "首都", "是", "北京", "。"]
        assert len(g.groups[g.words.index("北京")]) == 2  # two tokens, one word
    _explain_ci("attention.w.intro")  # the Words view's explanation says so (#46)


def test_corpus_search_and_projector_words_are_ci(zh):
    assert [w for _, _, w in query_words(CAPITAL)] == ["中国", "的", "首都", "是", "北京", "。"]
    assert [CAPITAL[a:b] for a, b in sentence_words(CAPITAL)][-2:] == ["北京", "。"]
    tv = token_vectors(zh["bert"], [CAPITAL, "北京是一个美丽的城市。"], [0], unit="word")
    assert len(tv.rows_of("北京")) == 2 and tv.pieces[int(tv.rows_of("北京")[0])] == "北 京"
    assert ProjectorConfig(what="word", word="北京").word == "北京"  # one word, not two characters
    sents = [CAPITAL, "北京是一个美丽的城市。", "我爱北京。", "北京北京。"] * MIN_POINTS
    _, found = pick_sentences(ProjectorConfig(what="word", word="北京"), sents)
    assert found == 5 * MIN_POINTS  # each 北京 counted once, whatever characters are around it
    # the Projector's word box and its messages say so (#46)
    _explain_ci("projector.word_help", "errors.projector.type_word_look_example", "errors.projector.not_one_word")


def test_one_han_test_and_one_width_rule_for_every_place():
    """#46 §3: eight separate "is this Han/CJK" tests became is_han, is_cjk and is_wide in core.base.segment."""
    assert segment.is_cjk("猫") and segment.is_cjk("あ") and segment.is_cjk("한") and segment.is_cjk("𠀀")
    assert not segment.is_cjk("a") and not segment.is_cjk("。") and not segment.is_cjk("1")
    assert segment.is_wide("中") and segment.is_wide("。") and segment.is_wide("Ａ") and not segment.is_wide("a")
    assert not segment.is_wide("ｱ")  # half-width katakana is drawn narrow


def test_the_other_topic_sentence_shares_no_chinese_word_with_the_pair():
    """#46 §3: the topic overlap counted Chinese characters against a stop list of characters; it counts jieba's 词.
    公共汽车 shares 公 with 公园 but no word; 今天 is a shared word."""
    assert sp._content_words("我们今天去公园散步。") == {"今天", "公园", "散步"}
    pool = ["公共汽车来了。", "今天下雨了。"]
    picks = {sp.other_topic("我们今天去公园散步。", "天气很好。", seed=s, pool=pool) for s in range(8)}
    assert picks == {"公共汽车来了。"}

"""Slices of a held-out set and two runs side by side (core/train/slices.py), on FinetuneResult objects built by hand
(no training): the Wilson interval against its textbook value, length bins in words (Chinese in 词), keyword and
regex matching in English and Chinese, the messages for a bad pattern and an empty slice, compare refusing two
different held-out sets, and the rows where two runs disagree."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.base.messages import message_of, templates
from core.registry import FAMILIES
from core.train import slices as S
from core.train.finetune import FinetuneResult
from core.train.finetune_config import FinetuneConfig

NAMES = ("neg", "pos")


def run(texts, gold, preds, conf=0.9, names=NAMES, task="sequence", seed=0) -> FinetuneResult:
    """A finished run whose held-out predictions are ``preds`` (each with probability ``conf``)."""
    k = len(names)
    probs = np.full((len(preds), k), (1 - conf) / (k - 1))
    probs[np.arange(len(preds)), preds] = conf
    gold = np.asarray(gold)
    cfg = FinetuneConfig(next(iter(FAMILIES)), "made-in-a-test", task=task, seed=seed)
    return FinetuneResult(
        config=cfg, data_name="toy", label_names=tuple(names), model_dir="", device="cpu", precision="fp32",
        steps=1, epochs_done=1.0, stop_reason="finished", train_seconds=1.0, samples_per_s=1.0, params_total=1,
        params_trainable=1, accuracy=float(np.mean(gold == np.asarray(preds))), macro_f1=0.0, majority_rate=0.5,
        best_step=1, confusion=np.zeros((k, k), int), history=(), evals=(), test_texts=tuple(texts),
        test_labels=gold, test_probs=probs, padding_saved=0.0,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------- measures
def test_the_wilson_interval_has_its_textbook_values():
    low, high = S.wilson(8, 10)  # Wilson 1927; Newcombe 1998's table: 8/10 -> 0.490 to 0.943
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    # 0 of 10: the upper end is z^2 / (n + z^2), in closed form; 10 of 10 mirrors it
    assert S.wilson(0, 10)[0] == 0.0 and math.isclose(S.wilson(0, 10)[1], S.Z95**2 / (10 + S.Z95**2))
    assert math.isclose(S.wilson(10, 10)[0], 10 / (10 + S.Z95**2)) and S.wilson(10, 10)[1] == 1.0
    assert S.wilson(0, 0) == (0.0, 1.0)  # nothing known, never NaN


def test_macro_f1_is_over_the_slices_classes_and_none_for_one_gold_class():
    gold, pred = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1])
    # class 0: tp 1, fn 1 -> 2/3; class 1: tp 2, fp 1 -> 4/5
    assert math.isclose(S.macro_f1(gold, pred), (2 / 3 + 4 / 5) / 2)
    assert S.macro_f1(np.array([1, 1]), np.array([0, 1])) is None


# ---------------------------------------------------------------------------------------------- slices
def test_length_bins_are_the_quartiles_in_words_and_chinese_counts_its_words():
    assert S.length_bins(list(range(1, 13))) == ((1, 3), (4, 6), (7, 9), (10, 12))
    assert S.length_bins([3, 3, 3]) == ((3, 3),)  # one length: one bin, not four copies
    assert S.length_bins([1, 2, 10], edges=(3, 5)) == ((1, 3), (4, 5), (6, 10))
    assert S.length_bins([]) == ()
    # words, not characters or pieces: 中国 | 的 | 首都 | 是 | 北京, and punctuation is no word
    assert S.word_count("中国的首都是北京") == 5 and S.word_count("it was great, really!") == 4
    texts = ["good", "so very good", "中国的首都是北京", "a b c d e f g"]
    slices, notes = S.define(texts, np.zeros(4, int), NAMES[:1], edges=(1, 3))
    bins = {s.value: s.rows for s in slices if s.kind == "length"}
    assert bins == {(1, 1): (0,), (2, 3): (1,), (4, 7): (2, 3)} and not notes


def test_a_keyword_is_a_whole_word_where_the_text_has_spaces_and_ignores_case():
    texts = ["Not bad at all", "nothing to see", "a knot", "not_me", "it is NOT good", "我很喜欢它", "我用Python写代码"]
    assert S.keyword_matches(texts, "not").tolist() == [True, False, False, False, True, False, False]
    assert S.keyword_matches(texts, " not  ").tolist() == S.keyword_matches(texts, "not").tolist()  # trimmed
    assert S.keyword_matches(texts, "喜欢").tolist() == [False] * 5 + [True, False]  # Chinese: anywhere
    assert S.keyword_matches(texts, "python").tolist() == [False] * 6 + [True]  # beside Han letters
    assert S.keyword_matches(["Pythonic code"], "python").tolist() == [False]
    assert S.keyword_matches(["a.b c", "a-b"], "a.b").tolist() == [True, False]  # a keyword, never a pattern
    with pytest.raises(ValueError) as info:
        S.keyword_matches(texts, "x" * (S.KEYWORD_MAX + 1))
    assert message_of(info.value).kind == "slices.keyword_too_long"


def test_a_regex_searches_each_text_including_chinese():
    texts = ["I loved it", "I hated it", "我很喜欢它", "我讨厌它", "it was ok"]
    assert S.regex_matches(texts, r"(lov|hat)ed").tolist() == [True, True, False, False, False]
    assert S.regex_matches(texts, "喜欢|讨厌").tolist() == [False, False, True, True, False]
    assert S.regex_matches(texts, r"^i ").tolist() == [False] * 5  # case as written
    assert S.regex_matches(texts, r"(?i)^i ").tolist() == [True, True, False, False, False]


@pytest.mark.parametrize(
    "pattern, reason, position",
    [("(ab", "slices.re_reason.group_not_closed", 1), ("ab)", "slices.re_reason.close_without_open", 3),
     ("*a", "slices.re_reason.nothing_to_repeat", 1), ("(?<=a+)b", "slices.re_reason.lookbehind_not_fixed", None)],
)  # fmt: skip
def test_a_bad_regex_is_a_value_error_that_says_what_and_where(pattern, reason, position):
    with pytest.raises(ValueError) as info:
        S.regex_matches(["text"], pattern)
    m = message_of(info.value)
    assert m.kind == "slices.regex_not_valid" and m.params["pattern"] == pattern
    assert m.params["reason"].kind == reason
    assert (m.params["where"].params["position"] if position else m.params["where"]) == (position or "")
    assert str(info.value).startswith(f"The regular expression “{pattern}” is not valid: ")
    assert "\\(" in str(info.value)  # how to match a special character as it is
    assert set(S.RE_REASONS.values()) <= set(templates())


def test_an_empty_slice_is_a_note_never_a_row_of_nans():
    texts = ["good film", "bad film", "good play"]
    r = run(texts, [1, 0, 1], [1, 1, 1], names=("neg", "pos", "meh"))
    table = S.slice_table(r, keyword="awful", pattern="film|play", edges=(1, 5))
    kinds = [n.kind for n in table.notes]
    assert kinds == ["slices.label_no_rows", "slices.keyword_no_rows", "slices.regex_every_row"], kinds
    assert table.notes[0].params == {"label": "meh"} and table.notes[1].params == {"keyword": "awful"}
    assert [(s.slice.kind, s.slice.value, s.slice.has) for s in table.stats] == [
        ("all", None, True), ("label", "neg", True), ("label", "pos", True), ("length", (2, 2), True),
        ("regex", "film|play", True),
    ]  # fmt: skip
    assert all(s.n > 0 and not math.isnan(s.accuracy) for s in table.stats)
    # explicit edges past every length leave an empty bin: said, not drawn
    gap = S.slice_table(run(["a", "a b c d e f"], [0, 1], [0, 1]), edges=(2, 4))
    assert [n.params for n in gap.notes if n.kind == "slices.length_no_rows"] == [{"low": 3, "high": 4}]


def test_a_run_by_slice_counts_accuracy_and_macro_f1_by_hand():
    texts = ["not good", "good", "very good", "not bad", "bad", "really bad"]
    gold, pred = [1, 1, 1, 0, 0, 0], [0, 1, 1, 1, 0, 0]
    table = S.slice_table(run(texts, gold, pred), keyword="NOT", edges=(1,))
    got = {(s.slice.kind, s.slice.value, s.slice.has): (s.n, s.correct, s.macro_f1) for s in table.stats}
    assert got[("all", None, True)][:2] == (6, 4)
    assert got[("label", "pos", True)] == (3, 2, None) and got[("label", "neg", True)] == (3, 2, None)
    assert got[("length", (1, 1), True)] == (2, 2, 1.0)  # "good", "bad": both right
    assert got[("keyword", "NOT", True)] == (2, 0, 0.0)  # both "not" rows wrong
    assert got[("keyword", "NOT", False)][:2] == (4, 4)
    everything = table.stats[0]
    assert (everything.low, everything.high) == S.wilson(4, 6) and everything.accuracy == 4 / 6


# ---------------------------------------------------------------------------------------------- compare
TEXTS = ("good", "not good", "bad", "not bad", "fine")
GOLD = (1, 0, 0, 1, 1)


def test_compare_refuses_runs_held_out_on_different_rows_and_says_how():
    a = run(TEXTS, GOLD, [1, 0, 0, 1, 1])
    with pytest.raises(ValueError) as info:
        S.compare(a, run(TEXTS[:4], GOLD[:4], [1, 0, 0, 1]))
    assert message_of(info.value).kind == "slices.held_out_sizes_differ"
    assert message_of(info.value).params == {"size_a": 5, "size_b": 4}
    other = TEXTS[:2] + ("awful",) + TEXTS[3:]
    with pytest.raises(ValueError) as info:
        S.compare(a, run(other, GOLD, [1, 0, 0, 1, 1]))
    m = message_of(info.value)
    assert m.kind == "slices.held_out_rows_differ" and (m.params["row"], m.params["text_b"]) == (3, "awful")
    with pytest.raises(ValueError) as info:  # same texts, one gold label changed
        S.compare(a, run(TEXTS, (1, 0, 0, 1, 0), [1, 0, 0, 1, 1]))
    assert message_of(info.value).params["row"] == 5
    with pytest.raises(ValueError) as info:
        S.compare(a, run(TEXTS, GOLD, [1, 0, 0, 1, 1], names=("bad", "good")))
    assert message_of(info.value).kind == "slices.label_names_differ"
    with pytest.raises(ValueError) as info:
        S.compare(a, run(TEXTS, GOLD, [1, 0, 0, 1, 1], task="token"))
    assert message_of(info.value).kind == "slices.only_sequence_runs"


def test_compare_gives_both_accuracies_per_slice_and_the_rows_they_disagree_on():
    a = run(TEXTS, GOLD, [1, 1, 0, 0, 1], conf=0.8)  # misses both "not" rows
    b = run(TEXTS, GOLD, [1, 0, 0, 1, 0], conf=0.6, seed=1)  # gets them, misses "fine"
    cmp = S.compare(a, b, keyword="not")
    pairs = {(p.slice.kind, p.slice.value, p.slice.has): p for p in cmp.pairs}
    every = pairs[("all", None, True)]
    assert (every.a.correct, every.b.correct, every.a_only, every.b_only) == (3, 4, 1, 2)
    assert math.isclose(every.difference, 4 / 5 - 3 / 5)
    negated = pairs[("keyword", "not", True)]
    assert (negated.a.accuracy, negated.b.accuracy, negated.difference) == (0.0, 1.0, 1.0)
    assert cmp.disagree == 3 and [d.row for d in cmp.disagreements] == [1, 3, 4]
    first = cmp.disagreements[0]
    assert (first.text, first.gold, first.pred_a, first.pred_b) == ("not good", "neg", "pos", "neg")
    assert math.isclose(first.conf_a, 0.8) and math.isclose(first.conf_b, 0.6)
    same = S.compare(a, a)
    assert same.disagree == 0 and all(p.difference == 0 for p in same.pairs)

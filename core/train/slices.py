"""Slices of a fine-tuned classifier's held-out set, and two runs side by side on the same held-out set.

One number for a whole held-out set hides where a classifier fails: short texts, one class, texts with a negation.
LIT (the Language Interpretability Tool) puts metrics by slice and two models side by side; this is that for the
Fine-tune page's sequence runs, computed from what a finished run already keeps (``FinetuneResult.test_texts``,
``test_labels``, ``test_probs``, ``label_names``), so no model is loaded and nothing is predicted again.

The slices:
- ``all``: every held-out row (the reference the others are read against);
- ``label``: the rows of one gold label (one per label name; macro-F1 has no meaning on one gold class);
- ``length``: rows by their length in words, the words of ``core.base.segment`` (a Chinese text counts its 词, cut
  by jieba, not its characters), in bins at the held-out lengths' quartiles (or edges the caller gives);
- ``keyword``: rows that hold a word, case-insensitively; whole word where the text has spaces (``not`` never
  matches "nothing"), anywhere in text written without them (a Chinese keyword, or an English word inside Chinese);
- ``regex``: rows a Python regular expression finds (``re.search``); a bad pattern is a ValueError saying why.
A keyword or regex slice comes with its complement (rows without it), the comparison that makes it mean something.

Every slice has its count and accuracy with a 95% Wilson score interval (Wilson 1927: unlike the normal
approximation it stays inside [0, 1] and keeps a sensible width for the small counts slices have). An empty slice is
never a row of NaNs: it is left out and said in a note (a ``Message``) the page shows.

``compare(run_a, run_b)`` refuses two runs whose held-out sets differ (saying how: their sizes, their labels, or the
first row that differs), then gives each slice's accuracy for both runs, the difference, the rows only one of them
got right, and the rows where their predictions disagree.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.base.messages import Message, msg
from core.base.segment import HAN, word_spans

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile: a two-sided 95% interval
LENGTH_PARTS = 4  # length bins at the quartiles of the held-out lengths
KEYWORD_MAX, PATTERN_MAX = 100, 200  # characters: a keyword or a pattern is a few words, not a text
DISAGREEMENTS_MAX = 1000  # rows of disagreement kept (the page shows the first, the CSV has these)

# Letters written without spaces between words (Han, kana, Hangul): no word boundary is asked for beside them.
_UNSPACED = HAN + "\u3040-\u30ff\u31f0-\u31ff\uac00-\ud7af"


# ---------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Slice:
    """Which rows: ``kind`` ("all", "label", "length", "keyword", "regex") and ``value`` (the label name; the bin's
    (low, high) words, both included; the keyword; the pattern). ``has`` False: the rows without the keyword or
    the pattern. ``rows``: their indices in the held-out set."""

    kind: str
    value: str | tuple[int, int] | None
    rows: tuple[int, ...]
    has: bool = True


@dataclass(frozen=True)
class SliceStat:
    """One slice's measures: ``n`` rows, ``correct`` of them right, ``accuracy`` with its 95% Wilson interval
    [``low``, ``high``]; ``macro_f1`` over the classes in the slice (gold or predicted), None with one gold class."""

    slice: Slice
    n: int
    correct: int
    accuracy: float
    low: float
    high: float
    macro_f1: float | None


@dataclass(frozen=True)
class SliceTable:
    """One run's slices (``stats``, in order: all, labels, lengths, keyword, regex) and a note per empty slice."""

    stats: tuple[SliceStat, ...]
    notes: tuple[Message, ...]


@dataclass(frozen=True)
class PairStat:
    """One slice for two runs: each run's measures, ``difference`` (B's accuracy minus A's), and the rows only A
    got right (``a_only``) and only B got right (``b_only``): the difference is (b_only - a_only) / n."""

    slice: Slice
    a: SliceStat
    b: SliceStat
    difference: float
    a_only: int
    b_only: int


@dataclass(frozen=True)
class Disagreement:
    """A held-out row where the runs predict different labels (``row``: its index in the held-out set)."""

    row: int
    text: str
    gold: str
    pred_a: str
    conf_a: float
    pred_b: str
    conf_b: float


@dataclass(frozen=True)
class Comparison:
    """Two runs on one held-out set: per slice (``pairs``), the rows where they disagree (the first
    DISAGREEMENTS_MAX, in held-out order; ``disagree`` counts them all), and the empty slices' notes."""

    pairs: tuple[PairStat, ...]
    disagreements: tuple[Disagreement, ...]
    disagree: int
    notes: tuple[Message, ...]


# ---------------------------------------------------------------------------------------------- measures
def wilson(correct: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``correct`` successes out of ``n`` (95% by default): (low, high) in [0, 1].
    With no rows nothing is known, and the interval is the whole of [0, 1]."""
    if n <= 0:
        return 0.0, 1.0
    p = correct / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # at 0 of n or n of n an end is exactly 0 or 1 (the sum above leaves a rounding error there)
    return (0.0 if correct <= 0 else max(0.0, centre - half)), (1.0 if correct >= n else min(1.0, centre + half))


def macro_f1(gold: np.ndarray, pred: np.ndarray) -> float | None:
    """Macro-F1 over the classes that occur in ``gold`` or ``pred`` (as scikit-learn's default); None when ``gold``
    holds fewer than two classes (a one-label slice: every miss is that label's, and the average means nothing)."""
    if len(set(gold.tolist())) < 2:
        return None
    scores = []
    for c in sorted(set(gold.tolist()) | set(pred.tolist())):
        tp = int(np.sum((gold == c) & (pred == c)))
        fp, fn = int(np.sum((gold != c) & (pred == c))), int(np.sum((gold == c) & (pred != c)))
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return float(np.mean(scores))


def _stat(sl: Slice, gold: np.ndarray, pred: np.ndarray) -> SliceStat:
    idx = np.asarray(sl.rows, dtype=int)
    g, p = gold[idx], pred[idx]
    n, correct = len(idx), int(np.sum(g == p))
    low, high = wilson(correct, n)
    return SliceStat(sl, n, correct, correct / n, low, high, None if sl.kind == "label" else macro_f1(g, p))


# ---------------------------------------------------------------------------------------------- slices
def word_count(text: str) -> int:
    """The words of ``text`` (core.base.segment: letter/digit runs, and jieba's 词 in Chinese)."""
    return len(word_spans(text))


def length_bins(counts: Sequence[int], edges: Sequence[int] | None = None) -> tuple[tuple[int, int], ...]:
    """Length bins (low, high), both included, covering ``counts``: ``edges`` (each the top of a bin; a last bin
    takes what is longer), else the quartiles of ``counts`` (values that occur, so no bin is empty); bins that
    would hold the same lengths twice are merged away. () for no counts."""
    if not len(counts):
        return ()
    lo, hi = int(min(counts)), int(max(counts))
    if edges is None:
        qs = np.quantile(np.asarray(counts), [i / LENGTH_PARTS for i in range(1, LENGTH_PARTS)], method="lower")
        edges = [int(q) for q in qs]
    tops = sorted({int(e) for e in edges if lo <= e < hi}) + [hi]
    out, start = [], lo
    for top in tops:
        out.append((start, top))
        start = top + 1
    return tuple(out)


def _keyword_re(keyword: str) -> re.Pattern[str]:
    """The keyword, case-insensitive; a boundary on a side where it meets a letter of a spaced script."""
    word = re.escape(keyword)
    before = rf"(?<![^\W{_UNSPACED}])" if re.match(rf"[^\W{_UNSPACED}]", keyword) else ""
    after = rf"(?![^\W{_UNSPACED}])" if re.search(rf"[^\W{_UNSPACED}]$", keyword) else ""
    return re.compile(before + word + after, re.IGNORECASE)


def check_keyword(keyword: str) -> str:
    """The keyword as it is matched (trimmed); ValueError for one too long to be a keyword."""
    keyword = keyword.strip()
    if len(keyword) > KEYWORD_MAX:
        raise ValueError(msg("slices.keyword_too_long", length=len(keyword), limit=KEYWORD_MAX))
    return keyword


def keyword_matches(texts: Sequence[str], keyword: str) -> np.ndarray:
    """(n,) bool: which texts hold ``keyword``, ignoring case, as a whole word where it meets letters of a spaced
    script ("not" is not in "nothing", "knot" or "not_me"), anywhere beside Chinese, Japanese or Korean letters
    ("喜欢" in "我很喜欢它", "Python" in "我用Python写代码")."""
    found = _keyword_re(check_keyword(keyword))
    return np.array([found.search(t) is not None for t in texts], dtype=bool)


# Python's words for the common mistakes in a pattern, as messages of our own (so 中文 reads them in Chinese); any
# other reason is quoted as Python gives it.
RE_REASONS = {
    "missing ), unterminated subpattern": "slices.re_reason.group_not_closed",
    "unbalanced parenthesis": "slices.re_reason.close_without_open",
    "unterminated character set": "slices.re_reason.set_not_closed",
    "nothing to repeat": "slices.re_reason.nothing_to_repeat",
    "multiple repeat": "slices.re_reason.repeat_of_repeat",
    "bad escape": "slices.re_reason.unknown_escape",
    "look-behind requires fixed-width pattern": "slices.re_reason.lookbehind_not_fixed",
    "unknown extension": "slices.re_reason.unknown_extension",
    "min repeat greater than max repeat": "slices.re_reason.repeat_range_reversed",
}


def _reason(error: re.error) -> Message | str:
    """re's reason for refusing a pattern, as one of RE_REASONS' messages when it is one of them."""
    for start, kind in RE_REASONS.items():
        if error.msg.startswith(start):
            return msg(kind, detail=error.msg[len(start) :].strip())
    return error.msg


def check_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled (Python's re); ValueError saying what is wrong with it and where."""
    if len(pattern) > PATTERN_MAX:
        raise ValueError(msg("slices.regex_too_long", length=len(pattern), limit=PATTERN_MAX))
    try:
        return re.compile(pattern)
    except re.error as e:
        where = msg("slices.regex_at_character", position=e.pos + 1) if e.pos is not None else ""
        raise ValueError(msg("slices.regex_not_valid", pattern=pattern, reason=_reason(e), where=where)) from None


def regex_matches(texts: Sequence[str], pattern: str) -> np.ndarray:
    """(n,) bool: which texts ``pattern`` finds (``re.search``: anywhere in the text; case as written, (?i) to
    ignore it). ValueError for a bad pattern."""
    found = check_pattern(pattern)
    return np.array([found.search(t) is not None for t in texts], dtype=bool)


def _matched(kind: str, value: str, hits: np.ndarray) -> tuple[list[Slice], list[Message]]:
    """The rows with and without a keyword or pattern; a note for a side with no rows."""
    rows_in, rows_out = tuple(np.flatnonzero(hits).tolist()), tuple(np.flatnonzero(~hits).tolist())
    keyword = kind == "keyword"
    if not rows_in:
        return [], [
            msg("slices.keyword_no_rows", keyword=value) if keyword else msg("slices.regex_no_rows", regex=value)
        ]
    if not rows_out:
        every = (
            msg("slices.keyword_every_row", keyword=value) if keyword else msg("slices.regex_every_row", regex=value)
        )
        return [Slice(kind, value, rows_in)], [every]
    return [Slice(kind, value, rows_in), Slice(kind, value, rows_out, has=False)], []


def define(
    texts: Sequence[str],
    labels: np.ndarray,
    label_names: Sequence[str],
    keyword: str = "",
    pattern: str = "",
    edges: Sequence[int] | None = None,
) -> tuple[tuple[Slice, ...], tuple[Message, ...]]:
    """The slices of a held-out set (all, each label, length bins, and the keyword's and pattern's when given, with
    their complements) and a note for each empty one. ValueError for a bad pattern or a keyword too long."""
    labels = np.asarray(labels)
    out, notes = [Slice("all", None, tuple(range(len(texts))))], []
    # Step 1: one slice per gold label; a label with no held-out row is said, not drawn as a NaN bar.
    for i, name in enumerate(label_names):
        rows = tuple(np.flatnonzero(labels == i).tolist())
        if rows:
            out.append(Slice("label", name, rows))
        else:
            notes.append(msg("slices.label_no_rows", label=name))
    # Step 2: length in words (Chinese in 词), in bins; a bin the caller's edges leave empty is said too.
    counts = np.array([word_count(t) for t in texts], dtype=int)
    for low, high in length_bins(counts.tolist(), edges):
        rows = tuple(np.flatnonzero((counts >= low) & (counts <= high)).tolist())
        if rows:
            out.append(Slice("length", (low, high), rows))
        else:
            notes.append(msg("slices.length_no_rows", low=low, high=high))
    # Step 3: the person's keyword and pattern, each with the rows without it.
    for kind, value, find in (("keyword", keyword.strip(), keyword_matches), ("regex", pattern, regex_matches)):
        if value:
            made, said = _matched(kind, value, find(texts, value))
            out += made
            notes += said
    return tuple(out), tuple(notes)


# ---------------------------------------------------------------------------------------------- runs
def _sequence_only(result) -> None:
    if result.config.task != "sequence":
        raise ValueError(msg("slices.only_sequence_runs", task=result.config.task))


def slice_table(result, keyword: str = "", pattern: str = "", edges: Sequence[int] | None = None) -> SliceTable:
    """A finished sequence run's (core.train.finetune.FinetuneResult) held-out set by slice. ValueError for a token
    run (its rows are words, not texts), a bad pattern or a keyword too long."""
    _sequence_only(result)
    slices, notes = define(result.test_texts, result.test_labels, result.label_names, keyword, pattern, edges)
    gold, pred = np.asarray(result.test_labels), np.asarray(result.test_probs).argmax(-1)
    return SliceTable(tuple(_stat(s, gold, pred) for s in slices), notes)


def same_held_out(run_a, run_b) -> None:
    """Nothing when the two runs were held out on the same rows (texts, gold labels, label names), else ValueError
    saying how they differ: their sizes, their labels, or the first row that differs."""
    for r in (run_a, run_b):
        _sequence_only(r)
    size_a, size_b = len(run_a.test_texts), len(run_b.test_texts)
    if size_a != size_b:
        raise ValueError(msg("slices.held_out_sizes_differ", size_a=size_a, size_b=size_b))
    if tuple(run_a.label_names) != tuple(run_b.label_names):
        raise ValueError(
            msg(
                "slices.label_names_differ",
                labels_a=", ".join(run_a.label_names),
                labels_b=", ".join(run_b.label_names),
            )
        )
    gold_a, gold_b = np.asarray(run_a.test_labels), np.asarray(run_b.test_labels)
    for i, (ta, tb) in enumerate(zip(run_a.test_texts, run_b.test_texts)):
        if ta != tb or gold_a[i] != gold_b[i]:
            raise ValueError(
                msg(
                    "slices.held_out_rows_differ",
                    row=i + 1,
                    text_a=ta,
                    text_b=tb,
                    gold_a=run_a.label_names[gold_a[i]],
                    gold_b=run_b.label_names[gold_b[i]],
                )
            )


def compare(run_a, run_b, keyword: str = "", pattern: str = "", edges: Sequence[int] | None = None) -> Comparison:
    """Two finished sequence runs on one held-out set (their families, seeds or poolings may differ): per slice
    both accuracies and the difference (B - A), and the rows where their predictions disagree. ValueError when
    the held-out sets differ (same_held_out), for a token run, or for a bad pattern."""
    same_held_out(run_a, run_b)
    slices, notes = define(run_a.test_texts, run_a.test_labels, run_a.label_names, keyword, pattern, edges)
    gold = np.asarray(run_a.test_labels)
    probs_a, probs_b = np.asarray(run_a.test_probs), np.asarray(run_b.test_probs)
    pred_a, pred_b = probs_a.argmax(-1), probs_b.argmax(-1)
    right_a, right_b = pred_a == gold, pred_b == gold
    pairs = []
    for s in slices:
        a, b, idx = _stat(s, gold, pred_a), _stat(s, gold, pred_b), np.asarray(s.rows, dtype=int)
        a_only, b_only = int(np.sum(right_a[idx] & ~right_b[idx])), int(np.sum(right_b[idx] & ~right_a[idx]))
        pairs.append(PairStat(s, a, b, b.accuracy - a.accuracy, a_only, b_only))
    differ = np.flatnonzero(pred_a != pred_b)
    names = run_a.label_names
    rows = tuple(
        Disagreement(
            int(i),
            run_a.test_texts[i],
            names[gold[i]],
            names[pred_a[i]],
            float(probs_a[i, pred_a[i]]),
            names[pred_b[i]],
            float(probs_b[i, pred_b[i]]),
        )
        for i in differ[:DISAGREEMENTS_MAX]
    )
    return Comparison(tuple(pairs), rows, len(differ), notes)

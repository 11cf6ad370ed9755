"""Words of a text, Chinese included: the one segmenter behind every place where "word" matters.

Chinese is written without spaces, and a tokenizer's ``word_ids()`` makes every Chinese character a word of its
own (BERT's basic tokenizer puts spaces around each one). Whole-word masking exists to mask a whole 词 (中国, 首都,
北京), so the words of a Han run come from jieba: the field's standard Chinese segmenter, whose dictionary ships
inside its wheel (``jieba/dict.txt``), so it never downloads anything. It is built once per process, lazily and
under a lock, straight from that dictionary: jieba's own prefix-dict cache (a file in the temp folder, read back
with ``marshal``) is never written or read, and its "Building prefix dict" log lines are silenced. jieba's default
cut is used (dictionary plus its HMM for words the dictionary lacks), so "中国的首都是北京" -> 中国 | 的 | 首都 | 是 | 北京.

- ``word_spans(text)``: character spans [start, end) of the words: Han runs cut by jieba, other text split into
  letter/digit runs; punctuation and spaces are not words.
- ``han_words(text)``: only the Han words (the same cut).
- ``regroup(text, spans)``: another splitter's word spans (one per CJK character, say) with every Han character
  moved into its jieba word, other spans left exactly as they were: how callers keep their own rules for other
  scripts and change only Chinese.
- ``has_han(text)``.

A text holding Japanese kana is Japanese: its kanji are not cut by a Chinese dictionary, each stays a word of its
own (as before this module existed).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import unicodedata
import warnings
from collections.abc import Iterable
from typing import Any

from core.base.caches import register as register_cache

# CJK Unified Ideographs, Extension A, Compatibility Ideographs, Extensions B-H (the supplementary planes)
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"
_HAN_RUN = re.compile(f"[{HAN}]+")
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_OTHER_WORD = re.compile(rf"(?:[^\W_{HAN}][\u0300-\u036f]*)+")  # letters/digits (with combining accents), not Han

_LOCK = threading.Lock()
_CUTTER: Any = None  # a jieba.Tokenizer once built (jieba has no type hints: Any)


def _cutter() -> Any:
    """jieba's tokenizer, built once (thread-safe) from the dictionary in its wheel, with no cache file and no log."""
    global _CUTTER
    if _CUTTER is not None:
        return _CUTTER
    with _LOCK:
        if _CUTTER is None:
            with (
                warnings.catch_warnings()
            ):  # an old setuptools warns that pkg_resources (which jieba tries) is deprecated
                warnings.simplefilter("ignore")
                import jieba  # lazy: 0.7 s to build its prefix dictionary; only Chinese text needs it

            jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict ..." on stderr
            cutter = jieba.Tokenizer()
            with cutter.lock:
                cutter.FREQ, cutter.total = cutter.gen_pfdict(cutter.get_dict_file())  # what initialize() builds
                cutter.initialized = True  # ... without reading or writing a cache file in the temp folder
            _CUTTER = cutter
    return _CUTTER


def is_han(ch: str) -> bool:
    """True for one Han (Chinese) character."""
    return bool(_HAN_RUN.fullmatch(ch))


def is_wide(ch: str) -> bool:
    """True for one character drawn a full em wide (two columns): East Asian Wide or Fullwidth in Unicode's
    EastAsianWidth table (Han, kana, Hangul, their punctuation, full-width forms, most emoji). The one width rule of
    charts, titles and the attention view's labels."""
    return unicodedata.east_asian_width(ch) in ("W", "F")


def is_cjk(ch: str) -> bool:
    """True for one Chinese, Japanese or Korean letter (Han, kana, Hangul): written without spaces between words, so
    a text of them needs a word cutter (jieba's 词 for Chinese) or counts them one by one. Not their punctuation."""
    return ch.isalpha() and is_wide(ch)


def has_han(text: str) -> bool:
    """True when the text holds at least one Han (Chinese) character."""
    return bool(text) and _HAN_RUN.search(text) is not None


@functools.lru_cache(maxsize=8192)
def _cut_run(run: str) -> tuple[int, ...]:
    """Lengths of jieba's words of one run of Han characters (one per character if the cut does not add up)."""
    lengths = tuple(len(w) for w in _cutter().cut(run) if w)
    return lengths if sum(lengths) == len(run) else (1,) * len(run)


register_cache(__name__, _cut_run.cache_clear)


def han_words(text: str) -> list[tuple[int, int]]:
    """Spans of the Han words of ``text``, in order: each run of Han characters cut by jieba (in a text with kana,
    one per character)."""
    if not has_han(text):
        return []
    japanese = _KANA.search(text) is not None
    out = []
    for m in _HAN_RUN.finditer(text):
        a = m.start()
        for n in (1,) * (m.end() - a) if japanese else _cut_run(m.group()):
            out.append((a, a + n))
            a += n
    return out


def word_spans(text: str) -> list[tuple[int, int]]:
    """Character spans [start, end) of the words of ``text``, in order: Han runs cut by jieba, other text split
    into letter/digit runs; punctuation and spaces are not words."""
    text = text or ""
    spans = han_words(text) + [m.span() for m in _OTHER_WORD.finditer(text)]
    return sorted(spans)


def regroup(text: str, spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` (another splitter's words of ``text``, in order) with each Han character moved into its jieba
    word: a span's Han part becomes the whole Han word(s) it touches, its other parts stay spans of their own, and
    a Han word touched by consecutive spans appears once. Text without Han characters comes back unchanged."""
    hw = han_words(text)
    if not hw:
        return [(a, b) for a, b in spans]
    word_at: dict[int, int] = {}  # character -> the index of its Han word in hw
    for n, (a, b) in enumerate(hw):
        for i in range(a, b):
            word_at[i] = n
    out: list[tuple[int, int]] = []
    for a, b in spans:
        i = a
        while i < b:
            k = word_at.get(i)
            if k is None:
                j = i
                while j < b and j not in word_at:
                    j += 1
                piece = (i, j)
            else:
                piece = hw[k]
                j = i
                while j < b and word_at.get(j) == k:
                    j += 1
            if not out or out[-1] != piece:
                out.append(piece)
            i = j
    return out

"""Layer probes' tasks: frozen labelled sets built offline from any corpus (the bundled one, or text a user pastes or
uploads), each drawn with a fixed seed (Conneau et al. 2018, "What you can cram into a single $&!#* vector", for the
first four). core.represent.probes reads every depth's vectors for them and trains the probes.

- ``length``: the sentence's length in words, in LENGTH_BINS bins (quantiles of the corpus), sampled balanced.
- ``bigram_shift``: two adjacent lowercase words swapped (label "swapped") or the sentence as written.
- ``coord_inversion``: sentences of the form "X, and Y." (one ", and ", no other comma/colon/semicolon, three or more
  words each side, Y opening with a subject word such as "the", "he", "it"), with the clauses swapped or not.
  The corpus's count of such sentences is ``ProbeTask.found``.
- ``odd_word``: one lowercase word replaced by a random other word of the same frequency band
  (floor(log2(count)) in this corpus) or the sentence as written.
- ``suffix``: a word-level task: the word's suffix class (-ing, -ed, -ly, -s, other), paired with the Hewitt & Liang
  (2019) control task: every word type gets a random label (drawn from the real task's label distribution, fixed
  seed). See core.represent.probes for what the control task shows.

Chinese text has no spaces: a sentence with Chinese characters counts jieba's 词 as its words (core.base.segment,
``word_count``), so pasted Chinese lines are probed too. ``length``, ``bigram_shift`` (two adjacent 词 swapped) and
``odd_word`` (a 词 of two or more characters replaced by another of its frequency band) work on it; ``coord_inversion``
and ``suffix`` are English grammar (ENGLISH_ONLY) and say so plainly for a Chinese corpus.

Items are split into train and held-out with the same seed (stratified for sentence tasks; by sentence for the word
task, so a held-out word's type may well have been seen in training: that is what lets a memorising probe score on
the control task).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.base.caches import register as register_cache
from core.base.messages import Problem, msg
from core.base.segment import has_han, is_han, word_spans
from core.base.uploads import upload_text
from core.data.corpus import split_sentences
from core.represent.token_vectors import MAX_SENTENCES, sentence_words

TASKS = ("length", "bigram_shift", "coord_inversion", "odd_word", "suffix")
WORD_TASKS = ("suffix",)  # probed on word rows, with a control task; the others on sentence means
TASK_NAMES = {
    "length": "Sentence length",
    "bigram_shift": "Bigram shift",
    "coord_inversion": "Coordination inversion",
    "odd_word": "Odd word out",
    "suffix": "Suffix class (word)",
}
LENGTH_BINS = 5
SUFFIX_CLASSES = ("-ing", "-ed", "-ly", "-s", "other")
MIN_WORDS, MAX_WORDS = 4, 60  # corpus sentences probed: long enough to edit, short enough not to be truncated
MIN_ITEMS = 20  # a task with fewer items than this cannot be probed (the message says so)
MAX_TYPE_TOKENS = 3  # word task: occurrences kept per word type (>= 2, so types recur; more would mean few types)
WORDS_PER_SENTENCE = 4  # word task: labelled words taken from one sentence at most
SUBJECTS = frozenset(
    "the a an this that these those there it he she they we you i his her their its my our your "
    "one some each every all no many most thou ye thy thine mine".split()
)
CONJUNCTIONS = frozenset("and but or nor for so yet then".split())
_CLAUSE_MARKS = re.compile(r"[,;:]")
_ZH_END = re.compile(r"(?<=[。！？])")  # a Chinese sentence end, with no space after it
ENGLISH_ONLY = ("coord_inversion", "suffix")  # tasks made of English grammar: nothing to build from Chinese text


class ProbeError(Problem, ValueError):
    """The probes cannot run on this corpus or with these settings; the message says why and what to do."""


# ---------------------------------------------------------------------------------------------- corpus
def han_words(sentence: str) -> list[tuple[int, int]]:
    """The spans of the Chinese words (jieba's 词, core.base.segment) of ``sentence``, in order."""
    return [(a, b) for a, b in word_spans(sentence) if is_han(sentence[a])]


def word_count(sentence: str) -> int:
    """A sentence's length in words: a Chinese sentence's 词 (and runs of letters or digits: core.base.segment,
    punctuation is no word), else its whitespace tokens."""
    return len(word_spans(sentence)) if has_han(sentence) else len(sentence.split())


def mostly_chinese(pool: Sequence[str]) -> bool:
    return sum(has_han(s) for s in pool) * 2 > len(pool)


def prepare_corpus(sentences: Sequence[str]) -> tuple[str, ...]:
    """Sentences with whitespace collapsed, MIN_WORDS..MAX_WORDS words long (word_count: a Chinese sentence's
    词), first occurrence of each kept. Raises ProbeError when none is left."""
    out = tuple(
        dict.fromkeys(
            s for s in (" ".join(str(x).split()) for x in sentences) if MIN_WORDS <= word_count(s) <= MAX_WORDS
        )
    )
    if not out:
        raise ProbeError(msg("probes.no_sentence_of_length", min_words=MIN_WORDS, max_words=MAX_WORDS))
    return out


def corpus_from_text(text: str) -> list[str]:
    """Sentences of pasted text: each line, split at sentence ends (Chinese ones too: 。！？). Raises ProbeError
    for no text or too many."""
    sents = [
        z.strip()
        for line in str(text).splitlines()
        if line.strip()
        for s in split_sentences(line.strip())
        for z in _ZH_END.split(s)
        if len(z.strip()) > 1
    ]
    if not sents:
        raise ProbeError(msg("probes.corpus_empty_paste_upload"))
    if len(sents) > MAX_SENTENCES:
        raise ProbeError(msg("probes.text_too_many_sentences", n_sents=len(sents), max_sentences=MAX_SENTENCES))
    return sents


def corpus_from_upload(raw: bytes, name: str = "upload") -> list[str]:
    """Sentences of an uploaded UTF-8 text file. Raises ProbeError for a file over the upload limit, a binary
    file, text that is not UTF-8, or no sentences."""
    text = upload_text(raw, name, error=ProbeError, expect="a UTF-8 .txt file, one sentence per line")
    return corpus_from_text(text)


# ---------------------------------------------------------------------------------------------- tasks
@dataclass(frozen=True, eq=False)
class ProbeTask:
    """A frozen labelled set. Sentence tasks: one item per sentence. Word tasks: items are words, ``words[i]`` =
    (sentence index, word index in token_vectors.sentence_words order), with ``control`` labels per word type."""

    name: str
    unit: str  # "sentence" | "word"
    label_names: tuple[str, ...]
    sentences: tuple[str, ...]  # what the model reads
    originals: tuple[str, ...]  # the corpus sentence each came from (== sentences where nothing was edited)
    labels: np.ndarray  # (items,) int64
    heldout: np.ndarray  # (items,) bool: True = held-out
    found: int  # candidates the corpus had for this task (sentences, or words for a word task)
    words: np.ndarray | None = None  # (items, 2) int64, word tasks only
    types: tuple[str, ...] | None = None  # (items,) the word type (lowercased), word tasks only
    control: np.ndarray | None = None  # (items,) int64: the control task's label of the item's type

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def _rng(seed: int, task: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), TASKS.index(task)])  # a per-task generator: never the global RNG


def _stratified_heldout(labels: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
    held = np.zeros(len(labels), dtype=bool)
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        rng.shuffle(idx)
        held[idx[: max(1, int(round(share * len(idx))))]] = True
    return held


def _too_few(task: str, have: int, pool: Sequence[str] = ()) -> ProbeError:
    """Too few items for ``task`` (its message names what it needs; probes.too_few.<task>), or, for a task made of
    English grammar on a Chinese corpus, that it cannot be built from Chinese at all."""
    if task in ENGLISH_ONLY and mostly_chinese(pool):
        return ProbeError(msg("probes.english_only"))
    return ProbeError(msg(f"probes.too_few.{task}", have=have, need=MIN_ITEMS))


def _binary_task(
    name: str,
    pool: Sequence[str],
    cands: list[int],
    edit,
    n: int,
    share: float,
    rng: np.random.Generator,
    label_names: tuple[str, str],
) -> ProbeTask:
    """Half of ``n`` sampled candidate sentences edited by ``edit(sentence, rng)`` (label 1), half as written."""
    m = min(n, len(cands)) // 2 * 2
    if m < MIN_ITEMS:
        raise _too_few(name, len(cands), pool)
    picked = [pool[i] for i in rng.choice(np.asarray(cands), size=m, replace=False)]
    labels = np.zeros(m, dtype=np.int64)
    labels[rng.permutation(m)[: m // 2]] = 1
    sents = tuple(edit(s, rng) if y else s for s, y in zip(picked, labels))
    return ProbeTask(
        name, "sentence", label_names, sents, tuple(picked), labels, _stratified_heldout(labels, share, rng), len(cands)
    )


def length_task(pool: Sequence[str], n: int, share: float = 0.2, seed: int = 0) -> ProbeTask:
    """Sentence length in words (word_count: whitespace tokens, a Chinese sentence's 词), in LENGTH_BINS quantile
    bins, the same count per bin."""
    rng = _rng(seed, "length")
    counts = np.asarray([word_count(s) for s in pool])
    edges = np.unique(np.floor(np.quantile(counts, np.linspace(0, 1, LENGTH_BINS + 1)[1:-1])).astype(int) + 1)
    bins = np.searchsorted(edges, counts, side="right")  # bin b: edges[b-1] <= words < edges[b]
    present = [b for b in range(len(edges) + 1) if (bins == b).any()]
    if len(present) < 2:
        raise ProbeError(msg("probes.lengths_all_same", task=msg("probes.task.length")))
    per = min(n // len(present), min(int((bins == b).sum()) for b in present))
    if per * len(present) < MIN_ITEMS:
        raise _too_few("length", per * len(present))
    lo = [int(counts.min())] + [int(e) for e in edges]
    hi = [int(e) - 1 for e in edges] + [int(counts.max())]
    names = tuple(f"{lo[b]}–{hi[b]} words" if lo[b] != hi[b] else f"{lo[b]} words" for b in present)
    idx: list[int] = []
    bin_of: list[int] = []  # the label (bin index) of each chosen sentence
    for k, b in enumerate(present):
        chosen = rng.choice(np.flatnonzero(bins == b), size=per, replace=False)
        idx.extend(int(i) for i in chosen)
        bin_of.extend([k] * per)
    order = rng.permutation(len(idx))
    sents = tuple(pool[idx[i]] for i in order)
    labels = np.asarray(bin_of, dtype=np.int64)[order]
    return ProbeTask(
        "length", "sentence", names, sents, sents, labels, _stratified_heldout(labels, share, rng), len(pool)
    )


def _shift_positions(words: list[str]) -> list[int]:
    """i such that words i and i+1 are different lowercase letter-only words (never the first word: swapping it
    would move a capital letter, a cue that has nothing to do with word order)."""
    ok = [w.isascii() and w.isalpha() and w.islower() for w in words]
    return [i for i in range(1, len(words) - 1) if ok[i] and ok[i + 1] and words[i] != words[i + 1]]


def _han_shift_positions(sentence: str) -> list[int]:
    """i such that Chinese words i and i+1 (han_words) touch (nothing between them) and differ: a Chinese
    sentence's bigram shift swaps two adjacent 词 (there is no capital letter to give the first one away)."""
    sp = han_words(sentence)
    return [
        i
        for i in range(len(sp) - 1)
        if sp[i][1] == sp[i + 1][0] and sentence[sp[i][0] : sp[i][1]] != sentence[sp[i + 1][0] : sp[i + 1][1]]
    ]


def can_shift(sentence: str) -> bool:
    return bool(_han_shift_positions(sentence) if has_han(sentence) else _shift_positions(sentence.split()))


def bigram_shift(sentence: str, rng: np.random.Generator) -> str:
    """``sentence`` with two adjacent lowercase words swapped (at a random valid place); a Chinese sentence: two
    adjacent 词."""
    if has_han(sentence):
        sp = han_words(sentence)
        i = int(rng.choice(_han_shift_positions(sentence)))
        (a, b), (c, d) = sp[i], sp[i + 1]
        return sentence[:a] + sentence[c:d] + sentence[a:b] + sentence[d:]
    w = sentence.split()
    i = int(rng.choice(_shift_positions(w)))
    w[i], w[i + 1] = w[i + 1], w[i]
    return " ".join(w)


def bigram_shift_task(pool: Sequence[str], n: int, share: float = 0.2, seed: int = 0) -> ProbeTask:
    cands = [i for i, s in enumerate(pool) if can_shift(s)]
    return _binary_task(
        "bigram_shift", pool, cands, bigram_shift, n, share, _rng(seed, "bigram_shift"), ("original", "swapped")
    )


def coordination(sentence: str) -> tuple[str, str, str] | None:
    """(X, Y, end mark) when ``sentence`` reads "X, and Y<end>" with clause-like X and Y, else None."""
    if sentence.count(", and ") != 1 or sentence[-1] not in ".!?":
        return None
    left, right = sentence[:-1].split(", and ")
    lw, rw = left.split(), right.split()
    if len(lw) < 3 or len(rw) < 3 or _CLAUSE_MARKS.search(left) or _CLAUSE_MARKS.search(right):
        return None
    if lw[0].lower() in CONJUNCTIONS or not (rw[0].lower() in SUBJECTS or rw[0][:1].isupper()):  # a capital: a name
        return None
    return left, right, sentence[-1]


def lower_vocab(pool: Sequence[str]) -> set[str]:
    """Words seen in lowercase after a sentence's first word (so "The" may become "the", "Python" may not)."""
    return {w for s in pool for w in s.split()[1:] if w.islower()}


def coord_invert(sentence: str, lower: set[str]) -> str:
    """ "X, and Y." -> "Y, and X." with the capital moved to the new first word."""
    parts = coordination(sentence)
    if parts is None:
        raise ValueError(f'not an "X, and Y." sentence: {sentence!r}')  # callers pass coordination()'s finds
    left, right, end = parts
    first, rest = (left.split(" ", 1) + [""])[:2]
    if (first.lower() in lower or first.lower() in SUBJECTS) and first != "I":
        first = first.lower()
    left = f"{first} {rest}".strip()
    right = right[0].upper() + right[1:]
    return f"{right}, and {left}{end}"


def coord_inversion_task(pool: Sequence[str], n: int, share: float = 0.2, seed: int = 0) -> ProbeTask:
    cands = [i for i, s in enumerate(pool) if coordination(s)]
    lower = lower_vocab(pool)
    return _binary_task(
        "coord_inversion",
        pool,
        cands,
        lambda s, _rng: coord_invert(s, lower),
        n,
        share,
        _rng(seed, "coord_inversion"),
        ("original", "inverted"),
    )


def _odd_words(sentence: str) -> list[tuple[int, int]]:
    """The spans of the words of ``sentence`` the odd-word task may replace: a Chinese sentence's 词 of two or more
    characters; else its whitespace tokens after the first (the first may carry a capital)."""
    if has_han(sentence):
        return [(a, b) for a, b in han_words(sentence) if b - a >= 2]
    spans = [m.span() for m in re.finditer(r"\S+", sentence)]
    return spans[1:]


def frequency_bands(pool: Sequence[str]) -> dict[str, int]:
    """Lowercase letter-only words (3+ letters, seen twice or more after a sentence's first word) and Chinese 词 (two
    or more characters, seen twice or more) -> their band, floor(log2(count))."""
    counts = Counter(
        w
        for s in pool
        for a, b in _odd_words(s)
        if (w := s[a:b]) and (has_han(w) or (len(w) >= 3 and w.isascii() and w.isalpha() and w.islower()))
    )
    return {w: int(math.log2(c)) for w, c in counts.items() if c >= 2}


def odd_word_task(pool: Sequence[str], n: int, share: float = 0.2, seed: int = 0) -> ProbeTask:
    bands = frequency_bands(pool)
    members: dict[tuple[bool, int], list[str]] = {}  # (Chinese?, band): a word is replaced by one of its script
    for w, b in sorted(bands.items()):
        members.setdefault((has_han(w), b), []).append(w)

    def group(w: str) -> list[str]:
        return members[(has_han(w), bands[w])]

    def places(s: str) -> list[tuple[int, int]]:
        return [(a, b) for a, b in _odd_words(s) if s[a:b] in bands and len(group(s[a:b])) > 1]

    def edit(s: str, rng: np.random.Generator) -> str:
        spots = places(s)
        a, b = spots[int(rng.choice(len(spots)))]
        old = s[a:b]
        band = group(old)
        new = old
        while new == old:
            new = band[int(rng.integers(len(band)))]
        return s[:a] + new + s[b:]

    cands = [i for i, s in enumerate(pool) if places(s)]
    return _binary_task(
        "odd_word",
        pool,
        cands,
        edit,
        n,
        share,
        _rng(seed, "odd_word"),
        ("original", "replaced"),
    )


@functools.lru_cache(maxsize=1 << 16)  # a corpus scan asks for every word token: most are repeats
def suffix_class(word: str) -> int | None:
    """Index into SUFFIX_CLASSES for a letter-only word of 4+ letters, else None."""
    w = word.lower()
    if len(w) < 4 or not w.isalpha() or not w.isascii():
        return None
    if w.endswith("ing"):
        return 0
    if w.endswith("ed"):
        return 1
    if w.endswith("ly"):
        return 2
    if w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return 3
    return 4


register_cache(__name__, suffix_class.cache_clear)


def suffix_task(pool: Sequence[str], n: int, share: float = 0.2, seed: int = 0) -> ProbeTask:
    """Words of the corpus labelled by suffix class, the same count per class, with the Hewitt & Liang control labels
    (one random label per word type).

    Word types are drawn at random, per class, among those the corpus has at least twice, and each brings up to
    MAX_TYPE_TOKENS of its occurrences: types recur across the train/held-out split, as in a real corpus, so a probe
    that memorises types can score on the control task (and is exposed by it)."""
    rng = _rng(seed, "suffix")
    k = len(SUFFIX_CLASSES)
    where: dict[str, list[tuple[int, int]]] = {}
    for si, s in enumerate(pool):
        for wi, (a, b) in enumerate(sentence_words(s)):
            w = s[a:b].lower()
            if suffix_class(w) is not None:
                where.setdefault(w, []).append((si, wi))
    found = sum(len(v) for v in where.values())
    by_class: list[list[str]] = [[] for _ in range(k)]
    for w in sorted(where):
        c = suffix_class(w)  # not None: where holds only such words
        if c is not None and len(where[w]) >= 2:
            by_class[c].append(w)
    per = n // k
    picked: list[list[tuple[int, int, str]]] = [[] for _ in range(k)]
    for c in range(k):
        for j in rng.permutation(len(by_class[c])):
            w = by_class[c][j]
            occ = where[w]
            take = rng.choice(len(occ), size=min(MAX_TYPE_TOKENS, len(occ)), replace=False)
            picked[c].extend((occ[i][0], occ[i][1], w) for i in sorted(take))
            if len(picked[c]) >= per:
                break
    per = min(per, min(len(p) for p in picked))
    if per * k < MIN_ITEMS:
        raise _too_few("suffix", per * k, pool)
    items = sorted((si, wi, w, c) for c in range(k) for si, wi, w in picked[c][:per])  # by sentence, then word
    sent_ids = sorted({si for si, *_ in items})
    local = {si: j for j, si in enumerate(sent_ids)}
    labels = np.asarray([c for *_, c in items], dtype=np.int64)
    types = tuple(w for _, _, w, _ in items)
    # Hewitt & Liang (2019): each type's control label is drawn from the real task's label distribution.
    dist = np.bincount(labels, minlength=k) / len(labels)
    type_label = {w: int(rng.choice(k, p=dist)) for w in sorted(set(types))}
    held_sent = rng.random(len(sent_ids)) < share
    heldout = np.asarray([held_sent[local[si]] for si, *_ in items], dtype=bool)
    if heldout.all() or not heldout.any():  # a tiny corpus: hold out a fifth of the items instead
        heldout[:] = False
        heldout[rng.permutation(len(items))[: max(1, len(items) // 5)]] = True
    sents = tuple(pool[si] for si in sent_ids)
    return ProbeTask(
        "suffix",
        "word",
        SUFFIX_CLASSES,
        sents,
        sents,
        labels,
        heldout,
        found,
        words=np.asarray([(local[si], wi) for si, wi, _, _ in items], dtype=np.int64),
        types=types,
        control=np.asarray([type_label[w] for w in types], dtype=np.int64),
    )


BUILDERS = {
    "length": length_task,
    "bigram_shift": bigram_shift_task,
    "coord_inversion": coord_inversion_task,
    "odd_word": odd_word_task,
    "suffix": suffix_task,
}

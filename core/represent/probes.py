"""Layer probes: what a linear classifier can read off each depth's representations (embeddings included).

Tasks are built offline from any corpus (the bundled one, or text a user pastes or uploads), each a frozen labelled
set drawn with a fixed seed (Conneau et al. 2018, "What you can cram into a single $&!#* vector", for the first four):

- ``length``: the sentence's length in words, in LENGTH_BINS bins (quantiles of the corpus), sampled balanced.
- ``bigram_shift``: two adjacent lowercase words swapped (label "swapped") or the sentence as written.
- ``coord_inversion``: sentences of the form "X, and Y." (one ", and ", no other comma/colon/semicolon, three or more
  words each side, Y opening with a subject word such as "the", "he", "it"), with the clauses swapped or not.
  The corpus's count of such sentences is ``TaskScore.found``.
- ``odd_word``: one lowercase word replaced by a random other word of the same frequency band
  (floor(log2(count)) in this corpus) or the sentence as written.
- ``suffix``: a word-level task: the word's suffix class (-ing, -ed, -ly, -s, other) on the word's vector (mean of
  its pieces), paired with the Hewitt & Liang (2019) control task: every word type gets a random label (drawn from
  the real task's label distribution, fixed seed) and the same probe is trained on those. The control labels can
  only be learned by memorising word identities, so selectivity = real accuracy - control accuracy shows how much of
  the real accuracy is more than memorising. WordNet's word classes would be a more linguistic word task, but
  /usr/share/wordnet is not installed here and the bundled WordNet data (assets/data/wordnet) keeps glosses, not
  lemmas; suffix classes need nothing but the corpus.

Sentence tasks read the mean over the sentence's tokens (``TokenVectors.sentence_means``), word tasks the word rows
(``unit="word"``); every depth comes from one forward per batch (core.represent.token_vectors). Items are split into train and
held-out with the same seed (stratified for sentence tasks; by sentence for the word task, so a held-out word's type
may well have been seen in training: that is what lets a memorising probe score on the control task).

The probe is scikit-learn's LogisticRegression (L2, lbfgs) on standardised features, one per depth and task. At
these sizes (a few thousand rows, H <= 1024) it fits in well under a second, needs no learning-rate or epoch tuning,
and is deterministic; a torch linear layer would need all three and would not be faster on CPU.

Results are saved under ``probes_root()`` (ENCODERLAB_PROBES_DIR, default <runs>/probes-cache, a "session" folder of
core.runtime.jobs.evict_run_folders, so its size and age are bounded with the runs), one JSON per model key and inputs.
"""
from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import math
import os
import re
import time
import warnings
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from core.models.loading import LoadedModel, ModelSpec
from core.represent.token_vectors import MAX_SENTENCES, WORD_RE, num_depths, token_vectors

TASKS = ("length", "bigram_shift", "coord_inversion", "odd_word", "suffix")
WORD_TASKS = ("suffix",)  # probed on word rows, with a control task; the others on sentence means
TASK_NAMES = {"length": "Sentence length", "bigram_shift": "Bigram shift", "coord_inversion": "Coordination inversion",
              "odd_word": "Odd word out", "suffix": "Suffix class (word)"}
LENGTH_BINS = 5
SUFFIX_CLASSES = ("-ing", "-ed", "-ly", "-s", "other")
MIN_WORDS, MAX_WORDS = 4, 60  # corpus sentences probed: long enough to edit, short enough not to be truncated
MIN_ITEMS = 20  # a task with fewer items than this cannot be probed (the message says so)
MIN_PER_TASK, MAX_PER_TASK, DEFAULT_PER_TASK = 40, 5000, 300
HOSTED_MAX_PER_TASK = 1000
MAX_TYPE_TOKENS = 3  # word task: occurrences kept per word type (>= 2, so types recur; more would mean few types)
WORDS_PER_SENTENCE = 4  # word task: labelled words taken from one sentence at most
CHUNK = 128  # sentences per token_vectors call (bounds memory: chunk x tokens x depths x H floats)
PROBES_FORMAT = 1  # bump when a saved result's meaning changes
SUBJECTS = frozenset("the a an this that these those there it he she they we you i his her their its my our your "
                     "one some each every all no many most thou ye thy thine mine".split())
CONJUNCTIONS = frozenset("and but or nor for so yet then".split())
_CLAUSE_MARKS = re.compile(r"[,;:]")


def max_per_task() -> int:
    """The most sentences per task this server allows (fewer on the hosted demo: every one is a forward)."""
    from core.base.settings import current

    return HOSTED_MAX_PER_TASK if current().hosted else MAX_PER_TASK


class ProbeError(ValueError):
    """The probes cannot run on this corpus or with these settings; the message says why and what to do."""


# ---------------------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class ProbeConfig:
    """Which tasks, how many items per task, the held-out share, the seed, and the corpus (None: the bundled
    corpus's train split)."""

    tasks: tuple[str, ...] = TASKS
    per_task: int = DEFAULT_PER_TASK  # sentences per sentence task, labelled words for the word task
    heldout: float = 0.2
    seed: int = 0
    max_length: int = 128  # tokens per sentence at most (the tail of a longer one is cut)
    reg: float = 1.0  # the probe's inverse L2 strength (LogisticRegression's C)
    corpus: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        tasks = tuple(dict.fromkeys(str(x) for x in (self.tasks or ())))
        object.__setattr__(self, "tasks", tasks)
        if not tasks:
            raise ProbeError("Pick at least one task.")
        bad = [x for x in tasks if x not in TASKS]
        if bad:
            raise ProbeError(f"Unknown task(s) {', '.join(bad)}: use {', '.join(TASKS)}.")
        top = max_per_task()
        if not MIN_PER_TASK <= int(self.per_task) <= top:
            raise ProbeError(f"Sentences per task must be {MIN_PER_TASK} to {top:,}, got {self.per_task}.")
        object.__setattr__(self, "per_task", int(self.per_task))
        if not 0.1 <= float(self.heldout) <= 0.5:
            raise ProbeError(f"The held-out share must be 0.1 to 0.5, got {self.heldout}.")
        if not 16 <= int(self.max_length) <= 512:
            raise ProbeError(f"Max length must be 16 to 512 tokens, got {self.max_length}.")
        if not float(self.reg) > 0:
            raise ProbeError(f"The probe's C (inverse regularisation) must be above 0, got {self.reg}.")
        if self.corpus is not None:
            object.__setattr__(self, "corpus", tuple(str(s) for s in self.corpus))
            if len(self.corpus) > MAX_SENTENCES:
                raise ProbeError(f"{len(self.corpus):,} sentences is more than the {MAX_SENTENCES:,} a corpus may "
                                 "have here: use a part of it.")

    def sentences(self) -> tuple[str, ...]:
        """The corpus's probe-able sentences (normalised whitespace, 4-60 words, no repeats)."""
        if self.corpus is None:
            from core.inspect.lens import corpus_sentences

            return prepare_corpus(corpus_sentences("train"))
        return prepare_corpus(self.corpus)

    def key(self) -> str:
        """A hash of everything the result depends on but the model."""
        h = hashlib.sha256(f"probes{PROBES_FORMAT}".encode())
        d = asdict(self)
        corpus = d.pop("corpus")
        h.update(json.dumps(d, sort_keys=True).encode())
        h.update(b"bundled" if corpus is None else "\n".join(corpus).encode("utf-8", "replace"))
        return h.hexdigest()[:20]


# ---------------------------------------------------------------------------------------------- corpus
def prepare_corpus(sentences: Sequence[str]) -> tuple[str, ...]:
    """Sentences with whitespace collapsed, MIN_WORDS..MAX_WORDS words long, first occurrence of each kept.
    Raises ProbeError when none is left."""
    out = tuple(dict.fromkeys(s for s in (" ".join(str(x).split()) for x in sentences)
                              if MIN_WORDS <= len(s.split()) <= MAX_WORDS))
    if not out:
        raise ProbeError(f"The corpus has no sentence of {MIN_WORDS} to {MAX_WORDS} words: paste or upload text with "
                         "one sentence per line (or paragraphs of full sentences).")
    return out


def corpus_from_text(text: str) -> list[str]:
    """Sentences of pasted text: each line, split at sentence ends. Raises ProbeError for no text or too many."""
    from core.data.corpus import split_sentences

    sents = [s for line in str(text).splitlines() if line.strip() for s in split_sentences(line.strip())]
    if not sents:
        raise ProbeError("The corpus is empty: paste or upload some text (one sentence per line).")
    if len(sents) > MAX_SENTENCES:
        raise ProbeError(f"The text has {len(sents):,} sentences; the most a corpus may have here is "
                         f"{MAX_SENTENCES:,}. Use a part of it.")
    return sents


def corpus_from_upload(raw: bytes, name: str = "upload") -> list[str]:
    """Sentences of an uploaded UTF-8 text file. Raises ProbeError for a file over the upload limit, a binary
    file, text that is not UTF-8, or no sentences."""
    from core.base.uploads import upload_text

    text = upload_text(raw, name, error=ProbeError, expect="a UTF-8 .txt file, one sentence per line")
    return corpus_from_text(text)


# ---------------------------------------------------------------------------------------------- tasks
@dataclass(frozen=True, eq=False)
class ProbeTask:
    """A frozen labelled set. Sentence tasks: one item per sentence. Word tasks: items are words, ``words[i]`` =
    (sentence index, word index in WORD_RE order), with ``control`` labels per word type."""

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
        held[idx[:max(1, int(round(share * len(idx))))]] = True
    return held


def _too_few(task: str, have: int, what: str) -> ProbeError:
    return ProbeError(f"{TASK_NAMES[task]}: the corpus gives only {have} {what}; at least {MIN_ITEMS} are needed. Use a "
                      "larger corpus or leave this task out.")


def _binary_task(name: str, pool: Sequence[str], cands: list[int], edit, n: int, share: float,
                 rng: np.random.Generator, label_names: tuple[str, str], what: str) -> ProbeTask:
    """Half of ``n`` sampled candidate sentences edited by ``edit(sentence, rng)`` (label 1), half as written."""
    m = min(n, len(cands)) // 2 * 2
    if m < MIN_ITEMS:
        raise _too_few(name, len(cands), what)
    picked = [pool[i] for i in rng.choice(np.asarray(cands), size=m, replace=False)]
    labels = np.zeros(m, dtype=np.int64)
    labels[rng.permutation(m)[: m // 2]] = 1
    sents = tuple(edit(s, rng) if y else s for s, y in zip(picked, labels))
    return ProbeTask(name, "sentence", label_names, sents, tuple(picked), labels,
                     _stratified_heldout(labels, share, rng), len(cands))


def length_task(pool: Sequence[str], n: int, share: float = 0.2, seed: int = 0) -> ProbeTask:
    """Sentence length in words (whitespace tokens), in LENGTH_BINS quantile bins, the same count per bin."""
    rng = _rng(seed, "length")
    counts = np.asarray([len(s.split()) for s in pool])
    edges = np.unique(np.floor(np.quantile(counts, np.linspace(0, 1, LENGTH_BINS + 1)[1:-1])).astype(int) + 1)
    bins = np.searchsorted(edges, counts, side="right")  # bin b: edges[b-1] <= words < edges[b]
    present = [b for b in range(len(edges) + 1) if (bins == b).any()]
    if len(present) < 2:
        raise ProbeError(f"{TASK_NAMES['length']}: every sentence of this corpus has about the same length, so there "
                         "is nothing to tell apart. Use a corpus with short and long sentences.")
    per = min(n // len(present), min(int((bins == b).sum()) for b in present))
    if per * len(present) < MIN_ITEMS:
        raise _too_few("length", per * len(present), "sentences in balanced length bins")
    lo = [int(counts.min())] + [int(e) for e in edges]
    hi = [int(e) - 1 for e in edges] + [int(counts.max())]
    names = tuple(f"{lo[b]}–{hi[b]} words" if lo[b] != hi[b] else f"{lo[b]} words" for b in present)
    idx, labels = [], []
    for k, b in enumerate(present):
        chosen = rng.choice(np.flatnonzero(bins == b), size=per, replace=False)
        idx.extend(int(i) for i in chosen)
        labels.extend([k] * per)
    order = rng.permutation(len(idx))
    sents = tuple(pool[idx[i]] for i in order)
    labels = np.asarray(labels, dtype=np.int64)[order]
    return ProbeTask("length", "sentence", names, sents, sents, labels, _stratified_heldout(labels, share, rng),
                     len(pool))


def _shift_positions(words: list[str]) -> list[int]:
    """i such that words i and i+1 are different lowercase letter-only words (never the first word: swapping it
    would move a capital letter, a cue that has nothing to do with word order)."""
    ok = [w.isascii() and w.isalpha() and w.islower() for w in words]
    return [i for i in range(1, len(words) - 1) if ok[i] and ok[i + 1] and words[i] != words[i + 1]]


def bigram_shift(sentence: str, rng: np.random.Generator) -> str:
    """``sentence`` with two adjacent lowercase words swapped (at a random valid place)."""
    w = sentence.split()
    i = int(rng.choice(_shift_positions(w)))
    w[i], w[i + 1] = w[i + 1], w[i]
    return " ".join(w)


def bigram_shift_task(pool: Sequence[str], n: int, share: float = 0.2, seed: int = 0) -> ProbeTask:
    cands = [i for i, s in enumerate(pool) if _shift_positions(s.split())]
    return _binary_task("bigram_shift", pool, cands, bigram_shift, n, share, _rng(seed, "bigram_shift"),
                        ("original", "swapped"), "sentences with two adjacent lowercase words")


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


def _lower_vocab(pool: Sequence[str]) -> set[str]:
    """Words seen in lowercase after a sentence's first word (so "The" may become "the", "Python" may not)."""
    return {w for s in pool for w in s.split()[1:] if w.islower()}


def coord_invert(sentence: str, lower: set[str]) -> str:
    """"X, and Y." -> "Y, and X." with the capital moved to the new first word."""
    left, right, end = coordination(sentence)
    first, rest = (left.split(" ", 1) + [""])[:2]
    if (first.lower() in lower or first.lower() in SUBJECTS) and first != "I":
        first = first.lower()
    left = f"{first} {rest}".strip()
    right = right[0].upper() + right[1:]
    return f"{right}, and {left}{end}"


def coord_inversion_task(pool: Sequence[str], n: int, share: float = 0.2, seed: int = 0) -> ProbeTask:
    cands = [i for i, s in enumerate(pool) if coordination(s)]
    lower = _lower_vocab(pool)
    return _binary_task("coord_inversion", pool, cands, lambda s, _rng: coord_invert(s, lower), n, share,
                        _rng(seed, "coord_inversion"), ("original", "inverted"), 'sentences of the form "X, and Y."')


def frequency_bands(pool: Sequence[str]) -> dict[str, int]:
    """Lowercase letter-only words (3+ letters, seen twice or more after a sentence's first word) -> their band,
    floor(log2(count))."""
    counts = Counter(w for s in pool for w in s.split()[1:] if len(w) >= 3 and w.isascii() and w.isalpha()
                     and w.islower())
    return {w: int(math.log2(c)) for w, c in counts.items() if c >= 2}


def odd_word_task(pool: Sequence[str], n: int, share: float = 0.2, seed: int = 0) -> ProbeTask:
    bands = frequency_bands(pool)
    members: dict[int, list[str]] = {}
    for w, b in sorted(bands.items()):
        members.setdefault(b, []).append(w)

    def places(s: str) -> list[int]:
        return [i for i, w in enumerate(s.split()) if i > 0 and w in bands and len(members[bands[w]]) > 1]

    def edit(s: str, rng: np.random.Generator) -> str:
        w = s.split()
        i = int(rng.choice(places(s)))
        band = members[bands[w[i]]]
        new = w[i]
        while new == w[i]:
            new = band[int(rng.integers(len(band)))]
        w[i] = new
        return " ".join(w)

    cands = [i for i, s in enumerate(pool) if places(s)]
    return _binary_task("odd_word", pool, cands, edit, n, share, _rng(seed, "odd_word"), ("original", "replaced"),
                        "sentences with a word to replace")


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
        for wi, m in enumerate(WORD_RE.finditer(s)):
            w = m.group().lower()
            if suffix_class(w) is not None:
                where.setdefault(w, []).append((si, wi))
    found = sum(len(v) for v in where.values())
    by_class: list[list[str]] = [[] for _ in range(k)]
    for w in sorted(where):
        if len(where[w]) >= 2:
            by_class[suffix_class(w)].append(w)
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
        raise _too_few("suffix", per * k, "repeated words in every suffix class")
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
    return ProbeTask("suffix", "word", SUFFIX_CLASSES, sents, sents, labels, heldout, found,
                     words=np.asarray([(local[si], wi) for si, wi, _, _ in items], dtype=np.int64), types=types,
                     control=np.asarray([type_label[w] for w in types], dtype=np.int64))


BUILDERS = {"length": length_task, "bigram_shift": bigram_shift_task, "coord_inversion": coord_inversion_task,
            "odd_word": odd_word_task, "suffix": suffix_task}


def build_tasks(cfg: ProbeConfig, pool: Sequence[str] | None = None) -> tuple[ProbeTask, ...]:
    """The labelled sets of ``cfg.tasks`` drawn from ``pool`` (default: ``cfg.sentences()``). Raises ProbeError."""
    pool = cfg.sentences() if pool is None else tuple(pool)
    return tuple(BUILDERS[name](pool, cfg.per_task, cfg.heldout, cfg.seed) for name in cfg.tasks)


# ---------------------------------------------------------------------------------------------- probing
def fit_probes(features: np.ndarray, labels: np.ndarray, heldout: np.ndarray, reg: float = 1.0,
               on_depth: Callable[[int], None] | None = None) -> tuple[float, ...]:
    """Held-out accuracy of a linear probe (standardised features, L2 logistic regression) at each depth.

    ``features``: (depths, items, H); ``labels``: (items,); ``heldout``: (items,) bool. Raises ProbeError when the
    training part has a single label or either part is empty."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    labels = np.asarray(labels)
    train = ~np.asarray(heldout, dtype=bool)
    if not train.any() or train.all():
        raise ProbeError("The split left no training or no held-out items: use more sentences per task.")
    if len(np.unique(labels[train])) < 2:
        raise ProbeError("The training items all have the same label: use more sentences per task.")
    out = []
    for d in range(features.shape[0]):
        x = np.asarray(features[d], dtype=np.float64)
        scaler = StandardScaler().fit(x[train])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # 500 lbfgs steps: close enough for a probe
            clf = LogisticRegression(C=reg, max_iter=500).fit(scaler.transform(x[train]), labels[train])
        out.append(float((clf.predict(scaler.transform(x[~train])) == labels[~train]).mean()))
        if on_depth is not None:
            on_depth(d)
    return tuple(out)


def majority_rate(labels: np.ndarray, heldout: np.ndarray) -> float:
    """Held-out accuracy of always answering the most frequent training label."""
    train = ~heldout
    top = np.bincount(labels[train]).argmax()
    return float((labels[heldout] == top).mean())


def _features(lm: LoadedModel, task: ProbeTask, max_length: int,
              on_progress: Callable[[float, str], None] | None) -> tuple[np.ndarray, np.ndarray]:
    """((depths, items, H) features, (items,) bool: the item has a vector). A word cut off by max_length has none."""
    n = len(task.sentences)
    parts, keep = [], np.ones(len(task), dtype=bool)
    for a in range(0, n, CHUNK):
        chunk = task.sentences[a:a + CHUNK]

        def prog(f: float, _msg: str, a=a, c=len(chunk)) -> None:
            if on_progress is not None:
                on_progress((a + f * c) / n, f"{min(n, a + round(f * c)):,} / {n:,} sentences")

        tv = token_vectors(lm, chunk, None, unit=task.unit if task.unit == "word" else "piece",
                           max_length=max_length, on_progress=prog)
        if task.unit == "sentence":
            parts.append(tv.sentence_means())  # (depths, chunk, H)
            continue
        row_of = {(int(s) + a, int(w)): r for r, (s, w) in enumerate(zip(tv.sentence_ids, tv.word_index))}
        mine = np.flatnonzero((task.words[:, 0] >= a) & (task.words[:, 0] < a + len(chunk)))
        rows = [row_of.get((int(task.words[i, 0]), int(task.words[i, 1]))) for i in mine]
        keep[mine] = [r is not None for r in rows]
        parts.append(tv.vectors[:, [r for r in rows if r is not None]])
    return np.concatenate(parts, axis=1), keep


@dataclass(frozen=True)
class TaskScore:
    """One task's probe accuracy at every depth (0 = embeddings), and for a word task its control task's."""

    task: str
    unit: str
    label_names: tuple[str, ...]
    n_train: int
    n_heldout: int
    found: int  # candidates the corpus had (sentences, or words for the word task)
    accuracy: tuple[float, ...]  # (depths,) held-out accuracy
    majority: float  # held-out accuracy of the most frequent training label
    control: tuple[float, ...] | None = None  # (depths,) the control task's held-out accuracy (word tasks)
    selectivity: tuple[float, ...] | None = None  # accuracy - control
    examples: tuple[tuple[str, str], ...] = ()  # a few (label, sentence) pairs, for the page
    dropped: int = 0  # word items without a vector (cut off by max_length)

    @property
    def best_depth(self) -> int:
        """The depth with the highest held-out accuracy (the shallower one on a tie)."""
        return int(np.argmax(self.accuracy))


@dataclass(frozen=True)
class ProbeResult:
    checkpoint: str
    family: str
    num_depths: int
    config: dict  # ProbeConfig's fields but the corpus
    corpus_sentences: int  # probe-able sentences in the corpus
    corpus: str  # "bundled" or "custom"
    scores: tuple[TaskScore, ...]
    seconds: float
    model_key: str = ""
    created: float = 0.0

    def score(self, task: str) -> TaskScore:
        return next(s for s in self.scores if s.task == task)

    @property
    def best_depth(self) -> dict[str, int]:
        return {s.task: s.best_depth for s in self.scores}

    def table(self) -> list[dict]:
        """One row per task and depth: what the CSV export holds."""
        rows = []
        for s in self.scores:
            for d, acc in enumerate(s.accuracy):
                rows.append({"task": s.task, "depth": d, "accuracy": round(acc, 4), "majority": round(s.majority, 4),
                             "control": None if s.control is None else round(s.control[d], 4),
                             "selectivity": None if s.selectivity is None else round(s.selectivity[d], 4),
                             "best": d == s.best_depth, "n_train": s.n_train, "n_heldout": s.n_heldout})
        return rows

    def to_csv(self) -> str:
        buf = io.StringIO()
        rows = self.table()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in rows)
        return buf.getvalue()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "ProbeResult":
        d = json.loads(text)

        def tup(x):
            return None if x is None else tuple(x)

        scores = tuple(TaskScore(**{**s, "label_names": tuple(s["label_names"]), "accuracy": tuple(s["accuracy"]),
                                    "control": tup(s["control"]), "selectivity": tup(s["selectivity"]),
                                    "examples": tuple(tuple(e) for e in s["examples"])}) for s in d.pop("scores"))
        return cls(**d, scores=scores)


def _examples(task: ProbeTask, k: int = 2) -> tuple[tuple[str, str], ...]:
    out = []
    for c in range(len(task.label_names)):
        idx = np.flatnonzero(task.labels == c)[:k if task.unit == "sentence" else 1]
        for i in idx:
            if task.unit == "word":
                out.append((task.label_names[c], task.types[i]))
            else:
                out.append((task.label_names[c], task.sentences[i]))
    return tuple(out)


def run_probes(lm: LoadedModel, cfg: ProbeConfig,
               on_progress: Callable[..., None] | None = None) -> ProbeResult:
    """Build ``cfg``'s tasks, read every depth's vectors for them and train a probe per task and depth.

    ``on_progress(fraction, message)`` after each batch and probe (a job's ``ctx.progress``: it raises JobCancelled
    on Cancel). Raises ProbeError (a ValueError) for a corpus that cannot make a task, or bad settings."""
    from core.base.paths import scrub

    t0 = time.perf_counter()
    pool = cfg.sentences()
    if on_progress is not None:
        on_progress(0.0, f"building {len(cfg.tasks)} task(s) from {len(pool):,} sentences")
    tasks = build_tasks(cfg, pool)
    depths = num_depths(lm)
    scores = []
    for ti, task in enumerate(tasks):
        share = 1.0 / len(tasks)
        title = TASK_NAMES[task.name]

        def prog(f: float, msg: str, ti=ti, title=title) -> None:
            if on_progress is not None:
                on_progress(share * (ti + 0.8 * f), f"{title}: vectors, {msg}")

        feats, keep = _features(lm, task, cfg.max_length, prog)
        labels, held = task.labels[keep], task.heldout[keep]

        def per_depth(d: int, ti=ti, title=title, n=2 if task.control is not None else 1, part=0) -> None:
            if on_progress is not None:
                on_progress(share * (ti + 0.8 + 0.2 * (part * depths + d + 1) / (n * depths)),
                            f"{title}: probe at depth {d}")

        acc = fit_probes(feats, labels, held, cfg.reg, on_depth=per_depth)
        control = selectivity = None
        if task.control is not None:
            control = fit_probes(feats, task.control[keep], held, cfg.reg,
                                 on_depth=functools.partial(per_depth, part=1))
            selectivity = tuple(a - c for a, c in zip(acc, control))
        scores.append(TaskScore(task.name, task.unit, task.label_names, int((~held).sum()), int(held.sum()),
                                task.found, acc, majority_rate(labels, held), control, selectivity,
                                _examples(task), int((~keep).sum())))
    if on_progress is not None:
        on_progress(1.0, "done")
    conf = {k: v for k, v in asdict(cfg).items() if k != "corpus"}
    conf["tasks"] = list(cfg.tasks)
    return ProbeResult(scrub(lm.spec.checkpoint), lm.spec.family, depths, conf, len(pool),
                       "bundled" if cfg.corpus is None else "custom", tuple(scores),
                       round(time.perf_counter() - t0, 2), model_key(lm), time.time())


# ---------------------------------------------------------------------------------------------- storage and jobs
def probes_root() -> Path:
    """Where probe results are saved: $ENCODERLAB_PROBES_DIR, default <runs>/probes-cache."""
    from core.base.settings import runs_base

    raw = os.environ.get("ENCODERLAB_PROBES_DIR", "").strip()
    return Path(raw) if raw else runs_base() / "probes-cache"


def model_key(lm: LoadedModel) -> str:
    """A key for the checkpoint's weights (core.inspect.lens.model_key: a hash of its config and weight files)."""
    from core.inspect.lens import model_key as key  # the hash of the checkpoint's config and weight files (name, size, mtime)

    return key(lm)


def result_path(lm: LoadedModel, cfg: ProbeConfig) -> Path:
    """This model's and these inputs' result file (named by family and hashes: never by a server path)."""
    return probes_root() / f"{lm.spec.family}-{model_key(lm)}" / f"{cfg.key()}.json"


def save_result(lm: LoadedModel, cfg: ProbeConfig, result: ProbeResult) -> None:
    path = result_path(lm, cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(result.to_json())
    os.replace(tmp, path)


def saved_result(lm: LoadedModel, cfg: ProbeConfig) -> ProbeResult | None:
    """The result saved for this model and ``cfg``, or None (also for an unreadable file)."""
    path = result_path(lm, cfg)
    if not path.is_file():
        return None
    try:
        res = ProbeResult.from_json(path.read_text())
        os.utime(path.parent)  # in use: the runs' age bound counts from here
        return res
    except (OSError, ValueError, TypeError, KeyError):
        return None


def probe_job(spec: ModelSpec, cfg: ProbeConfig):
    """A core.runtime.jobs function running the probes for ``spec`` (a fresh copy of the model, loaded in the job) and saving
    the result: a partial of a module-level function over plain data, so it runs in a worker process."""
    return functools.partial(_run_probe_job, spec, cfg)


def _run_probe_job(spec: ModelSpec, cfg: ProbeConfig, ctx) -> ProbeResult:
    from core.models.loading import load

    ctx.progress(0.0, "loading a fresh copy of the model")
    lm = load(spec, task="base")
    result = run_probes(lm, cfg, on_progress=ctx.progress)
    save_result(lm, cfg, result)
    return result


# ---------------------------------------------------------------------------------------------- estimate
TIMING_SENTENCES = 16  # sentences of the bundled corpus in the timed forward (one batch; a run batches more: errs long)
TIMING_FIT_ROWS = 300  # rows of the timed probe fit (the default per-task size)


@dataclass(frozen=True)
class ProbeTiming:
    """What an estimate reads, measured on this model: seconds per sentence of one batched forward with every
    depth's vectors (core.represent.token_vectors, after a warm-up forward of the same batch), and seconds of one probe fit on TIMING_FIT_ROWS
    rows of the model's width (random features and labels: lbfgs runs its full course, so this errs long)."""

    per_sentence: float
    per_fit: float
    fit_rows: int = TIMING_FIT_ROWS


@dataclass(frozen=True)
class ProbeEstimate:
    sentences: int  # forwards: at most per_task sentences per task (a corpus with fewer gives fewer)
    fits: int  # probes: one per task and depth, twice for a word task (its control task)
    seconds: float


def time_probe_parts(lm: LoadedModel, rows: int = TIMING_SENTENCES) -> ProbeTiming:
    """Time the two parts of a probe run on ``lm``: a batched forward of ``rows`` bundled-corpus sentences (after a
    warm-up forward of the same batch) and one LogisticRegression fit as fit_probes makes it. A few seconds on a CPU; a caller
    keeps one per model."""
    from core.inspect.lens import corpus_sentences

    pool = corpus_sentences("train")
    sents = prepare_corpus(pool[::max(1, len(pool) // (rows * 4))])[:rows]  # spread over the corpus: its lengths
    token_vectors(lm, sents, None, unit="piece")  # warm-up: the first forwards pay one-off costs (thread pools)
    t0 = time.perf_counter()
    tv = token_vectors(lm, sents, None, unit="piece")
    per_sentence = (time.perf_counter() - t0) / len(sents)
    rng = np.random.default_rng(0)
    n = TIMING_FIT_ROWS
    x = rng.standard_normal((1, n, tv.vectors.shape[-1])).astype(np.float32)
    labels, held = rng.integers(0, 2, n), np.arange(n) % 5 == 0  # a fifth held out, as by default
    fit_probes(x[:, :40], labels[:40], held[:40])  # warm-up: sklearn's import and first call
    t0 = time.perf_counter()
    fit_probes(x, labels, held)
    return ProbeTiming(per_sentence, time.perf_counter() - t0)


def estimate(cfg: ProbeConfig, depths: int, timing: ProbeTiming) -> ProbeEstimate:
    """About how long ``cfg`` takes: sentences x the timed seconds per sentence, plus fits x the timed seconds per
    fit scaled by the rows (lbfgs's cost grows with the rows). Loading the job's model copy and building the tasks
    come on top (seconds)."""
    sentences = cfg.per_task * len(cfg.tasks)
    fits = depths * sum(2 if name in WORD_TASKS else 1 for name in cfg.tasks)
    rows = cfg.per_task * (1 - cfg.heldout)
    seconds = sentences * timing.per_sentence + fits * timing.per_fit * rows / (timing.fit_rows * 0.8)
    return ProbeEstimate(sentences, fits, seconds)

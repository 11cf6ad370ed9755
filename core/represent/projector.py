"""The embedding projector: a word's contextual vectors across a corpus (or every word of a sample of sentences),
projected to 2-D or 3-D at every asked depth in one go, so a layer slider moves between depths without recomputing.

``project(lm, cfg, on_progress)`` -> ``Projection``. The vectors come from core.represent.token_vectors (``unit="word"``: a
word's vector is the mean of its pieces, so "bank" is one point per occurrence in every family). Every vector is
L2-normalised before anything else (cosine geometry): hidden states of BERT-style models carry a few huge outlier
dimensions that would otherwise be all that PCA sees.

Per depth (each fitted on its own; core.represent.projector_maps):
- coordinates by PCA (scikit-learn's ``PCA``: it picks a full or randomized SVD by size, fixes the signs of the
  components (``svd_flip``) so a rerun gives the same picture, and gives the explained variance the page shows;
  a torch SVD would be no faster at these sizes, 50k x 384 takes well under a second), t-SNE (scikit-learn) or
  UMAP (umap-learn). Each depth's map is rotated/reflected onto the previous depth's (orthogonal Procrustes,
  scipy) and scaled to unit RMS, so moving the slider shows the points move rather than the axes flip.
- k-means clusters (scikit-learn ``KMeans``). k is chosen once: the k in 2..6 with the best silhouette at the last
  depth (on at most SILHOUETTE_SAMPLE points), then the same k at every depth, so the numbers compare across depth.
  Cluster ids are matched between neighbouring depths (Hungarian matching, scipy) so colours stay put.
- "senses separate with depth" as numbers: the silhouette of those clusters, and the next-word agreement: how
  often a point's nearest neighbour (cosine, among at most AGREEMENT_SAMPLE points) has the same next word,
  against the chance that two random points do (the sum of the squared label shares).

"Colour by layer" needs every depth in one map: the method is also fitted once on all depths' vectors stacked
(``joint``), always for PCA (cheap), for t-SNE/UMAP only when the config asks for that colouring.

UMAP and t-SNE take seconds to minutes: pages run them as background jobs (``project_job``); progress is reported
between depths (a single fit cannot be interrupted), so Cancel takes effect at the next depth.
"""

from __future__ import annotations

import difflib
import functools
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from core.base.messages import msg
from core.models.loading import LoadedModel, ModelSpec, load
from core.represent.bundled_corpus import LANGS as BUNDLED_LANGS
from core.represent.bundled_corpus import page_corpus, page_corpus_size
from core.represent.projector_maps import depth_maps, map_threads, normalise
from core.represent.token_vectors import MAX_SENTENCES, num_depths, sentence_words, token_vectors

WHATS = ("word", "sample")
CORPORA = ("bundled", "text")
METHODS = ("pca", "umap", "tsne")
JOB_METHODS = ("umap", "tsne")  # run as background jobs
INLINE_POINTS = 5_000  # PCA above this many points also runs as a job: reading 50k words' contexts takes minutes


def runs_as_job(method: str, max_points: int) -> bool:
    """Whether a projection runs as a background job (with progress and Cancel) rather than while the page waits."""
    return method in JOB_METHODS or int(max_points) > INLINE_POINTS


COLORS = ("next_word", "cluster", "layer")
MAX_POINTS = 50_000  # the most points a map may hold (PCA)
JOB_MAX_POINTS = 10_000  # t-SNE / UMAP: above this they take many minutes on a CPU
DEFAULT_POINTS = 5_000
MIN_POINTS = 4  # fewer cannot make a 3-D PCA, a t-SNE perplexity or a UMAP neighbourhood
NEXT_WORD_COLORS = 10  # colour by next word: the most frequent next words get a colour each, the rest "other"
SNIPPET_WORDS = 6  # words of context each side in the hover (up to 10k points; half that above)
SNIPPET_WORDS_MANY = 3
MANY_POINTS = 10_000
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])")


@dataclass(frozen=True)
class ProjectorConfig:
    """What to project and how. Raises ValueError with a fix for bad values."""

    what: str = "word"  # "word": one word's occurrences; "sample": every word of a sample of sentences
    word: str = "bank"
    corpus: str = "bundled"  # "bundled" (assets/corpus train split) or "text" (pasted / uploaded: ``text``)
    text: str = ""
    depths: tuple[int, ...] | None = None  # None: every depth (0 = embeddings)
    method: str = "pca"
    dims: int = 2
    color: str = "next_word"
    max_points: int = DEFAULT_POINTS
    seed: int = 0
    max_length: int = 128  # tokens per sentence
    lang: str = "en"  # the bundled corpus's language: "zh" reads assets/corpus/zh (held-out split)

    def __post_init__(self) -> None:
        if self.lang not in BUNDLED_LANGS:
            raise ValueError(msg("projector.unknown_corpus_use_bundled", corpus=self.lang))
        if self.what not in WHATS:
            raise ValueError(msg("projector.project_use_word_one", what=self.what))
        if self.corpus not in CORPORA:
            raise ValueError(msg("projector.unknown_corpus_use_bundled", corpus=self.corpus))
        if self.method not in METHODS:
            raise ValueError(msg("projector.unknown_method_use_pca", method=self.method))
        if self.dims not in (2, 3):
            raise ValueError(msg("projector.map_has_dimensions_not", dims=self.dims))
        if self.color not in COLORS:
            raise ValueError(msg("projector.colour_use_next_word", color=self.color))
        cap = JOB_MAX_POINTS if self.method in JOB_METHODS else MAX_POINTS
        if not isinstance(self.max_points, int) or not MIN_POINTS <= self.max_points <= cap:
            extra = " (use PCA for more)" if self.method in JOB_METHODS else ""
            raise ValueError(
                msg(
                    "projector.max_points_must_whole",
                    min_points=MIN_POINTS,
                    cap=cap,
                    method=self.method.upper(),
                    extra=extra,
                    max_points=self.max_points,
                )
            )
        if self.depths is not None:
            object.__setattr__(self, "depths", tuple(sorted({int(d) for d in self.depths})))
            if not self.depths or min(self.depths) < 0:
                raise ValueError(msg("projector.depths_must_embeddings_more"))
        if self.what == "word":
            w = self.word.strip() if isinstance(self.word, str) else ""
            if not w:
                raise ValueError(msg("projector.type_word_look_example"))
            if sentence_words(w) != [(0, len(w))]:  # one word (a Chinese 词 is one: 北京)
                raise ValueError(msg("projector.not_one_word", word=w))
            object.__setattr__(self, "word", w)
        if self.corpus == "text" and not (isinstance(self.text, str) and self.text.strip()):
            raise ValueError(msg("projector.text_empty_or_bundled"))

    @property
    def needs_joint(self) -> bool:
        """Whether the method is also fitted on all depths together (colour by layer)."""
        return self.method == "pca" or self.color == "layer"


@dataclass(frozen=True, eq=False)
class Projection:
    """Points (occurrences of the word, or every word of the sample) mapped at each depth in ``depths``.

    Per point i: ``words[i]`` as written, ``left[i]`` / ``right[i]`` its context (the hover snippet),
    ``next_words[i]`` (lower-case; "" at a sentence's end), ``sentence_ids[i]``. Per depth d (index into
    ``depths``): ``coords[d]`` (N, dims), ``clusters[d]`` (N,), ``silhouette[d]``, ``agreement[d]``.
    ``joint``: (len(depths) * N, dims), depth-major (rows d*N .. d*N+N-1 are depth ``depths[d]``), or None."""

    checkpoint: str
    family: str
    what: str
    word: str
    corpus: str
    method: str
    dims: int
    depths: tuple[int, ...]
    num_depths: int  # depths the model has (L + 1)
    coords: np.ndarray  # (D, N, dims) float32
    joint: np.ndarray | None  # (D * N, dims) float32
    words: tuple[str, ...]
    left: tuple[str, ...]
    right: tuple[str, ...]
    next_words: tuple[str, ...]
    sentence_ids: np.ndarray  # (N,) int32, into the sentences used
    clusters: np.ndarray  # (D, N) int16
    k: int
    silhouette: tuple[float, ...]  # per depth
    agreement: tuple[float, ...]  # per depth: nearest neighbour has the same next word
    agreement_chance: float
    explained: tuple[float, ...] | None  # PCA: variance share of the shown components per depth
    sentences_read: int
    occurrences: int  # points found before the max-points cap
    truncated: int  # sentences cut at max_length
    seconds: float
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return int(self.coords.shape[1])

    @property
    def joint_depths(self) -> np.ndarray:
        """(D * N,) the depth of each row of ``joint``."""
        return np.repeat(np.asarray(self.depths, dtype=np.int32), len(self))

    def at(self, depth: int) -> np.ndarray:
        """(N, dims) coordinates at ``depth``."""
        if depth not in self.depths:
            raise ValueError(msg("projector.depth_was_not_projected", depth=depth, depths=list(self.depths)))
        return self.coords[self.depths.index(depth)]


# ---------------------------------------------------------------------------------------------- colour groups
@dataclass(frozen=True)
class ColorGroup:
    """One legend entry: ``kind`` "word" (value: the next word), "end" (sentence end), "other" (the rarer next
    words), "cluster" (value: its id) or "layer" (value: the depth); ``index``: its points (into the joint rows
    for "layer", else into the points)."""

    kind: str
    value: str | int | None
    index: np.ndarray


def color_groups(p: Projection, color: str, depth: int, top: int = NEXT_WORD_COLORS) -> list[ColorGroup]:
    """The points of ``depth`` split into legend groups for ``color`` (every point in exactly one group)."""
    if color == "next_word":
        counts = Counter(p.next_words)
        keep = [w for w, _ in counts.most_common(top)]
        groups = []
        arr = np.asarray(p.next_words, dtype=object)
        for w in keep:
            groups.append(ColorGroup("end" if w == "" else "word", w or None, np.flatnonzero(arr == w)))
        rest = np.flatnonzero(~np.isin(arr, np.asarray(keep, dtype=object)))
        if len(rest):
            groups.append(ColorGroup("other", len(counts) - len(keep), rest))
        return groups
    if color == "cluster":
        c = p.clusters[p.depths.index(depth)]
        return [ColorGroup("cluster", int(k), np.flatnonzero(c == k)) for k in range(p.k) if (c == k).any()]
    if color == "layer":
        if p.joint is None:
            raise ValueError(msg("projector.map_was_made_without"))
        n = len(p)
        return [ColorGroup("layer", int(d), np.arange(i * n, (i + 1) * n)) for i, d in enumerate(p.depths)]
    raise ValueError(msg("projector.colour_use_one", color=color, choices=", ".join(COLORS)))


# ---------------------------------------------------------------------------------------------- text
def _bundled(lang: str = "en") -> tuple[str, ...]:
    # Chinese: the zh corpus's held-out split (never trained on by the bundled XLM-R), as corpus search reads it
    return page_corpus(lang)


def bundled_count(lang: str = "en") -> int:
    """Sentences of the bundled corpus the projector reads in ``lang``: corpus search's number too
    (core.represent.bundled_corpus.page_corpus_size)."""
    return page_corpus_size(lang)


def split_text(text: str) -> list[str]:
    """Pasted or uploaded text as sentences: each non-empty line, cut after . ! ? (and 。！？；)."""
    out = []
    for line in text.splitlines():
        out += [s.strip() for s in _SENTENCE_END.split(line) if s.strip()]
    return out


def corpus_of(cfg: ProjectorConfig) -> list[str]:
    """The sentences the config reads. Raises ValueError for no text or too many sentences."""
    if cfg.corpus == "bundled":
        return list(_bundled(cfg.lang))
    sents = split_text(cfg.text)
    if not sents:
        raise ValueError(msg("projector.text_empty_paste_upload"))
    if len(sents) > MAX_SENTENCES:
        raise ValueError(msg("projector.too_many_sentences", n_sents=len(sents), max_sentences=MAX_SENTENCES))
    return sents


def _count(sentence: str, w: str) -> int:
    low = sentence.lower()
    if w not in low:
        return 0
    return sum(1 for a, b in sentence_words(low) if low[a:b] == w)


def absent_message(word: str, sentences: Sequence[str], corpus: str) -> str:
    """What to say when ``word`` is not in the sentences: near spellings that are (difflib), and how to add text."""
    vocab = {s[a:b].lower() for s in sentences for a, b in sentence_words(s)}
    near = difflib.get_close_matches(word.lower(), sorted(vocab), n=5, cutoff=0.75)
    where = msg("projector.where_bundled" if corpus == "bundled" else "projector.where_yours")
    if near:
        return msg("projector.absent_near", word=word, where=where, near=", ".join(near))
    return msg("projector.absent", word=word, where=where)


def pick_sentences(cfg: ProjectorConfig, sentences: Sequence[str]) -> tuple[list[str], int]:
    """(sentences to read, points they hold): for a word, the sentences holding it (a seeded sample of them when
    its occurrences exceed max_points); for a sample, a seeded sample of sentences with about max_points words.
    Raises ValueError when the word is absent or too rare."""
    rng = random.Random(cfg.seed)
    if cfg.what == "word":
        w = cfg.word.lower()
        found = [(s, c) for s in sentences if (c := _count(s, w))]
        total = sum(c for _, c in found)
        if not found:
            raise ValueError(absent_message(cfg.word, sentences, cfg.corpus))
        if total < MIN_POINTS:
            raise ValueError(msg("projector.word_too_rare", word=cfg.word, total=total, min_points=MIN_POINTS))
        if total > cfg.max_points or len(found) > MAX_SENTENCES:
            rng.shuffle(found)
        keep: list[str] = []
        n = 0
        for s, c in found:
            if n >= cfg.max_points or len(keep) >= MAX_SENTENCES:
                break
            keep.append(s)
            n += c
        return keep, total
    order = list(range(len(sentences)))
    rng.shuffle(order)
    keep, n = [], 0
    for i in order:
        if n >= cfg.max_points or len(keep) >= MAX_SENTENCES:
            break
        c = len(sentence_words(sentences[i]))
        if c:
            keep.append(sentences[i])
            n += c
    if n < MIN_POINTS:
        raise ValueError(msg("projector.too_few_words", n=n, min_points=MIN_POINTS))
    return keep, n


def _context(sentence: str, wi: int, spans: list[tuple[int, int]], width: int) -> tuple[str, str, str]:
    """(left context, right context, next word) of word ``wi``."""
    a, b = spans[wi]
    lo = max(0, wi - width)
    hi = min(len(spans) - 1, wi + width)
    left = ("..." if lo > 0 else "") + sentence[spans[lo][0] : a]  # not "…": plotly's JSON writes it as 6 bytes
    right = sentence[b : spans[hi][1]] + ("..." if hi < len(spans) - 1 else "")
    nxt = sentence[spans[wi + 1][0] : spans[wi + 1][1]].lower() if wi + 1 < len(spans) else ""
    return left, right, nxt


# ---------------------------------------------------------------------------------------------- project
def project(
    lm: LoadedModel, cfg: ProjectorConfig, on_progress: Callable[[float, str], None] | None = None
) -> Projection:
    """Map ``cfg``'s points at every asked depth. ``on_progress(fraction, message)`` between steps (a job's
    ctx.progress raises JobCancelled there). Raises ValueError: absent or rare word, empty text, bad depths."""
    t0 = time.perf_counter()
    report = on_progress or (lambda f, m: None)
    depths_all = num_depths(lm)
    depths = cfg.depths if cfg.depths is not None else tuple(range(depths_all))
    if max(depths) >= depths_all:
        raise ValueError(msg("projector.depths_go_from_embeddings", last_depth=depths_all - 1, depths=list(depths)))
    sentences = corpus_of(cfg)
    report(0.0, msg("progress.projector.finding", n=len(sentences)))
    chosen, found = pick_sentences(cfg, sentences)

    def forward_progress(f: float, message: str) -> None:
        report(0.05 + 0.45 * f, msg("progress.projector.reading", inner=message))

    tv = token_vectors(lm, chosen, depths, unit="word", max_length=cfg.max_length, on_progress=forward_progress)
    if cfg.what == "word":
        rows = tv.rows_of(cfg.word)
    else:
        rows = np.arange(len(tv))
    if len(rows) > cfg.max_points:
        rows = np.sort(np.random.default_rng(cfg.seed).choice(rows, cfg.max_points, replace=False))
    if len(rows) < MIN_POINTS:
        raise ValueError(
            msg("projector.too_few_points", n_rows=len(rows), max_length=cfg.max_length, min_points=MIN_POINTS)
        )
    n = len(rows)
    width = SNIPPET_WORDS if n <= MANY_POINTS else SNIPPET_WORDS_MANY
    spans_of: dict[int, list[tuple[int, int]]] = {}
    left, right, nexts, words = [], [], [], []
    for r in rows:
        s = int(tv.sentence_ids[r])
        if s not in spans_of:
            spans_of[s] = sentence_words(tv.sentences[s])
        lft, rgt, nxt = _context(tv.sentences[s], int(tv.word_index[r]), spans_of[s], width)
        left.append(lft)
        right.append(rgt)
        nexts.append(nxt)
        words.append(tv.sentences[s][tv.starts[r] : tv.ends[r]])

    x = normalise(tv.vectors[:, rows].astype(np.float32, copy=False))  # (D, N, H), a copy (fancy index)
    truncated, sentence_ids = int(tv.truncated), tv.sentence_ids[rows].astype(np.int32)
    del tv  # the whole sample's vectors: no longer needed
    with threadpool_limits(limits=map_threads()):
        m = depth_maps(x, depths, nexts, report, method=cfg.method, dims=cfg.dims, seed=cfg.seed, joint=cfg.needs_joint)
    notes = []
    if truncated:
        notes.append(msg("projector.sentences_cut", truncated=truncated, max_length=cfg.max_length))
    if cfg.what == "word" and found > n:
        notes.append(msg("projector.occurrences_were_found_random", found=found, n=n))
    report(1.0, msg("progress.done"))
    return Projection(
        checkpoint=lm.spec.checkpoint,
        family=lm.spec.family,
        what=cfg.what,
        word=cfg.word if cfg.what == "word" else "",
        corpus=cfg.corpus,
        method=cfg.method,
        dims=cfg.dims,
        depths=tuple(depths),
        num_depths=depths_all,
        words=tuple(words),
        left=tuple(left),
        right=tuple(right),
        next_words=tuple(nexts),
        sentence_ids=sentence_ids,
        sentences_read=len(chosen),
        occurrences=int(found),
        truncated=truncated,
        seconds=time.perf_counter() - t0,
        notes=tuple(notes),
        **m,
    )


def project_job(spec: ModelSpec, cfg: ProjectorConfig):
    """A core.runtime.jobs function projecting ``cfg`` with a fresh copy of the model loaded in the job (a partial of a
    module-level function over plain data, so it runs in a worker process)."""
    return functools.partial(_run_project_job, spec, cfg)


def _run_project_job(spec: ModelSpec, cfg: ProjectorConfig, ctx) -> Projection:
    ctx.progress(0.0, msg("progress.loading_fresh_copy"))
    return project(load(spec, task="base"), cfg, on_progress=ctx.progress)

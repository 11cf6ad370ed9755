"""Corpus search: index a corpus's contextual token vectors at one depth, then find a token's nearest contexts.

exBERT's idea (Hoover et al. 2020: search a corpus by contextual embedding) without its preprocessing step: the
current model reads the corpus (the bundled one, or text the user pastes or uploads, up to 20k sentences) through
core.represent.token_vectors, every non-special piece's hidden state at the chosen depth is L2-normalised (so the inner
product is the cosine) and goes into a faiss index, beside where it came from (sentence, character span of its
word, the piece). ``search`` reads a query sentence the same way, takes the clicked word's first piece and asks
faiss for the k most similar pieces of the corpus. Every nearest-neighbour search is faiss's; none is written here.

Which faiss index (``build_index``):

- up to ``FLAT_MAX`` rows (100k pieces, ~4.4k sentences of the bundled corpus): ``IndexFlatIP``, exact. One query
  against 100k x 384 float32 is ~40M multiply-adds, a few ms on one core, and the answer is exact.
- above it: ``IndexIVFFlat`` (inner product). ``nlist`` = sqrt(rows) lists, so a list holds ~sqrt(rows) vectors
  (~630 at 400k rows), and ``nprobe`` = NPROBE lists are scanned per query (~2.5% of 400k rows at nlist 632).
  faiss's guideline is 4-16 x sqrt(N) lists for large N at high nprobe; here queries come one at a time from a
  page and k-means training runs in the index job on a shared CPU, and sqrt(N) keeps training to a few seconds
  (k-means on 64 x nlist sampled rows, above faiss's 39 x nlist minimum) while recall@10 against exact stays high
  (bench/representations.py measures it; 0.9+ at nprobe 16 on the bundled corpus's real vectors).

Saved indexes live under ``index_root()`` (ENCODERLAB_CORPUS_INDEX_DIR, default <runs>/corpus-index: a "session"
folder of core.runtime.run_folders.evict_run_folders, so it is bounded by the runs' size and age limits; a load
touches it), one folder per (model files, corpus, depth, max length, index policy), written whole or not at all
(core.runtime.artifacts.write_folder): the key hashes ``model_key`` (core.runtime.artifacts's hash of the
checkpoint's config and weight files, tagged MODEL_KEY_TAG), the sentences and the settings, so a second visit
loads it at once. The folder is named by family and key only (no server path: hosted mode). Loaded indexes stay in
a per-process LRU bounded by their size (CACHE_MB).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.base.caches import register as register_cache
from core.base.messages import Problem, msg
from core.base.paths import scrub
from core.base.settings import current
from core.base.uploads import upload_text
from core.models.loading import LoadedModel, ModelSpec, load
from core.represent.bundled_corpus import LANGS as BUNDLED_LANGS
from core.represent.bundled_corpus import page_corpus, page_corpus_size
from core.represent.token_vectors import (
    MAX_SENTENCES,
    num_depths,
    sentence_words,
    token_vectors,
    words_with_tokens,
)
from core.runtime import artifacts

SOURCES = ("bundled", "text")
INDEX_FORMAT = 2  # bump when a saved index's meaning changes: old folders are then never read (2: Chinese 词)
# The tag of model_key (core.runtime.artifacts): "lens1" since the key was the tuned lens's (LENS_FORMAT 1), kept so
# saved indexes keep their keys; change it to invalidate the corpus indexes only.
MODEL_KEY_TAG = "lens1"
FLAT_MAX = 100_000  # rows (pieces) up to which the index is exact (IndexFlatIP); IVF above (see the docstring)
NPROBE = 16  # IVF lists scanned per query
HOSTED_MAX_SENTENCES = 5_000  # the hosted demo indexes smaller corpora (one job holds a worker for minutes)
DEFAULT_SAMPLE = 2_000  # bundled sentences indexed by default (~45k pieces: about a minute on one CPU core)
MAX_K = 100  # neighbours one search returns at most
CACHE_MB = 1024  # loaded indexes kept per process (LRU), by the size of their vectors
INDEX_FILE, META_FILE, ARRAYS_FILE = "index.faiss", "meta.json", "rows.npz"


class CorpusIndexError(Problem, ValueError):
    """The corpus cannot be indexed or searched as asked; the message says why and what to do."""


def max_sentences_allowed() -> int:
    return HOSTED_MAX_SENTENCES if current().hosted else MAX_SENTENCES


def default_depth(lm: LoadedModel) -> int:
    """A middle layer: the articles' "the last layer is not necessarily the best" (middle layers often carry the
    most transferable features)."""
    return max(1, (num_depths(lm) - 1) // 2)


def _bundled(lang: str = "en") -> tuple[str, ...]:
    # file order, duplicates dropped; Chinese: the zh corpus's held-out split (never trained on by the bundled XLM-R)
    return page_corpus(lang)


def bundled_size(lang: str = "en") -> int:
    """Distinct sentences of the bundled corpus (``lang`` "zh": the Chinese corpus's held-out split): the
    projector's number too (core.represent.bundled_corpus.page_corpus_size)."""
    return page_corpus_size(lang)


def sentences_from_text(text: str) -> tuple[str, ...]:
    """One sentence per line (blank lines skipped, outer spaces stripped, repeated lines kept once)."""
    return tuple(dict.fromkeys(s.strip() for s in str(text).splitlines() if s.strip()))


def sentences_from_upload(raw: bytes, name: str = "upload.txt") -> tuple[str, ...]:
    """The sentences of an uploaded UTF-8 text file (one per line). Raises CorpusIndexError for a file over the
    upload limit, a binary or non-UTF-8 file, or one with no text."""
    text = upload_text(
        raw,
        name,
        error=CorpusIndexError,
        expect=f"a UTF-8 .txt file with one sentence per line ({MAX_SENTENCES:,} are indexed at most)",
    )
    found = sentences_from_text(text)
    if not found:
        raise CorpusIndexError(msg("corpus_index.file_has_no_text", name=name))
    return found


def corpus_hash(sentences: Sequence[str]) -> str:
    h = hashlib.sha256()
    for s in sentences:
        h.update(s.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:20]


# ---------------------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class IndexConfig:
    """What to index: the bundled corpus (an evenly spaced sample of ``max_sentences``) or the given
    ``sentences`` (source "text": pasted or uploaded, at most ``max_sentences``), at ``depth`` (0 = embeddings)."""

    source: str = "bundled"
    sentences: tuple[str, ...] = ()
    depth: int = 1
    max_sentences: int = DEFAULT_SAMPLE
    max_length: int = 128  # tokens per sentence, specials included (longer ones are cut)
    lang: str = "en"  # the bundled corpus's language: "zh" reads assets/corpus/zh (held-out split)
    # who pasted or uploaded the text (the app's session id): on the hosted demo its index is that session's alone
    owner: str | None = None

    def __post_init__(self) -> None:
        cap = max_sentences_allowed()
        if self.lang not in BUNDLED_LANGS:
            raise CorpusIndexError(msg("corpus_index.unknown_corpus_source_use", source=self.lang))
        if self.source not in SOURCES:
            raise CorpusIndexError(msg("corpus_index.unknown_corpus_source_use", source=self.source))
        if isinstance(self.depth, bool) or not isinstance(self.depth, (int, np.integer)) or self.depth < 0:
            raise CorpusIndexError(msg("corpus_index.depth_must_whole_number", depth=self.depth))
        if (
            isinstance(self.max_sentences, bool)
            or not isinstance(self.max_sentences, (int, np.integer))
            or not 1 <= self.max_sentences <= cap
        ):
            raise CorpusIndexError(
                msg("corpus_index.sentences_index_must_from", cap=cap, max_sentences=self.max_sentences)
            )
        if not isinstance(self.max_length, int) or not 8 <= self.max_length <= 512:
            raise CorpusIndexError(msg("corpus_index.sentence_length_must_from", max_length=self.max_length))
        if not isinstance(self.sentences, tuple):
            object.__setattr__(self, "sentences", tuple(self.sentences))
        if self.source == "text":
            clean = tuple(dict.fromkeys(str(s).strip() for s in self.sentences if str(s).strip()))
            if not clean:
                raise CorpusIndexError(msg("corpus_index.corpus_empty_paste_upload"))
            if len(clean) > self.max_sentences:
                raise CorpusIndexError(
                    msg("corpus_index.too_many_sentences", n_clean=len(clean), max_sentences=self.max_sentences)
                )
            object.__setattr__(self, "sentences", clean)
        elif self.sentences:
            raise CorpusIndexError(msg("corpus_index.bundled_takes_no_sentences"))

    def corpus(self) -> tuple[str, ...]:
        """The sentences that are indexed: the text's, or an evenly spaced sample of the bundled train split (it
        mixes its three sources: WordNet glosses, the Python docs, the King James Bible)."""
        if self.source == "text":
            return self.sentences
        pool = _bundled(self.lang)
        n = min(int(self.max_sentences), len(pool))
        step = len(pool) / n
        return tuple(pool[int(i * step)] for i in range(n))


# ---------------------------------------------------------------------------------------------- the index
@dataclass(frozen=True, eq=False)
class CorpusIndex:
    """A faiss index over the corpus's L2-normalised piece vectors at one depth; row i of the index is row i of
    the arrays below (the piece's sentence, its word's character span, its position in the sentence's encoding)."""

    key: str
    model_key: str
    checkpoint: str
    family: str
    depth: int
    num_depths: int
    kind: str  # "exact" (IndexFlatIP) or "ivf" (IndexIVFFlat)
    nlist: int  # IVF lists (0 for exact)
    nprobe: int  # IVF lists scanned per query (0 for exact)
    max_length: int
    sentences: tuple[str, ...]
    sentence_ids: np.ndarray  # (rows,) int32
    positions: np.ndarray  # (rows,) int32
    word_index: np.ndarray  # (rows,) int32
    starts: np.ndarray  # (rows,) int32
    ends: np.ndarray  # (rows,) int32
    pieces: tuple[str, ...]
    index: Any = field(repr=False)  # faiss.Index
    seconds: float = 0.0  # building time (vectors + index)
    truncated: int = 0  # sentences cut at max_length
    created: float = 0.0

    def __len__(self) -> int:
        return int(self.sentence_ids.shape[0])

    @property
    def dim(self) -> int:
        return int(self.index.d)

    @property
    def mb(self) -> float:
        return len(self) * self.dim * 4 / 2**20

    def word(self, row: int) -> str:
        s = self.sentences[int(self.sentence_ids[row])]
        return s[int(self.starts[row]) : int(self.ends[row])]

    @functools.cached_property
    def _word_sentences(self) -> dict[str, tuple[int, ...]]:
        """Lower-cased word -> the sentences where it has a token in the index (built once per index)."""
        out: dict[str, dict[int, None]] = {}
        for sid, a, b in zip(self.sentence_ids.tolist(), self.starts.tolist(), self.ends.tolist()):
            out.setdefault(self.sentences[sid][a:b].lower(), {})[sid] = None
        return {w: tuple(ids) for w, ids in out.items()}

    def sentences_with(self, word: str) -> tuple[int, ...]:
        """Indices of the corpus sentences holding ``word`` as a whole word (case-insensitive). Raises
        CorpusIndexError when no sentence of the index has it."""
        w = str(word).strip().lower()
        if not w:
            raise CorpusIndexError(msg("corpus_index.type_word_look_corpus"))
        found = self._word_sentences.get(w, ())
        if not found:
            raise CorpusIndexError(
                msg("corpus_index.word_not_in_corpus", word=word.strip(), n_sentences=len(self.sentences))
            )
        return found


def _faiss():
    import faiss  # lazy: faiss loads its own BLAS (~100 MB); only building, saving and searching an index need it

    return faiss


def ivf_lists(rows: int) -> int:
    """nlist for IVF over ``rows`` vectors: sqrt(rows) (see the module docstring), and at most rows / 39 so that
    k-means has the 39 rows per list faiss asks for."""
    return max(1, min(int(round(math.sqrt(rows))), rows // 39))


def make_faiss_index(x: np.ndarray, flat_max: int = FLAT_MAX, nprobe: int = NPROBE, seed: int = 0):
    """(faiss index over the rows of ``x`` (rows, H) float32, L2-normalised; kind, nlist, nprobe). Exact inner
    product up to ``flat_max`` rows, IVF above."""
    faiss = _faiss()
    n, d = x.shape
    if n <= flat_max:
        index = faiss.IndexFlatIP(d)
        index.add(x)
        return index, "exact", 0, 0
    nlist = ivf_lists(n)
    quantizer = faiss.IndexFlatIP(d)
    index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = seed  # k-means's own seed: the same corpus gives the same lists
    train = x
    if n > 64 * nlist:  # k-means on a sample: 64 rows per list is plenty (faiss warns below 39)
        pick = np.random.default_rng(seed).choice(n, 64 * nlist, replace=False)
        train = x[np.sort(pick)]
    index.train(train)
    index.add(x)
    index.nprobe = min(nprobe, nlist)
    return index, "ivf", nlist, int(index.nprobe)


def model_key(lm: LoadedModel) -> str:
    """The key of the checkpoint's weights an index is built with (core.runtime.artifacts.model_key, tagged
    MODEL_KEY_TAG); a search checks it against the index's."""
    return artifacts.model_key(lm, MODEL_KEY_TAG)


def index_key(lm: LoadedModel, cfg: IndexConfig, flat_max: int = FLAT_MAX) -> str:
    """The saved index's key: model files x corpus x depth x max length x index policy; on the hosted demo, a
    pasted or uploaded text's index is keyed by its owner too, so another session never loads it (nor learns from
    a fast load that someone indexed that text). The bundled corpus's indexes are shared by every session."""
    raw = (
        f"ci{INDEX_FORMAT}|{model_key(lm)}|{corpus_hash(cfg.corpus())}|{int(cfg.depth)}|{cfg.max_length}|"
        f"{flat_max}|{NPROBE}"
    )
    if cfg.source == "text" and cfg.owner and current().hosted:
        raw += f"|owner={cfg.owner}"
    return hashlib.sha256(raw.encode()).hexdigest()[:20]


def build_index(
    lm: LoadedModel,
    cfg: IndexConfig,
    on_progress: Callable[..., None] | None = None,
    *,
    flat_max: int = FLAT_MAX,
    batch_tokens: int = 8192,
) -> CorpusIndex:
    """Read the corpus with ``lm`` and index its piece vectors at ``cfg.depth`` (not saved: see ``save_index``).

    ``on_progress(fraction, message)`` after each batch (a job's ctx.progress, which raises JobCancelled on Cancel).
    Raises CorpusIndexError for a depth the model does not have or a corpus with no tokens.
    """
    depths = num_depths(lm)
    if cfg.depth >= depths:
        raise CorpusIndexError(msg("corpus_index.depth_beyond_model_has", depth=cfg.depth, last_depth=depths - 1))
    t0 = time.perf_counter()
    sentences = cfg.corpus()

    def vec_progress(frac: float, message: str) -> None:
        if on_progress is not None:
            on_progress(0.9 * frac, msg("progress.index.reading", inner=message))

    tv = token_vectors(
        lm, sentences, [int(cfg.depth)], max_length=cfg.max_length, batch_tokens=batch_tokens, on_progress=vec_progress
    )
    if len(tv) == 0:
        raise CorpusIndexError(msg("corpus_index.no_tokens_to_index"))
    x = np.ascontiguousarray(tv.at(int(cfg.depth)), dtype=np.float32)  # (rows, H)
    _faiss().normalize_L2(x)  # in place: inner product = cosine
    if on_progress is not None:
        on_progress(0.92, msg("progress.index.building", n=len(x)))
    index, kind, nlist, nprobe = make_faiss_index(x, flat_max=flat_max)
    return CorpusIndex(
        key=index_key(lm, cfg, flat_max),
        model_key=model_key(lm),
        checkpoint=lm.spec.checkpoint,
        family=lm.spec.family,
        depth=int(cfg.depth),
        num_depths=depths,
        kind=kind,
        nlist=nlist,
        nprobe=nprobe,
        max_length=cfg.max_length,
        sentences=sentences,
        sentence_ids=tv.sentence_ids,
        positions=tv.positions,
        word_index=tv.word_index,
        starts=tv.starts,
        ends=tv.ends,
        pieces=tv.pieces,
        index=index,
        seconds=round(time.perf_counter() - t0, 3),
        truncated=tv.truncated,
        created=time.time(),
    )


# ---------------------------------------------------------------------------------------------- storage
def index_root() -> Path:
    """Where indexes are saved: $ENCODERLAB_CORPUS_INDEX_DIR, default <runs>/corpus-index (bounded with the runs)."""
    return artifacts.cache_root("ENCODERLAB_CORPUS_INDEX_DIR", "corpus-index")


def _folder(family: str, key: str) -> Path:
    return index_root() / f"{family}-{key}"


_CACHE: OrderedDict[str, CorpusIndex] = OrderedDict()
_CACHE_LOCK = threading.Lock()


def _remember(ci: CorpusIndex) -> None:
    with _CACHE_LOCK:
        _CACHE[ci.key] = ci
        _CACHE.move_to_end(ci.key)
        while len(_CACHE) > 1 and sum(c.mb for c in _CACHE.values()) > CACHE_MB:
            _CACHE.popitem(last=False)


def _forget_all() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


register_cache(__name__, _forget_all)


def save_index(ci: CorpusIndex) -> Path:
    """Write the index and its rows to its folder under index_root(), whole or not at all. Returns the folder."""
    faiss = _faiss()

    def fill(tmp: Path) -> None:
        faiss.write_index(ci.index, str(tmp / INDEX_FILE))
        np.savez(
            tmp / ARRAYS_FILE,
            sentence_ids=ci.sentence_ids,
            positions=ci.positions,
            word_index=ci.word_index,
            starts=ci.starts,
            ends=ci.ends,
        )
        meta = dict(
            format=INDEX_FORMAT,
            key=ci.key,
            model_key=ci.model_key,
            checkpoint=scrub(ci.checkpoint),
            family=ci.family,
            depth=ci.depth,
            num_depths=ci.num_depths,
            kind=ci.kind,
            nlist=ci.nlist,
            nprobe=ci.nprobe,
            max_length=ci.max_length,
            seconds=ci.seconds,
            truncated=ci.truncated,
            created=ci.created,
            sentences=list(ci.sentences),
            pieces=list(ci.pieces),
        )
        (tmp / META_FILE).write_text(json.dumps(meta, ensure_ascii=False))

    final = artifacts.write_folder(_folder(ci.family, ci.key), fill)
    _remember(ci)
    return final


def load_index(lm: LoadedModel, cfg: IndexConfig, flat_max: int = FLAT_MAX) -> CorpusIndex | None:
    """The saved index of ``cfg`` for this model, or None when there is none (or it is unreadable)."""
    return load_key(lm.spec.family, index_key(lm, cfg, flat_max), lm.spec.checkpoint)


def load_key(family: str, key: str, checkpoint: str | None = None) -> CorpusIndex | None:
    """The index saved under ``key`` (from the per-process LRU, else from disk), or None when there is none (or it
    is of another format). Raises CorpusIndexError when the saved one is damaged (a file cut short or overwritten:
    core.runtime.artifacts.damaged_files, or one that does not parse); it is set aside first, so the next call finds
    none and the index can be built again."""
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    folder = _folder(family, key)
    files = [folder / f for f in (INDEX_FILE, META_FILE, ARRAYS_FILE)]
    if not folder.is_dir():
        return None
    faiss = _faiss()
    try:
        bad = artifacts.damaged_files(folder)
        if bad:
            raise ValueError(", ".join(bad))
        meta = json.loads(files[1].read_text())
        if meta.get("format") != INDEX_FORMAT or meta.get("key") != key:
            return None
        index = faiss.read_index(str(files[0]))
        if meta["kind"] == "ivf":
            index.nprobe = int(meta["nprobe"])
        with np.load(files[2]) as z:
            arrays = {k: z[k] for k in ("sentence_ids", "positions", "word_index", "starts", "ends")}
        ci = CorpusIndex(
            key=key,
            model_key=meta["model_key"],
            checkpoint=checkpoint or meta["checkpoint"],
            family=meta["family"],
            depth=int(meta["depth"]),
            num_depths=int(meta["num_depths"]),
            kind=meta["kind"],
            nlist=int(meta["nlist"]),
            nprobe=int(meta["nprobe"]),
            max_length=int(meta["max_length"]),
            sentences=tuple(meta["sentences"]),
            pieces=tuple(meta["pieces"]),
            index=index,
            seconds=float(meta["seconds"]),
            truncated=int(meta["truncated"]),
            created=float(meta["created"]),
            **arrays,
        )
        if index.ntotal != len(ci) or len(ci.pieces) != len(ci):
            raise ValueError(f"{index.ntotal} vectors, {len(ci)} rows, {len(ci.pieces)} pieces")
    except artifacts.read_errors() as e:
        artifacts.set_aside(folder)
        raise CorpusIndexError(msg("corpus_index.saved_index_unreadable", problem=str(e))) from None
    artifacts.touch(folder)  # in use: the runs' age bound counts from here
    _remember(ci)
    return ci


# ---------------------------------------------------------------------------------------------- the job
@dataclass(frozen=True)
class IndexReport:
    """What an index job built (the index itself stays on disk: the page loads it by key)."""

    key: str
    family: str
    depth: int
    kind: str
    rows: int
    sentences: int
    seconds: float
    truncated: int
    loaded: bool  # True when it was already saved and nothing was built


def index_job(spec: ModelSpec, cfg: IndexConfig, flat_max: int = FLAT_MAX):
    """A core.runtime.jobs function that builds and saves the index of ``cfg`` for ``spec`` (a fresh copy of the model,
    loaded in the job): a partial of a module-level function over plain data, so it runs in a worker process."""
    return functools.partial(_run_index_job, spec, cfg, flat_max)


def _run_index_job(spec: ModelSpec, cfg: IndexConfig, flat_max: int, ctx) -> IndexReport:
    ctx.progress(0.0, msg("progress.loading_fresh_copy"))
    lm = load(spec, task="base")
    try:
        found = load_index(lm, cfg, flat_max)
    except CorpusIndexError:  # damaged: set aside by load_key, built again below
        found = None
    loaded = found is not None
    if found is None:
        found = build_index(lm, cfg, on_progress=ctx.progress, flat_max=flat_max)
        ctx.progress(0.97, msg("progress.index.saving"))
        save_index(found)
    ctx.progress(1.0, msg("progress.index.saved"))
    return IndexReport(
        key=found.key,
        family=found.family,
        depth=found.depth,
        kind=found.kind,
        rows=len(found),
        sentences=len(found.sentences),
        seconds=found.seconds,
        truncated=found.truncated,
        loaded=loaded,
    )


# ---------------------------------------------------------------------------------------------- search
@dataclass(frozen=True)
class Neighbour:
    rank: int  # 1 = nearest
    row: int  # the index row
    sentence_id: int
    sentence: str
    start: int  # character span of the matched word in its sentence
    end: int
    word: str
    piece: str
    similarity: float  # cosine
    is_query: bool  # the query's own token (the query sentence is in the corpus)


@dataclass(frozen=True)
class SearchResult:
    checkpoint: str
    family: str
    index_key: str
    depth: int
    kind: str  # "exact" or "ivf"
    query: str
    word_number: int  # the query word's index among the sentence's words (token_vectors.sentence_words)
    word: str
    piece: str  # the query piece (the word's first)
    start: int
    end: int
    k: int
    neighbours: tuple[Neighbour, ...]
    histogram: tuple[tuple[str, int], ...]  # the neighbours' words (lower-cased), most frequent first
    corpus_rows: int
    corpus_sentences: int
    latency_ms: float


def query_words(text: str) -> tuple[tuple[int, int, str], ...]:
    """(start, end, word) of each word of a query sentence, as the index splits words
    (core.represent.token_vectors.sentence_words: a Chinese 词 is one word)."""
    text = str(text)
    return tuple((a, b, text[a:b]) for a, b in sentence_words(text))


def searchable_words(lm: LoadedModel, ci: CorpusIndex, query: str) -> tuple[int, ...]:
    """The numbers of the query's words (query_words order) that ``search`` accepts: those with a token of their
    own at the index's max_length (core.represent.token_vectors.words_with_tokens). A word the tokenizer put inside
    a piece that starts in the word before (XLM-R reads 的人 as one piece: 人 has none); nor has a word past the cut."""
    own = words_with_tokens(lm, str(query), ci.max_length)
    return tuple(i for i in range(len(query_words(query))) if i in own)


def search(
    lm: LoadedModel,
    ci: CorpusIndex,
    query: str,
    word: int | str | None = None,
    *,
    position: int | None = None,
    k: int = 10,
) -> SearchResult:
    """The ``k`` corpus tokens nearest (cosine, at the index's depth) to one token of ``query``: the word
    ``word`` (its number among the query's words, or the word itself: its first occurrence; its first piece is the
    query), or the piece at encoding position ``position``. Raises CorpusIndexError for another model's index, an
    empty query, a word the query does not have, or k out of range."""
    t0 = time.perf_counter()
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_K:
        raise CorpusIndexError(msg("corpus_index.neighbours_must_from_got", max_neighbours=MAX_K, neighbours=k))
    if model_key(lm) != ci.model_key:
        raise CorpusIndexError(
            msg("corpus_index.other_model", built=scrub(ci.checkpoint), checkpoint=scrub(lm.spec.checkpoint))
        )
    query = str(query)
    if not query.strip():
        raise CorpusIndexError(msg("corpus_index.query_sentence_empty_type"))
    words = query_words(query)
    tv = token_vectors(lm, [query], [ci.depth], max_length=ci.max_length)
    if position is not None:
        rows = np.where(tv.positions == int(position))[0]
        if not len(rows):
            raise CorpusIndexError(
                msg(
                    "corpus_index.position_not_token_query",
                    position=position,
                    positions=", ".join(map(str, tv.positions.tolist())),
                )
            )
    else:
        if word is None:
            raise CorpusIndexError(msg("corpus_index.say_which_word_query"))
        if isinstance(word, (int, np.integer)) and not isinstance(word, bool):
            w = int(word)
            if not 0 <= w < len(words):
                raise CorpusIndexError(msg("corpus_index.no_such_word", n_words=len(words), word_number=w))
        else:
            wanted = str(word).strip().lower()
            w = next((i for i, (_, _, x) in enumerate(words) if x.lower() == wanted), -1)
            if w < 0:
                raise CorpusIndexError(
                    msg(
                        "corpus_index.not_word_query_sentence",
                        word=str(word).strip(),
                        words=", ".join(x for _, _, x in words[:20]),
                    )
                )
        rows = np.where(tv.word_index == w)[0]
        if not len(rows) or w not in searchable_words(lm, ci, query):  # the words the page offers (one check)
            raise CorpusIndexError(msg("corpus_index.no_token_of_its_own", word=words[w][2], max_length=ci.max_length))
    r = int(rows[0])  # the word's first piece
    q = np.ascontiguousarray(tv.at(ci.depth)[r : r + 1], dtype=np.float32)  # (1, H)
    _faiss().normalize_L2(q)
    sims, ids = ci.index.search(q, int(min(k, len(ci))))  # (1, k) each; -1 where IVF found fewer
    w = int(tv.word_index[r])
    start, end = int(tv.starts[r]), int(tv.ends[r])
    neighbours: list[Neighbour] = []
    for sim, row in zip(sims[0].tolist(), ids[0].tolist()):
        if row < 0:
            continue
        sid = int(ci.sentence_ids[row])
        a, b = int(ci.starts[row]), int(ci.ends[row])
        sent = ci.sentences[sid]
        neighbours.append(
            Neighbour(
                rank=len(neighbours) + 1,
                row=int(row),
                sentence_id=sid,
                sentence=sent,
                start=a,
                end=b,
                word=sent[a:b],
                piece=ci.pieces[row],
                similarity=float(sim),
                is_query=sent == query and int(ci.positions[row]) == int(tv.positions[r]),
            )
        )
    counts = Counter(n.word.lower() for n in neighbours)
    hist = tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return SearchResult(
        checkpoint=lm.spec.checkpoint,
        family=lm.spec.family,
        index_key=ci.key,
        depth=ci.depth,
        kind=ci.kind,
        query=query,
        word_number=w,
        word=query[start:end],
        piece=tv.pieces[r],
        start=start,
        end=end,
        k=int(k),
        neighbours=tuple(neighbours),
        histogram=hist,
        corpus_rows=len(ci),
        corpus_sentences=len(ci.sentences),
        latency_ms=(time.perf_counter() - t0) * 1000,
    )

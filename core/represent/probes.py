"""Layer probes: what a linear classifier can read off each depth's representations (embeddings included).

The tasks (core.represent.probe_tasks) are frozen labelled sets built from any corpus: sentence length, bigram
shift, coordination inversion, odd word out (sentence tasks), and the suffix class of a word (a word task, on the
word's vector: the mean of its pieces) with the Hewitt & Liang (2019) control task, where every word type gets a
random label and the same probe is trained on those. The control labels can only be learned by memorising word
identities, so selectivity = real accuracy - control accuracy shows how much of the real accuracy is more than
memorising. WordNet's word classes would be a more linguistic word task, but /usr/share/wordnet is not installed
here and the bundled WordNet data (assets/data/wordnet) keeps glosses, not lemmas; suffix classes need nothing but
the corpus.

Sentence tasks read the mean over the sentence's tokens (``TokenVectors.sentence_means``), word tasks the word rows
(``unit="word"``); every depth comes from one forward per batch (core.represent.token_vectors).

The probe is scikit-learn's LogisticRegression (L2, lbfgs) on standardised features, one per depth and task. At
these sizes (a few thousand rows, H <= 1024) it fits in well under a second, needs no learning-rate or epoch tuning,
and is deterministic; a torch linear layer would need all three and would not be faster on CPU.

Results are saved under ``probes_root()`` (ENCODERLAB_PROBES_DIR, default <runs>/probes-cache, a "session" folder of
core.runtime.run_folders.evict_run_folders, so its size and age are bounded with the runs), one JSON per model key and
inputs; the model key is core.runtime.artifacts.model_key tagged MODEL_KEY_TAG.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from core.base.messages import msg
from core.base.paths import scrub
from core.base.settings import current
from core.models.cost import Cost, ForwardTiming
from core.models.loading import LoadedModel, ModelSpec, load
from core.represent.bundled_corpus import corpus_sentences
from core.represent.probe_tasks import (
    BUILDERS,
    ENGLISH_ONLY,
    TASKS,
    WORD_TASKS,
    ProbeError,
    ProbeTask,
    mostly_chinese,
    prepare_corpus,
)
from core.represent.token_vectors import MAX_SENTENCES, num_depths, token_vectors
from core.runtime import artifacts

MIN_PER_TASK, MAX_PER_TASK, DEFAULT_PER_TASK = 40, 5000, 300
HOSTED_MAX_PER_TASK = 1000
CHUNK = 128  # sentences per token_vectors call (bounds memory: chunk x tokens x depths x H floats)
PROBES_FORMAT = 1  # bump when a saved result's meaning changes
# The tag of model_key (core.runtime.artifacts): "lens1" since the key was the tuned lens's (LENS_FORMAT 1), kept so
# saved results keep their folders; change it to invalidate the probe results only.
MODEL_KEY_TAG = "lens1"


def max_per_task() -> int:
    """The most sentences per task this server allows (fewer on the hosted demo: every one is a forward)."""
    return HOSTED_MAX_PER_TASK if current().hosted else MAX_PER_TASK


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
    owner: str | None = None  # the session that asks (the page's id): keys a custom corpus's result on the hosted demo

    def __post_init__(self) -> None:
        tasks = tuple(dict.fromkeys(str(x) for x in (self.tasks or ())))
        object.__setattr__(self, "tasks", tasks)
        if not tasks:
            raise ProbeError(msg("probes.pick_least_one_task"))
        bad = [x for x in tasks if x not in TASKS]
        if bad:
            raise ProbeError(msg("probes.unknown_task_s_use", unknown=", ".join(bad), choices=", ".join(TASKS)))
        top = max_per_task()
        if not MIN_PER_TASK <= int(self.per_task) <= top:
            raise ProbeError(
                msg("probes.sentences_per_task_must", min_per_task=MIN_PER_TASK, top=top, per_task=self.per_task)
            )
        object.__setattr__(self, "per_task", int(self.per_task))
        if not 0.1 <= float(self.heldout) <= 0.5:
            raise ProbeError(msg("probes.held_out_share_must", heldout=self.heldout))
        if not 16 <= int(self.max_length) <= 512:
            raise ProbeError(msg("probes.max_length_must_tokens", max_length=self.max_length))
        if not float(self.reg) > 0:
            raise ProbeError(msg("probes.probe_s_c_inverse", reg=self.reg))
        if self.corpus is not None:
            object.__setattr__(self, "corpus", tuple(str(s) for s in self.corpus))
            if len(self.corpus) > MAX_SENTENCES:
                raise ProbeError(
                    msg("probes.corpus_too_many_sentences", n_corpus=len(self.corpus), max_sentences=MAX_SENTENCES)
                )

    def sentences(self) -> tuple[str, ...]:
        """The corpus's probe-able sentences (normalised whitespace, 4-60 words, no repeats)."""
        if self.corpus is None:
            return prepare_corpus(corpus_sentences("train"))
        return prepare_corpus(self.corpus)

    def key(self) -> str:
        """A hash of everything the result depends on but the model. On the hosted demo a pasted or uploaded
        corpus's result is keyed by its owner too, so another session never loads it (nor learns from a fast load
        that someone probed that text), as core.represent.corpus_index.index_key; the bundled corpus's results, and
        every result off the hosted demo, are shared (their keys as before the owner existed)."""
        h = hashlib.sha256(f"probes{PROBES_FORMAT}".encode())
        d = asdict(self)
        corpus, owner = d.pop("corpus"), d.pop("owner")
        h.update(json.dumps(d, sort_keys=True).encode())
        h.update(b"bundled" if corpus is None else "\n".join(corpus).encode("utf-8", "replace"))
        if corpus is not None and owner and current().hosted:
            h.update(f"|owner={owner}".encode())
        return h.hexdigest()[:20]


# ---------------------------------------------------------------------------------------------- corpus


# ---------------------------------------------------------------------------------------------- tasks


def build_tasks(cfg: ProbeConfig, pool: Sequence[str] | None = None) -> tuple[ProbeTask, ...]:
    """The labelled sets of ``cfg.tasks`` drawn from ``pool`` (default: ``cfg.sentences()``). Raises ProbeError."""
    pool = cfg.sentences() if pool is None else tuple(pool)
    if set(cfg.tasks) & set(ENGLISH_ONLY) and mostly_chinese(pool):  # say it before any task is built
        raise ProbeError(msg("probes.english_only"))
    return tuple(BUILDERS[name](pool, cfg.per_task, cfg.heldout, cfg.seed) for name in cfg.tasks)


# ---------------------------------------------------------------------------------------------- probing
def fit_probes(
    features: np.ndarray,
    labels: np.ndarray,
    heldout: np.ndarray,
    reg: float = 1.0,
    on_depth: Callable[[int], None] | None = None,
) -> tuple[float, ...]:
    """Held-out accuracy of a linear probe (standardised features, L2 logistic regression) at each depth.

    ``features``: (depths, items, H); ``labels``: (items,); ``heldout``: (items,) bool. Raises ProbeError when the
    training part has a single label or either part is empty."""
    from sklearn.exceptions import ConvergenceWarning  # lazy: scikit-learn loads scipy; only fitting needs it
    from sklearn.linear_model import LogisticRegression  # lazy: as above
    from sklearn.preprocessing import StandardScaler  # lazy: as above

    labels = np.asarray(labels)
    train = ~np.asarray(heldout, dtype=bool)
    if not train.any() or train.all():
        raise ProbeError(msg("probes.split_left_no_items"))
    if len(np.unique(labels[train])) < 2:
        raise ProbeError(msg("probes.one_label_only"))
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


def task_features(
    lm: LoadedModel, task: ProbeTask, max_length: int, on_progress: Callable[[float, str], None] | None
) -> tuple[np.ndarray, np.ndarray]:
    """((depths, items, H) features, (items,) bool: the item has a vector). A word cut off by max_length has none."""
    n = len(task.sentences)
    parts, keep = [], np.ones(len(task), dtype=bool)
    for a in range(0, n, CHUNK):
        chunk = task.sentences[a : a + CHUNK]
        size = len(chunk)

        def prog(f: float, _msg: str, a=a, c=size) -> None:
            if on_progress is not None:
                on_progress((a + f * c) / n, msg("progress.sentences", done=min(n, a + round(f * c)), total=n))

        tv = token_vectors(
            lm, chunk, None, unit=task.unit if task.unit == "word" else "piece", max_length=max_length, on_progress=prog
        )
        if task.unit == "sentence":
            parts.append(tv.sentence_means())  # (depths, chunk, H)
            continue
        assert task.words is not None  # a word task: core.represent.probe_tasks gives it its words
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
        """One row per task and depth: what the CSV export (app.kit.exports.probes_csv) holds."""
        rows = []
        for s in self.scores:
            for d, acc in enumerate(s.accuracy):
                rows.append(
                    {
                        "task": s.task,
                        "depth": d,
                        "accuracy": round(acc, 4),
                        "majority": round(s.majority, 4),
                        "control": None if s.control is None else round(s.control[d], 4),
                        "selectivity": None if s.selectivity is None else round(s.selectivity[d], 4),
                        "best": d == s.best_depth,
                        "n_train": s.n_train,
                        "n_heldout": s.n_heldout,
                    }
                )
        return rows

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ProbeResult:
        d = json.loads(text)

        def tup(x):
            return None if x is None else tuple(x)

        scores = tuple(
            TaskScore(
                **{
                    **s,
                    "label_names": tuple(s["label_names"]),
                    "accuracy": tuple(s["accuracy"]),
                    "control": tup(s["control"]),
                    "selectivity": tup(s["selectivity"]),
                    "examples": tuple(tuple(e) for e in s["examples"]),
                }
            )
            for s in d.pop("scores")
        )
        return cls(**d, scores=scores)


def _examples(task: ProbeTask, k: int = 2) -> tuple[tuple[str, str], ...]:
    out = []
    for c in range(len(task.label_names)):
        idx = np.flatnonzero(task.labels == c)[: k if task.unit == "sentence" else 1]
        for i in idx:
            if task.unit == "word":
                assert task.types is not None  # a word task: core.represent.probe_tasks gives it its types
                out.append((task.label_names[c], task.types[i]))
            else:
                out.append((task.label_names[c], task.sentences[i]))
    return tuple(out)


def run_probes(lm: LoadedModel, cfg: ProbeConfig, on_progress: Callable[..., None] | None = None) -> ProbeResult:
    """Build ``cfg``'s tasks, read every depth's vectors for them and train a probe per task and depth.

    ``on_progress(fraction, message)`` after each batch and probe (a job's ``ctx.progress``: it raises JobCancelled
    on Cancel). Raises ProbeError (a ValueError) for a corpus that cannot make a task, or bad settings."""
    t0 = time.perf_counter()
    pool = cfg.sentences()
    if on_progress is not None:
        on_progress(0.0, msg("progress.probes.building", tasks=len(cfg.tasks), n=len(pool)))
    tasks = build_tasks(cfg, pool)
    depths = num_depths(lm)
    scores = []
    share = 1.0 / len(tasks)
    for ti, task in enumerate(tasks):
        title = msg(f"probes.task.{task.name}")  # the task's name, in the page's language

        def prog(f: float, message: str, ti=ti, title=title) -> None:
            if on_progress is not None:
                on_progress(share * (ti + 0.8 * f), msg("progress.probes.vectors", task=title, inner=message))

        feats, keep = task_features(lm, task, cfg.max_length, prog)
        labels, held = task.labels[keep], task.heldout[keep]

        def per_depth(d: int, ti=ti, title=title, n=2 if task.control is not None else 1, part=0) -> None:
            if on_progress is not None:
                on_progress(
                    share * (ti + 0.8 + 0.2 * (part * depths + d + 1) / (n * depths)),
                    msg("progress.probes.depth", task=title, depth=d),
                )

        acc = fit_probes(feats, labels, held, cfg.reg, on_depth=per_depth)
        control = selectivity = None
        if task.control is not None:
            control = fit_probes(
                feats, task.control[keep], held, cfg.reg, on_depth=functools.partial(per_depth, part=1)
            )
            selectivity = tuple(a - c for a, c in zip(acc, control))
        scores.append(
            TaskScore(
                task.name,
                task.unit,
                task.label_names,
                int((~held).sum()),
                int(held.sum()),
                task.found,
                acc,
                majority_rate(labels, held),
                control,
                selectivity,
                _examples(task),
                int((~keep).sum()),
            )
        )
    if on_progress is not None:
        on_progress(1.0, msg("progress.done"))
    conf = {k: v for k, v in asdict(cfg).items() if k != "corpus"}
    conf["tasks"] = list(cfg.tasks)
    return ProbeResult(
        scrub(lm.spec.checkpoint),
        lm.spec.family,
        depths,
        conf,
        len(pool),
        "bundled" if cfg.corpus is None else "custom",
        tuple(scores),
        round(time.perf_counter() - t0, 2),
        model_key(lm),
        time.time(),
    )


# ---------------------------------------------------------------------------------------------- storage and jobs
def probes_root() -> Path:
    """Where probe results are saved: $ENCODERLAB_PROBES_DIR, default <runs>/probes-cache."""
    return artifacts.cache_root("ENCODERLAB_PROBES_DIR", "probes-cache")


def model_key(lm: LoadedModel) -> str:
    """A key for the checkpoint's weights (core.runtime.artifacts.model_key, tagged MODEL_KEY_TAG)."""
    return artifacts.model_key(lm, MODEL_KEY_TAG)


def result_path(lm: LoadedModel, cfg: ProbeConfig) -> Path:
    """This model's and these inputs' result file (named by family and hashes: never by a server path)."""
    return probes_root() / f"{lm.spec.family}-{model_key(lm)}" / f"{cfg.key()}.json"


def save_result(lm: LoadedModel, cfg: ProbeConfig, result: ProbeResult) -> None:
    artifacts.write_file(result_path(lm, cfg), result.to_json())


def saved_result(lm: LoadedModel, cfg: ProbeConfig) -> ProbeResult | None:
    """The result saved for this model and ``cfg``, or None. Raises ProbeError when the saved file is damaged (cut
    short, overwritten, not a result); it is set aside first, so the next call finds none and the probes run again."""
    path = result_path(lm, cfg)
    if not path.is_file():
        return None
    try:
        res = ProbeResult.from_json(path.read_text())
    except artifacts.read_errors() as e:
        artifacts.set_aside(path)
        raise ProbeError(msg("probes.saved_result_unreadable", problem=str(e))) from None
    artifacts.touch(path.parent)  # in use: the runs' age bound counts from here
    return res


def probe_job(spec: ModelSpec, cfg: ProbeConfig):
    """A core.runtime.jobs function running the probes for ``spec`` (a fresh copy of the model, loaded in the job) and saving
    the result: a partial of a module-level function over plain data, so it runs in a worker process."""
    return functools.partial(_run_probe_job, spec, cfg)


def _run_probe_job(spec: ModelSpec, cfg: ProbeConfig, ctx) -> ProbeResult:
    ctx.progress(0.0, msg("progress.loading_fresh_copy"))
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
    pool = corpus_sentences("train")
    sents = prepare_corpus(pool[:: max(1, len(pool) // (rows * 4))])[:rows]  # spread over the corpus: its lengths
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
    forward_s = ForwardTiming.per_row(timing.per_sentence).seconds(Cost(sentences, 0, 0))  # core.models.cost
    seconds = forward_s + fits * timing.per_fit * rows / (timing.fit_rows * 0.8)
    return ProbeEstimate(sentences, fits, seconds)

"""What the Walkthrough's steps compute, as plain functions returning frozen results (the steps only draw them).

Which models a step uses is asked of the family registry, never written here: the pair-head families (step 3),
the family that shares one layer across depth and the family it is measured against (step 4), the distilled family
and its teacher (step 5), the bundled models a short fine-tune can start from (step 6). Step 5's held-out top-5
and timing, step 6's two runs and their verdict, and step 7's classifier detection are here too.
"""

from __future__ import annotations

import functools
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.base.messages import carry, msg
from core.base.paths import ASSETS
from core.compare import speed as bench
from core.data.datasets_local import load_bundled
from core.models.cards import bundled_card, pair_head_learned
from core.models.downloads import can_have_now
from core.models.loading import ModelSpec, Source, load, resolve
from core.predict.classify import META_FILE
from core.predict.fill_mask import FillMaskConfig, fill_mask_batch, words
from core.registry import FAMILIES, Family, bundled_families, bundled_id, family
from core.train.finetune_config import FinetuneConfig

HELDOUT = ASSETS / "corpus" / "heldout.txt"
LRS = (2e-5, 3e-5, 5e-5)  # the seeds' fine-tuning range; the other run of step 6 uses 10x
LR_FACTOR = 10
S6_DATA, S6_BATCH, S6_MAX_LEN, S6_TEST_ROWS = "wordnet", 16, 48, 120


def _bundled_available(checkpoint: str) -> bool:
    return resolve(checkpoint).source != Source.UNAVAILABLE


def _obtainable_now(checkpoint: str) -> bool:
    """Whether ``checkpoint`` can be had now (core.models.downloads.can_have_now): a download only counts when the
    Hub answered recently, as in the sidebar's list (downloads allowed but no network is not enough)."""
    return can_have_now(resolve(checkpoint).source)


# ---------------------------------------------------------------------------------------------- which models
def pair_head_families() -> list[Family]:
    """The families with a sentence-pair head (NSP or SOP), in registry order."""
    return [f for f in FAMILIES.values() if f.pair_head is not None]


def no_pair_head_families() -> list[Family]:
    return [f for f in FAMILIES.values() if f.pair_head is None]


def pick_spec(
    family_key: str,
    current,
    session_paths: Sequence[str],
    device: str,
    available: Callable[[str], bool] = _bundled_available,
):
    """The sidebar's model ``current`` when it is an official or bundled checkpoint of ``family_key``, else the
    family's bundled model: a step that explains one family's head must not silently use a fine-tune of it."""
    if (
        current is not None
        and current.family == family_key
        and current.checkpoint not in set(session_paths)
        and not Path(current.checkpoint).expanduser().is_dir()
        and available(current.checkpoint)
    ):
        return current
    return ModelSpec(family_key, bundled_id(family_key), device)  # ModelLoadError when the family ships none


@dataclass(frozen=True)
class SharingPlan:
    shared: Family  # the family whose layers are shared across depth
    reference: Family  # the family it is measured against
    checkpoints: tuple[str, ...]  # reference base, shared base, reference large, shared large


def sharing_plan() -> SharingPlan | None:
    """Step 4's comparison: the first family with shared layers against the family its speed claims are measured
    against (the registry's ``SpeedClaim.baseline``), base and large of each. None when either is missing."""
    shared = next((f for f in FAMILIES.values() if f.shared_layers), None)
    baseline = next((c.baseline for c in shared.speed_claims), None) if shared is not None else None
    if shared is None or baseline is None or baseline not in FAMILIES:
        return None
    reference = FAMILIES[baseline]
    sizes = [
        [c.id for c in f.checkpoints if c.claim_m is not None and c.language == "en"][:2] for f in (reference, shared)
    ]
    if min(len(s) for s in sizes) < 2:
        return None
    return SharingPlan(shared, reference, (sizes[0][0], sizes[1][0], sizes[0][1], sizes[1][1]))


def sop_family() -> Family | None:
    """The family with a sentence-order head (step 4's SOP check)."""
    return next((f for f in FAMILIES.values() if f.pair_head == "sop"), None)


@dataclass(frozen=True)
class UnlearnedPairHead:
    """A bundled mini whose model card says its NSP/SOP head scored no better than always guessing the majority
    on its held-out pairs: its pair scores are noise, and the walkthrough says so next to them."""

    checkpoint: str
    head: str  # "nsp" or "sop"
    acc: float  # held-out pair accuracy, from the card
    majority: float  # always guessing the majority class, from the card
    pairs: int | None  # how many held-out pairs the card measured
    full: str | None  # the family's first official checkpoint, the one to pick instead
    full_here: bool  # whether that checkpoint can be had here now (HF cache, a folder, a Hub that answers)


def unlearned_pair_head(
    checkpoint: str, head: str, available: Callable[[str], bool] = _obtainable_now
) -> UnlearnedPairHead | None:
    """The card's numbers when ``checkpoint`` is a bundled mini whose ``head`` pair head is not above its majority
    baseline (core.models.cards.pair_head_learned); None for a head that learned, or a checkpoint with no such card.
    Read from the card every time, so a retrained mini whose card shows it learned loses the note by itself."""

    card = bundled_card(checkpoint)
    held = card.get("heldout", {})
    if head not in ("nsp", "sop") or "pair_acc" not in held:
        return None
    if pair_head_learned(held):
        return None
    acc, majority = float(held["pair_acc"]), float(held.get("pair_majority", 0.5))
    fam = FAMILIES.get(card.get("family", ""))
    full = fam.checkpoints[0].id if fam is not None and fam.checkpoints else None
    return UnlearnedPairHead(
        checkpoint, head, acc, majority, held.get("pairs"), full, full is not None and available(full)
    )


@dataclass(frozen=True)
class SharingRow:
    checkpoint: str
    layers: int
    hidden: int
    embedding_size: int
    stored_m: float  # parameters stored, in millions (embeddings + encoder + pooler)
    applied_m: float  # encoder parameters applied per forward pass: a shared layer counts once per depth
    claim_m: float | None


def sharing_rows(breakdowns: Sequence[Any]) -> tuple[SharingRow, ...]:
    """Stored against applied parameters for each core.models.params.ParamBreakdown."""
    return tuple(
        SharingRow(
            b.checkpoint,
            b.layers,
            b.hidden,
            b.embedding_size,
            b.backbone / 1e6,
            b.encoder * (b.layers if b.shared_layers else 1) / 1e6,
            b.claim_m,
        )
        for b in breakdowns
    )


@dataclass(frozen=True)
class DistilPair:
    student: str | None  # the distilled family, None when none is registered or its bundled model is missing
    teacher: str | None  # its teacher, or the first other family whose bundled model is here (a stand-in)
    true_teacher: str | None  # the family the student was distilled from
    missing: tuple[str, ...]  # bundled ids the step would use but cannot load

    @property
    def stand_in(self) -> bool:
        return self.student is not None and self.teacher is not None and self.teacher != self.true_teacher


def distillation_pair(available: Callable[[str], bool] = _bundled_available) -> DistilPair:
    """Step 5's student (the family with ``distilled_from``) and teacher, given which bundled models are here.
    Without the teacher's bundled model another undistilled family stands in, in registry order."""
    student_f = next((f for f in FAMILIES.values() if f.distilled_from), None)
    if student_f is None:
        return DistilPair(None, None, None, ())
    missing: list[str] = []
    student = None
    if student_f.bundled:
        student = student_f.key if available(bundled_id(student_f.key)) else None
        if student is None:
            missing.append(bundled_id(student_f.key))
    assert student_f.distilled_from is not None  # the family was picked for it
    true_teacher = family(student_f.distilled_from).key
    candidates = [
        f.key
        for f in [family(true_teacher)] + list(FAMILIES.values())
        if f.bundled and not f.distilled_from and f.key != student_f.key
    ]
    candidates = list(dict.fromkeys(candidates))  # the teacher first, each once
    teacher = None
    for key in candidates:
        if available(bundled_id(key)):
            teacher = key
            break
        missing.append(bundled_id(key))
    return DistilPair(student, teacher, true_teacher, tuple(missing))


def finetune_choices(available: Callable[[str], bool] = _bundled_available) -> list[tuple[str, str]]:
    """(family, bundled id) of every bundled model that is here, the distilled (fastest) family first."""
    fams = sorted(bundled_families(), key=lambda f: f.distilled_from is None)
    return [(f.key, bundled_id(f.key)) for f in fams if available(bundled_id(f.key))]


# ---------------------------------------------------------------------------------------------- step 5
def heldout_sentences(n: int) -> list[str]:
    """``n`` held-out corpus lines of a readable length, spread over the file (the same ones every time)."""
    if n < 1:
        raise ValueError(msg("walkthrough.too_few_heldout", n=n))
    lines = [ln.strip() for ln in HELDOUT.read_text(encoding="utf-8").splitlines() if 60 <= len(ln.strip()) <= 200]
    step = max(1, len(lines) // n)
    return lines[::step][:n]


@dataclass(frozen=True)
class HeldoutTop5:
    top5: float  # share of masked pieces whose original is among the model's top 5
    pieces: int
    sentences: int
    ms: float  # one batched pass over every sentence, after an untimed warm-up


def heldout_top5(lm, sentences: Sequence[str], seed: int = 0) -> HeldoutTop5:
    """Mask one word per sentence (the same words for every model: a seeded choice among the words of more than
    three letters) and count the masked pieces whose original is in the model's top 5."""

    rng = random.Random(seed)
    configs = []
    for s in sentences:
        ws = [i for i, w in enumerate(words(s)) if w.text.isalpha() and len(w.text) > 3]
        if ws:
            configs.append(FillMaskConfig(s, top_k=5, word=rng.choice(ws)))
    if not configs:
        raise ValueError(msg("walkthrough.none_sentences_has_word"))
    fill_mask_batch(lm, configs[:1])  # warm-up, untimed
    t0 = time.perf_counter()
    res = fill_mask_batch(lm, configs)
    ms = (time.perf_counter() - t0) * 1000
    pieces = [m for r in res for m in r.masks if m.original_rank is not None]
    hits = sum(1 for m in pieces if m.original_rank < 5)
    return HeldoutTop5(hits / max(1, len(pieces)), len(pieces), len(configs), ms)


@dataclass(frozen=True)
class ModelScore:
    family: str
    checkpoint: str
    params: int
    layers: int | None
    top5: float
    pieces: int
    sentences: int
    ms: float


@dataclass(frozen=True)
class DistilMeasurement:
    at: str  # wall-clock time of the measurement, HH:MM:SS
    speed: Any  # core.compare.speed.SpeedResult of the teacher's and the student's base architectures
    student: str  # family keys of the two rows of ``speed``
    teacher: str
    models: tuple[ModelScore, ...]  # teacher (or its stand-in) first, then the student
    errors: tuple[str, ...] = ()

    def speedup(self) -> float:
        return self.speed.speedup(self.student, self.teacher)


def measure_distillation(
    seq_len: int, batch: int, repeats: int, n_sentences: int, device: str, load: Callable[[Any, str], Any]
) -> DistilMeasurement:
    """Time the student's and its teacher's base architectures (core.compare.speed), then score the bundled models on
    held-out sentences. ``load(spec, task)`` returns a LoadedModel (the app passes its cached loader).
    Raises ValueError for bad sizes or when no family is distilled from another."""

    student_f = next((f for f in FAMILIES.values() if f.distilled_from), None)
    if student_f is None:
        raise ValueError(msg("walkthrough.no_distilled_family"))
    assert student_f.distilled_from is not None  # the family was picked for it
    pair = distillation_pair()
    at = time.strftime("%H:%M:%S")
    speed = bench.measure_speed(
        bench.SpeedConfig(
            families=(student_f.distilled_from, student_f.key),
            seq_len=seq_len,
            batch=batch,
            repeats=repeats,
            device=device,
        )
    )
    sentences = heldout_sentences(n_sentences)
    models, errors = [], []
    for fam in (pair.teacher, pair.student):
        if fam is None:
            continue
        spec = ModelSpec(fam, bundled_id(fam), device)
        try:
            lm = load(spec, "mlm")
            h = heldout_top5(lm, sentences)
            models.append(
                ModelScore(
                    fam,
                    spec.checkpoint,
                    sum(p.numel() for p in lm.model.parameters()),
                    getattr(lm.model.config, "num_hidden_layers", None),  # attribute_map aliases
                    h.top5,
                    h.pieces,
                    h.sentences,
                    h.ms,
                )
            )
        except ValueError as e:
            errors.append(carry(e))  # its Message: the page writes it in its language
    return DistilMeasurement(at, speed, student_f.key, student_f.distilled_from, tuple(models), tuple(errors))


def distillation_job(seq_len: int, batch: int, repeats: int, n_sentences: int, device: str):
    """Step 5's measurement as a core.runtime.jobs function fn(ctx) (picklable: it may run in a worker process, which
    loads the bundled models itself): like the Speed page's, it waits its turn in the job queue, so a room pressing
    Measure at once does not time its runs against each other in the script threads."""
    return functools.partial(_run_distillation, seq_len, batch, repeats, n_sentences, device)


def _run_distillation(seq_len: int, batch: int, repeats: int, n_sentences: int, device: str, ctx) -> DistilMeasurement:
    ctx.progress(0.0, msg("progress.loading_model"))
    return measure_distillation(seq_len, batch, repeats, n_sentences, device, load)


# ---------------------------------------------------------------------------------------------- step 6
@dataclass(frozen=True)
class LrPlan:
    data: Any  # core.data.datasets_local.LabelledData, cut to what the runs read
    runs: tuple[tuple[str, Any], ...]  # ("good", FinetuneConfig at lr), ("high", at LR_FACTOR x lr)


def lr_pair_plan(family_key: str, checkpoint: str, lr: float, steps: int, device: str) -> LrPlan:
    """Two short fine-tunes of one model with the seeds' settings (10% warmup, weight decay 0.01, clipping 1.0),
    one at ``lr`` and one at ten times it, on the bundled WordNet glosses. Raises ValueError for bad values."""

    if steps < 1:
        raise ValueError(msg("walkthrough.steps_must_least_got", steps=steps))
    data = load_bundled(S6_DATA)
    rows = min(len(data.train), steps * S6_BATCH)
    data = data.subset(rows, S6_TEST_ROWS)
    epochs = max(1, math.ceil(steps * S6_BATCH / len(data.train)))
    runs = tuple(
        (
            kind,
            FinetuneConfig(
                family_key,
                checkpoint,
                epochs=epochs,
                max_steps=steps,
                lr=rate,
                batch_size=S6_BATCH,
                max_length=S6_MAX_LEN,
                warmup_ratio=0.1,
                weight_decay=0.01,
                grad_clip=1.0,
                patience=0,
                device=device,
            ),
        )
        for kind, rate in (("good", lr), ("high", lr * LR_FACTOR))
    )
    return LrPlan(data, runs)


def jitter(history: Sequence[dict]) -> float | None:
    """Mean absolute change of the training loss from one step to the next: how much the curve jumps."""
    losses = [h["loss"] for h in history if h.get("loss") is not None]
    if len(losses) < 3:
        return None
    return float(sum(abs(b - a) for a, b in zip(losses, losses[1:])) / (len(losses) - 1))


@dataclass(frozen=True)
class LrVerdict:
    kind: str  # "good_failed", "diverged", "collapsed" (10x at the majority guess), "worse", "stuck" (the articles'
    # rate at the majority guess, 10x above it: what a short run of a bundled mini shows) or "short_run" (10x as good
    # or better, both above the majority guess)
    good: float | None = None  # held-out accuracy of each run
    high: float | None = None
    jitter_good: float = 0.0
    jitter_high: float = 0.0
    majority: float | None = None

    @property
    def jumpier(self) -> bool:
        """The 10x run's training loss jumped more from step to step than the articles' run's."""
        return self.jitter_high > self.jitter_good


# What step 6 shows on the bundled minis (measured by core/walkthrough/lr_measure.py, numbers in its docstring):
# ten times the articles' rate wins, and in the default 30 steps the articles' rate stays at the majority guess.
AT_MAJORITY = 0.02  # held-out accuracy within this of the majority guess: the run learned nothing useful


def lr_verdict(good, high) -> LrVerdict:
    """What the two TrainReports (None: the run failed) say: did ten times the learning rate hurt, or help?"""
    if good is None:
        return LrVerdict("good_failed")
    if high is None:
        return LrVerdict("diverged")
    v = dict(
        good=good.accuracy,
        high=high.accuracy,
        jitter_good=jitter(good.history) or 0.0,
        jitter_high=jitter(high.history) or 0.0,
        majority=good.majority_rate,
    )
    if high.accuracy <= good.majority_rate + AT_MAJORITY < good.accuracy:
        return LrVerdict("collapsed", **v)
    if high.accuracy < good.accuracy:
        return LrVerdict("worse", **v)
    if good.accuracy <= good.majority_rate + AT_MAJORITY < high.accuracy:
        return LrVerdict("stuck", **v)
    return LrVerdict("short_run", **v)


# ---------------------------------------------------------------------------------------------- step 7
def is_cls_classifier(checkpoint: str) -> bool:
    """A folder fine-tuned with the family's own [CLS] head (it loads as *ForSequenceClassification)."""

    try:
        meta = json.loads((Path(checkpoint).expanduser() / META_FILE).read_text())
    except (OSError, ValueError):
        return False
    return meta.get("config", {}).get("pooling") == "cls"

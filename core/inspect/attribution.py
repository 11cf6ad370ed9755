"""Which input tokens drive a prediction: captum attributions for a masked word, the NSP/SOP decision, or a class.

Every method explains one scalar ``f`` (core.inspect.attribution_inputs: the config, the prepared input and the
scalar). The model is fed word-embedding vectors (``inputs_embeds``), so the attributions land on the output of the
word-embedding layer; that is exactly what captum's ``LayerIntegratedGradients`` on that layer computes, and it
lets the baseline be any vector ([PAD], [MASK] or zeros). Special tokens ([CLS], [SEP], the target mask) keep
their own embedding in every baseline, so their attribution is zero by construction for IG/DeepLift/Occlusion/
KernelSHAP/LIME. Nothing here hooks the shared model: the methods that must hook modules (per-layer IG,
core.inspect.attribution_layers; DeepLift) work on a deep copy that lives only for the call.

The methods are a registry, core.inspect.attribution_methods.METHODS (key, label, runner, cost, settings, description);
this module runs the methods a config names, compares them, and runs a batch of rows read from a CSV. The CSV and
HTML exports of the results are the app's (app.kit.exports).
"""

from __future__ import annotations

import csv
import io
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.base.messages import Message, carry, msg
from core.base.text import display_piece
from core.inspect.attribution_estimate import mark_warm
from core.inspect.attribution_inputs import (
    AttributionConfig,
    Prepared,
    Scorer,
    forward_batch,
    module_scorer,
    prepare,
)
from core.inspect.attribution_layers import layer_attributions
from core.inspect.attribution_methods import METHODS, Inputs, NotApplicable
from core.inspect.faithfulness import LEVELS, Faithfulness, measure
from core.models.loading import LoadedModel
from core.registry.shape import shape
from core.runtime.backend import model_op

IG = "lig"  # the Integrated Gradients entry of core.inspect.attribution_methods.METHODS (its delta is checked here)
DELTA_WARN = 0.05  # |delta| above this share of |f(x) - f(baseline)| gets a warning: raise n_steps
MAX_BATCH_ROWS = 200

Progress = Callable[[float, str], None]


# ------------------------------------------------------------------------------------------------ results
@dataclass(frozen=True)
class MethodAttribution:
    method: str
    label: str
    scores: np.ndarray  # (seq,) one value per token; 0 at special tokens for baseline-based methods
    delta: float | None  # IG/DeepLift convergence delta: sum(scores) - (f(x) - f(baseline))
    seconds: float
    note: str = ""


@dataclass(frozen=True)
class AttributionResult:
    """Attributions of one input for one target; numpy and plain Python only."""

    family: str
    checkpoint: str
    target: str
    target_label: str  # e.g. "'paris' rather than 'london' at mask 1"
    tokens: tuple[str, ...]  # the tokenizer's pieces (Ġ, ▁, ##)
    special: np.ndarray  # (seq,) bool: tokens kept fixed in every baseline
    f_x: float  # the explained score on the input
    f_baseline: float  # ... and on the baseline
    baseline: str
    methods: tuple[MethodAttribution, ...]
    rank_corr: np.ndarray  # (methods, methods) Spearman over non-special tokens
    layer_scores: np.ndarray | None = None  # (layers, seq) LayerIG per layer, row 0 = embeddings output
    layer_names: tuple[str, ...] = ()
    candidates: tuple[tuple[str, float], ...] = ()  # top predictions (word, probability) or classes
    skipped: tuple[tuple[str, str], ...] = ()  # (method, why it does not apply)
    notes: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()  # the pieces as a person reads them (core.base.text.display_piece)
    faithfulness: Faithfulness | None = None  # every method's comprehensiveness and sufficiency (cfg.faithfulness)

    def method(self, key: str) -> MethodAttribution | None:
        return next((m for m in self.methods if m.method == key), None)

    @property
    def delta_warning(self) -> str | None:
        """A warning when IG's convergence delta is large against f(x) - f(baseline); None when fine."""
        m = self.method(IG)
        if m is None or m.delta is None:
            return None
        scale = max(abs(self.f_x - self.f_baseline), 1e-6)
        if abs(m.delta) > DELTA_WARN * scale and abs(m.delta) > 1e-4:
            return msg(
                "attribution.integrated_gradients_convergence_delta",
                delta=m.delta,
                share=abs(m.delta) / scale,
                gap=self.f_x - self.f_baseline,
            )
        return None


# ------------------------------------------------------------------------------------------------ run


def _run_method(key: str, prep: Prepared, cfg: AttributionConfig, tick: Callable[[], None]) -> MethodAttribution:
    """One registered method on the prepared input (core.inspect.attribution_methods runs captum)."""
    m = METHODS[key]
    inputs = Inputs(
        embeds=prep.embeds,
        base=prep.base,
        special=prep.special,
        f_x=prep.f_x,
        f_b=prep.f_b,
        forward=Scorer(prep.lm.model, prep, tick),
        module_on=lambda model: module_scorer(model, prep),
        model=prep.lm.model,
        cfg=cfg,
        batch=forward_batch(cfg, prep.embeds.shape[1]),
        tick=tick,
        baseline_label=msg(f"attribution.baseline_name.{cfg.baseline}"),
    )
    t0 = time.perf_counter()
    out = m.run(inputs)
    scores = out.scores
    if m.takes_baseline:  # specials equal their baseline: exactly 0, whatever numerical noise the method left
        scores = np.where(prep.special, 0.0, scores)
    return MethodAttribution(key, m.label, scores.astype(np.float64), out.delta, time.perf_counter() - t0, out.note)


def _ranks(a: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their average rank (scipy's rankdata 'average')."""
    ranks = np.empty(len(a))
    ranks[np.argsort(a, kind="mergesort")] = np.arange(1, len(a) + 1)
    _, inv = np.unique(a, return_inverse=True)
    return (np.bincount(inv, ranks) / np.bincount(inv))[inv]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation (average ranks for ties); nan when either side is constant."""
    ra, rb = _ranks(np.asarray(a, float)), _ranks(np.asarray(b, float))
    if np.std(ra) == 0 or np.std(rb) == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def method_name(key: str) -> Message:
    """A method's name in core's messages (its progress lines, why it was skipped): attribution.method_name.<key> of
    assets/i18n/errors.toml, whose English is METHODS[key].label (tests/core/test_progress_messages.py checks both)."""
    return msg(f"attribution.method_name.{key}")


@model_op
def attribute(lm: LoadedModel, cfg: AttributionConfig, progress: Progress | None = None) -> AttributionResult:
    """Run every method in ``cfg`` on ``lm`` and return an AttributionResult.

    ``progress(fraction, message)`` is called between forward batches (captum calls our forward once per
    batch); it may raise to cancel. Raises ValueError (bad input) or NotApplicable (target the model lacks).
    A method that does not apply is skipped with its reason in ``skipped`` unless it was the only one.
    """
    import torch  # lazy: torch loads in seconds; the page's imports reach this module

    report = progress or (lambda frac, message: None)
    prep = prepare(lm, cfg)
    seq = prep.embeds.shape[1]
    bs = forward_batch(cfg, seq)
    weights = {k: METHODS[k].cost(seq, cfg, bs).calls for k in cfg.methods}  # progress ticks per method
    n_layers = shape(lm.model.config).depths
    layer_cost = math.ceil(cfg.layer_steps / bs) * n_layers if cfg.layer_steps else 0
    faith_cost = len(LEVELS) if cfg.faithfulness else 0  # one batched forward per level
    total = sum(weights.values()) + layer_cost + faith_cost
    done = [0]

    methods: list[MethodAttribution] = []
    skipped: list[tuple[str, str]] = []
    with torch.no_grad():
        both = Scorer(lm.model, prep)(torch.cat([prep.embeds, prep.base]))  # (2,): f(x), f(baseline)
        f_x, f_b = float(both[0]), float(both[1])
    prep.f_x, prep.f_b = f_x, f_b
    for key in cfg.methods:
        start, label = done[0], method_name(key)

        def tick(key=key, start=start, label=label):
            done[0] = min(done[0] + 1, start + weights[key])
            report(
                done[0] / total,
                msg("progress.attribution.batch", method=label, done=done[0] - start, total=weights[key]),
            )

        report(done[0] / total, msg("progress.attribution.method", method=label))
        try:
            methods.append(_run_method(key, prep, cfg, tick))
        except NotApplicable as e:
            skipped.append((key, carry(e)))
        done[0] = start + weights[key]
    if not methods:
        raise NotApplicable(
            msg(
                "attribution.all_skipped",
                reasons=[msg("attribution.skipped_one", label=method_name(k), why=why) for k, why in skipped],
            )
        )
    layer_scores, layer_names, notes = None, (), list(prep.notes)
    if cfg.layer_steps:
        base_done = done[0]
        try:
            layer_scores, layer_names = layer_attributions(
                prep, cfg, lambda fr, message: report((base_done + fr * layer_cost) / total, message)
            )
        except NotApplicable as e:
            skipped.append(("layers", carry(e)))
    faith = None
    if cfg.faithfulness:
        report((total - faith_cost) / total, msg("progress.attribution.faithfulness"))
        try:
            # random rankings seeded by the setting and the input: rows of a batch draw their own permutations
            seed = (cfg.seed, *prep.ids[0].tolist())
            faith = measure(lm, prep, {m.method: m.scores for m in methods}, cfg.removal, seed=seed)
        except NotApplicable as e:
            skipped.append(("faithfulness", carry(e)))
    keep = ~prep.special
    m = len(methods)
    corr = np.eye(m)
    for i in range(m):
        for j in range(i + 1, m):
            corr[i, j] = corr[j, i] = spearman(methods[i].scores[keep], methods[j].scores[keep])
    report(1.0, msg("progress.done"))
    mark_warm(lm.model)  # the next estimate on this model need not warn of the first run's one-off costs
    tokens = tuple(lm.tokenizer.convert_ids_to_tokens(prep.ids[0].tolist()))
    return AttributionResult(
        family=lm.spec.family,
        checkpoint=lm.spec.checkpoint,
        target=cfg.target,
        target_label=prep.target_label,
        tokens=tokens,
        labels=tuple(display_piece(p, lm.tokenizer) for p in tokens),
        special=prep.special,
        f_x=f_x,
        f_baseline=f_b,
        baseline=cfg.baseline,
        methods=tuple(methods),
        rank_corr=corr,
        layer_scores=layer_scores,
        layer_names=layer_names,
        candidates=prep.candidates,
        skipped=tuple(skipped),
        notes=tuple(notes),
        faithfulness=faith,
    )


# ------------------------------------------------------------------------------------------------ batch
@dataclass(frozen=True)
class BatchRow:
    text: str
    text_b: str = ""
    word: str = ""
    class_index: int | None = None


@dataclass(frozen=True)
class BatchResult:
    rows: tuple[BatchRow, ...]
    results: tuple[AttributionResult | None, ...]  # None where the row failed
    errors: tuple[str | None, ...]


def read_batch_csv(data: str | bytes) -> tuple[BatchRow, ...]:
    """Parse a CSV with a ``text`` column (optional ``text_b``, ``word``, ``class``). Raises ValueError."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ValueError(msg("attribution.csv_not_utf_text")) from None
    if not data.strip():
        raise ValueError(msg("attribution.csv_empty_needs_header"))
    reader = csv.DictReader(io.StringIO(data))
    cols = [c.strip().lower() for c in (reader.fieldnames or [])]
    if "text" not in cols:
        raise ValueError(msg("attribution.csv_needs_text_column", found=", ".join(cols) or "none"))
    rows = []
    for n, raw in enumerate(reader, start=2):
        r = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items()}
        if not r.get("text"):
            continue
        cls = r.get("class", "")
        if cls and not cls.isdigit():
            raise ValueError(msg("attribution.line_class_must_class", n=n, value=cls))
        rows.append(BatchRow(r["text"], r.get("text_b", ""), r.get("word", ""), int(cls) if cls else None))
    if not rows:
        raise ValueError(msg("attribution.csv_no_text_rows"))
    if len(rows) > MAX_BATCH_ROWS:
        raise ValueError(msg("attribution.csv_has_rows_limit", n_rows=len(rows), max_rows=MAX_BATCH_ROWS))
    return tuple(rows)


@model_op
def attribute_batch(
    lm: LoadedModel, rows: tuple[BatchRow, ...], settings: dict[str, Any], progress: Progress | None = None
) -> BatchResult:
    """Attribute each row: ``settings`` are AttributionConfig fields (target, methods, baseline, ...) without the
    text; each row brings its text, text_b, and optionally its word and class.

    A row that fails (bad word, no mask, too long) keeps its error message; the others go on.
    """
    report = progress or (lambda frac, message: None)
    check_batch_settings(settings)
    results: list[AttributionResult | None] = []
    errors: list[str | None] = []
    for i, row in enumerate(rows):

        def sub(frac: float, message: str, i=i) -> None:
            report((i + frac) / len(rows), msg("progress.attribution.row", row=i + 1, rows=len(rows), inner=message))

        try:
            params = {**settings, "layer_steps": 0, "text": row.text, "text_b": row.text_b}
            if row.word:
                params["word"] = row.word
            if row.class_index is not None:
                params["class_index"] = row.class_index
            c = AttributionConfig(**params)
            results.append(attribute(lm, c, sub))
            errors.append(None)
        except ValueError as e:
            results.append(None)
            errors.append(carry(e))  # its Message: the page writes it in its language
    return BatchResult(tuple(rows), tuple(results), tuple(errors))


def check_batch_settings(settings: dict[str, Any]) -> None:
    """Raise ValueError (with the fix) when batch settings are invalid, before any row runs."""
    bad = {"text", "text_b"} & set(settings)
    if bad:
        raise ValueError(msg("attribution.batch_settings_must_not", settings=", ".join(sorted(bad))))
    try:
        AttributionConfig(**settings, text="check", text_b="check")
    except TypeError as e:
        raise ValueError(msg("attribution.unknown_batch_setting", error=e)) from None

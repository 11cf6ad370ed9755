"""The third seed article's GLUE table, as claims, and what this installation's own fine-tunes measured.

``GLUE_CLAIMS``: the article's dev-set figures (its section 4.2, "性能基准对比"), copied as printed: MNLI-m, QQP,
QNLI, SST-2 and CoLA for BERT-base, RoBERTa-base, ALBERT-base and DistilBERT. The article gives no metric per
column and no source; GLUE's usual ones are accuracy (MNLI-m, QNLI, SST-2), accuracy/F1 (QQP) and Matthews
correlation (CoLA). tests/core/test_glue_claims.py checks the numbers against the article's text when the seeds are
on this machine.

``find_runs(roots)`` reads the metadata ``core.train.finetune`` saves beside every finished fine-tune
(``model/encoderlab_finetune.json``: the run's config, data name, held-out accuracy / macro-F1 or entity F1, steps),
and ``full_run(task, samples_per_s)`` says what a run of the table's kind would take: the task's training set x 3
epochs at a measured speed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from core.registry import FAMILIES

GLUE_COLUMNS = ("mnli", "qqp", "qnli", "sst2", "cola")
COLUMN_LABELS = {"mnli": "MNLI-m", "qqp": "QQP", "qnli": "QNLI", "sst2": "SST-2", "cola": "CoLA"}
# family key -> (the article's model name, its five figures in GLUE_COLUMNS order): registry data (Family.glue_claim)
GLUE_CLAIMS: dict[str, tuple[str, tuple[float, ...]]] = {
    f.key: (f.glue_claim.model, f.glue_claim.figures) for f in FAMILIES.values() if f.glue_claim is not None
}
CLAIM_SOURCE = "the third seed article, section 4.2 (performance benchmarks, 性能基准对比)"
# GLUE's training sets (examples), from the GLUE paper (Wang et al., 2019), and the epochs BERT's recipe uses.
TRAIN_EXAMPLES = {
    "mnli": 392_702,
    "qqp": 363_846,
    "qnli": 104_743,
    "sst2": 67_349,
    "cola": 8_551,
    "mrpc": 3_668,
    "rte": 2_490,
    "wnli": 635,
}
FULL_EPOCHS = 3
META_FILE = (
    "encoderlab_finetune.json"  # what core.train.finetune_model.save_model writes (core.predict.classify.META_FILE)
)
MAX_RUNS = (
    200  # run folders read at most per call (a runs root can grow: core.runtime.run_folders.evict_run_folders trims it)
)


def claims_rows() -> list[dict]:
    """One dict per model: family, model, and the five figures by column key."""
    return [dict(family=fam, model=name, **dict(zip(GLUE_COLUMNS, vals))) for fam, (name, vals) in GLUE_CLAIMS.items()]


def claims_in_text(text: str) -> dict[str, tuple[float, ...]]:
    """The GLUE table as it appears in ``text`` (the article, whose table lost its separators:
    "BERT-base84.689.290.593.552.1..."): model name -> five figures. Missing models are left out."""
    out = {}
    flat = re.sub(r"\s+", "", text)
    for name, _ in GLUE_CLAIMS.values():
        m = re.search(re.escape(name) + r"((?:\d{2}\.\d){5})", flat)
        if m:
            out[name] = tuple(float(x) for x in re.findall(r"\d{2}\.\d", m.group(1)))
    return out


class Metric(StrEnum):
    """What a measured run's ``value`` is (the page names it as models.glue.metric.<value>)."""

    ACCURACY = "accuracy"
    ENTITY_F1 = "entity_f1"


@dataclass(frozen=True)
class MeasuredRun:
    """One finished fine-tune found on this machine."""

    path: str  # the model folder
    family: str
    checkpoint: str
    data: str  # the data's name: "glue-sst2", "drugreview", "wordnet", an upload's file name, ...
    task: str  # "sequence" or "token"
    glue_task: str | None  # "sst2", "cola", ... when the data is a GLUE task
    metric: Metric  # what ``value`` is: held-out accuracy, or entity F1 for a token run
    value: float  # 0..1, on the run's own held-out split
    macro_f1: float | None
    steps: int
    seed: int
    batch_size: int
    max_length: int
    samples_per_s: float | None  # when the metadata has it


def _glue_task(name: str) -> str | None:
    m = re.fullmatch(r"glue-([a-z0-9]+)", name or "")
    return m.group(1) if m else None


def read_run(model_dir: str | Path) -> MeasuredRun | None:
    """The run saved in ``model_dir`` (core.train.finetune's metadata), or None when it holds none or it is unreadable."""
    p = Path(model_dir) / META_FILE
    try:
        meta = json.loads(p.read_text(encoding="utf-8"))
        cfg = meta["config"]
        task = cfg.get("task", "sequence")
        token = task == "token" and meta.get("entity_f1") is not None
        return MeasuredRun(
            path=str(Path(model_dir)),
            family=str(cfg["family"]),
            checkpoint=str(cfg["checkpoint"]),
            data=str(meta.get("data", "")),
            task=task,
            glue_task=_glue_task(str(meta.get("data", ""))),
            metric=Metric.ENTITY_F1 if token else Metric.ACCURACY,
            value=float(meta["entity_f1"] if token else meta["accuracy"]),
            macro_f1=None if meta.get("macro_f1") is None else float(meta["macro_f1"]),
            steps=int(meta.get("steps", 0)),
            seed=int(cfg.get("seed", 0)),
            batch_size=int(cfg.get("batch_size", 0)),
            max_length=int(cfg.get("max_length", 0)),
            samples_per_s=None if meta.get("samples_per_s") is None else float(meta["samples_per_s"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def find_runs(roots, extra: tuple[str | Path, ...] = ()) -> list[MeasuredRun]:
    """Finished fine-tunes under ``roots`` (folders holding run folders: <root>/<run>/model, or one level deeper
    for a root of session folders) and in the ``extra`` model folders; each found once, newest first, at most
    MAX_RUNS."""
    found: dict[str, tuple[float, MeasuredRun]] = {}

    def add(meta: Path) -> None:
        key = str(meta.parent.resolve())
        if key in found or len(found) >= MAX_RUNS:
            return
        run = read_run(meta.parent)
        if run is not None:
            try:
                found[key] = (meta.stat().st_mtime, run)
            except OSError:
                pass

    for d in extra:
        add(Path(d) / META_FILE)
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        for pattern in (f"*/model/{META_FILE}", f"*/*/model/{META_FILE}", f"model/{META_FILE}"):
            for meta in sorted(root.glob(pattern)):
                add(meta)
    return [r for _, r in sorted(found.values(), key=lambda x: -x[0])]


@dataclass(frozen=True)
class FullRun:
    task: str
    examples: int
    epochs: int
    samples: int  # examples x epochs
    hours: float | None  # at the given samples/s; None without one


def full_run(task: str, samples_per_s: float | None = None, epochs: int = FULL_EPOCHS) -> FullRun:
    """What one full fine-tune on a GLUE task takes: its training set x ``epochs``, and the hours at
    ``samples_per_s``. Raises ValueError for a task GLUE does not have."""
    if task not in TRAIN_EXAMPLES:
        raise ValueError(f"Unknown GLUE task {task!r}: use one of {', '.join(TRAIN_EXAMPLES)}.")
    n = TRAIN_EXAMPLES[task] * epochs
    hours = n / samples_per_s / 3600 if samples_per_s and samples_per_s > 0 else None
    return FullRun(task, TRAIN_EXAMPLES[task], epochs, n, hours)


def share_of_full(run: MeasuredRun, task: str = "mnli") -> float:
    """The share of a full run on ``task`` (3 epochs) that ``run``'s steps x batch covered."""
    return run.steps * max(run.batch_size, 1) / full_run(task).samples

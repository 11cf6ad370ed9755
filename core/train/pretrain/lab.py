"""The Pretraining lab's engine: a request from the page -> a checked PretrainConfig -> a background job.

The page never branches on family names: ``switches(family)`` says which objectives a family can switch
(its own pair head, distillation), and ``prepare`` turns bad input into one clear PretrainError/CorpusError.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.base import settings
from core.base.messages import msg
from core.base.paths import zoo_dir
from core.data.corpus import CORPUS_DIR, CorpusError, check_documents, decode_upload, parse_documents
from core.models.devices import resolve_device
from core.registry import FAMILIES, PAIR_HEADS
from core.registry.pretraining import recipe
from core.runtime.job_outcome import JobCancelled
from core.train.pretrain.build import SIZES
from core.train.pretrain.train import PretrainConfig, PretrainError, TrainReport, pretrain

MAX_UPLOAD_MB = min(5.0, settings.current().max_upload_mb)


@dataclass(frozen=True)
class LabLimits:
    max_steps: int
    max_size: str
    max_documents: int | None = None

    @property
    def sizes(self) -> list[str]:
        order = list(SIZES)
        return order[: order.index(self.max_size) + 1]


def limits() -> LabLimits:
    """Step, size and corpus limits (ENCODERLAB_PRETRAIN_MAX_STEPS / _MAX_SIZE / _MAX_DOCS; larger with a GPU)."""
    gpu = resolve_device("auto").kind == "cuda"
    steps = int(os.environ.get("ENCODERLAB_PRETRAIN_MAX_STEPS", "2000" if gpu else "300"))
    size = os.environ.get("ENCODERLAB_PRETRAIN_MAX_SIZE", "small" if gpu else "mini")
    docs = os.environ.get("ENCODERLAB_PRETRAIN_MAX_DOCS")
    return LabLimits(steps, size if size in SIZES else "tiny", int(docs) if docs else None)


def switches(family: str) -> dict[str, Any]:
    """What a family can switch on besides MLM: its pair head (label or None) and distillation."""
    f = FAMILIES[family]
    return {
        "pair": f.pair_head.upper() if f.pair_head else None,
        "pair_label": PAIR_HEADS.get(f.pair_head or "", ""),
        "pair_note": f.pair_head_note,
        "distill": recipe(family).distils,
    }


@dataclass(frozen=True)
class LabRequest:
    family: str
    steps: int = 100
    size: str = "tiny"
    masking: str = "dynamic"
    whole_word: bool = False
    pair: bool = True
    distill: bool = False
    upload: bytes | None = None  # None: the bundled corpus
    upload_name: str = "upload.txt"
    seed: int = 0


def prepare(req: LabRequest, workdir: str | Path | None = None, lim: LabLimits | None = None) -> PretrainConfig:
    """Check the request and write an uploaded corpus; returns the run's config. Raises PretrainError/CorpusError."""
    lim = lim or limits()
    sw = switches(req.family)
    out = Path(workdir or tempfile.mkdtemp(prefix=f"encoderlab-pretrain-{req.family}-"))
    corpus: str = str(CORPUS_DIR)
    if req.upload is not None:
        cap = min(MAX_UPLOAD_MB, settings.current().max_upload_mb)  # the server's limit now, when lower
        if len(req.upload) > cap * 2**20:
            raise CorpusError(msg("pretrain.upload_too_large", upload_name=req.upload_name, max_mb=cap))
        docs = parse_documents(decode_upload(req.upload, req.upload_name))
        check_documents(docs, need_pairs=bool(req.pair and sw["pair"]))
        out.mkdir(parents=True, exist_ok=True)
        corpus = str(out / "corpus.txt")
        Path(corpus).write_bytes(req.upload)
    teacher = None
    if req.distill:
        teacher_key = FAMILIES[req.family].distilled_from
        if not sw["distill"] or teacher_key is None:
            students = ", ".join(r.label for r in FAMILIES.values() if recipe(r.key).distils)
            raise PretrainError(
                msg(
                    "pretrain.family_not_distilled",
                    students=students,
                    label=FAMILIES[req.family].label,
                )
            )
        teacher_family = FAMILIES[teacher_key]
        teacher = zoo_dir() / teacher_family.bundled
        if not (teacher / "model.safetensors").exists():
            raise PretrainError(msg("pretrain.distillation_needs_bundled_mini", label=teacher_family.label))
        if "mini" not in lim.sizes:
            raise PretrainError(
                msg("pretrain.student_over_size_limit", label=teacher_family.label, max_size=lim.max_size)
            )
    return PretrainConfig(
        family=req.family,
        out=str(out / "model"),
        corpus=corpus,
        steps=req.steps,
        size=req.size,
        masking=req.masking,
        whole_word=req.whole_word,
        pair="auto" if (req.pair and sw["pair"]) else None,
        teacher=str(teacher) if teacher else None,
        seed=req.seed,
        batch_size=16,
        max_len=64,
        lr=1e-3 if not teacher else 2e-4,
        log_every=max(1, req.steps // 100),
        eval_every=max(10, req.steps // 5),
        eval_instances=32,
        checkpoint_every=max(10, req.steps // 4),
        max_steps=lim.max_steps,
        max_size=lim.max_size,
        max_documents=lim.max_documents,
    )


def job(cfg: PretrainConfig) -> Callable[[Any], TrainReport]:
    """A core.runtime.jobs function: runs ``pretrain`` reporting every step; Cancel stops it after a checkpoint.

    A partial of a module-level function over the config, so core.runtime.jobs can run it in a worker process."""

    return functools.partial(_run_job, cfg)


def _run_job(cfg: PretrainConfig, ctx) -> TrainReport:
    def on_step(ev: dict) -> None:
        m = {
            k: v
            for k, v in ev.items()
            if k in ("step", "loss", "mlm_loss", "mlm_acc", "nsp_acc", "sop_acc", "kl", "cos")
        }
        if "eval" in ev:
            e = ev["eval"]
            m.update(
                heldout_top1=e["mlm_top1"],
                heldout_top5=e["mlm_top5"],
                unigram_top5=e["unigram_top5"],
                samples=e.get("samples", []),
            )
            if "pair_acc" in e:
                m["heldout_pair_acc"] = e["pair_acc"]
        try:
            ctx.progress(
                ev["fraction"], msg("progress.pretrain.step", step=ev["step"], total=cfg.steps, loss=ev["loss"]), **m
            )
        except JobCancelled:
            pass  # pretrain asks should_stop next: it saves a checkpoint, then the run ends

    report = pretrain(cfg, on_step=on_step, should_stop=lambda: ctx.cancelled)
    if report.status == "stopped":
        ctx.check_cancelled()
    return report

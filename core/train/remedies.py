"""The out-of-memory remedies, measured: the same short fine-tune with each of core.train.finetune_config.REMEDIES on.

``measure_remedies(cfg, data, steps=6)`` runs a few optimizer steps on a small subset (``steps`` batches of
training rows, a few held-out rows) once as configured (the baseline) and once per remedy, **each in a fresh
Python process**, so that each run's peak memory is its own: on a GPU ``torch.cuda.max_memory_allocated`` after
``reset_peak_memory_stats``; on the CPU the child's peak resident set (``getrusage(RUSAGE_SELF).ru_maxrss``), of
which the part training added (peak minus the RSS just before ``train`` started, i.e. without the interpreter,
torch and transformers) is what the ratios compare. Speed is optimizer steps per second between the first and
the last step (model loading and the first step's warm-up left out). The result is a frozen ``RemedyResult``.

Why a subprocess and not multiprocessing: the measurement itself runs as a core.runtime.jobs worker, a daemonic process,
and multiprocessing refuses to start children from one; ``subprocess`` has no such rule, and a fresh interpreter
is exactly what a clean peak needs. Run a child by hand: ``python -m core.train.remedies --child IN.pkl OUT.pkl``.
"""

from __future__ import annotations

import functools
import importlib
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from core.base.messages import carry, msg
from core.base.paths import REPO_ROOT
from core.models.devices import is_oom, resolve_device
from core.models.loading import read_config, resolve
from core.runtime.jobs import exit_message
from core.train.finetune import train
from core.train.finetune_config import REMEDIES, FinetuneError, apply_remedy, effective_precision

BASELINE = "baseline"
# The third article's troubleshooting list, quoted beside the table (English and its own words).
ARTICLE_OSCILLATION = (
    "训练时loss震荡大：检查学习率是否过高，尝试减小批次大小，增加梯度裁剪（max_grad_norm=1.0）",
    "Loss oscillates a lot: check whether the learning rate is too high, try a smaller batch size, "
    "add gradient clipping (max_grad_norm=1.0).",
)
ARTICLE_OOM = (
    "GPU内存不足：启用梯度检查点（gradient checkpointing），使用混合精度训练，减小max_seq_length（但不要<64）",
    "GPU out of memory: enable gradient checkpointing, use mixed-precision training, reduce max_seq_length "
    "(but not below 64).",
)
CHILD_TIMEOUT_S = 900.0
MAX_STEPS = 50


@dataclass(frozen=True)
class RemedyRow:
    """One run: the baseline or one remedy."""

    name: str  # "baseline" or a key of core.train.finetune_config.REMEDIES
    label: str
    changed: bool  # False: the remedy would not change this config (it was not run)
    settings: str  # what the run used: batch, max length, precision, checkpointing, frozen embeddings
    peak_mb: float | None  # CPU: the child's peak RSS; GPU: max_memory_allocated
    train_mb: float | None  # CPU: peak RSS minus RSS before training; GPU: = peak_mb
    steps_per_s: float | None
    memory_ratio: float | None  # train_mb / the baseline's
    speed_ratio: float | None  # steps_per_s / the baseline's
    precision: str = ""
    error: str | None = None


@dataclass(frozen=True)
class RemedyResult:
    rows: tuple[RemedyRow, ...]  # the baseline first, then REMEDIES in their order
    device: str  # "cpu" or "cuda"
    memory_kind: str  # what peak_mb is: "peak RSS of the run's process" or "torch.cuda.max_memory_allocated"
    steps: int
    train_rows: int
    batch_size: int
    max_length: int
    threads: int

    def row(self, name: str) -> RemedyRow:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)


def _settings(cfg) -> str:
    """What a run used (batch, max length, precision, checkpointing, frozen embeddings): a Message, English as a str."""
    return msg(
        "remedies.settings",
        batch=cfg.batch_size,
        max_length=cfg.max_length,
        precision=effective_precision(cfg),
        checkpointing=msg("remedies.settings_checkpointing") if cfg.gradient_checkpointing else "",
        frozen=msg("remedies.settings_frozen") if cfg.freeze_embeddings else "",
    )


def short_run(cfg, steps: int):
    """The measurement's config: ``steps`` optimizer steps, no early stopping, one evaluation at the end."""
    return replace(cfg, max_steps=steps, epochs=1, patience=0, evals_per_epoch=1)


def plan(cfg, names: tuple[str, ...] | None = None) -> list[tuple[str, str, Any, bool]]:
    """(name, label, config, changed) for the baseline and each remedy, in REMEDIES order."""
    names = tuple(REMEDIES) if names is None else names
    unknown = [n for n in names if n not in REMEDIES]
    if unknown:
        raise ValueError(msg("remedies.unknown_remedies_choose_from", unknown=unknown, choices=", ".join(REMEDIES)))
    out: list[tuple[str, str, Any, bool]] = [(BASELINE, msg("remedies.as_configured"), cfg, True)]
    for n in names:
        c = apply_remedy(cfg, n)
        out.append((n, REMEDIES[n][0], c, c != cfg))
    return out


def measure_remedies(
    cfg,
    data,
    steps: int = 6,
    names: tuple[str, ...] | None = None,
    on_progress: Callable[[float, str], None] | None = None,
) -> RemedyResult:
    """Run the short fine-tune as configured and with each remedy, each in its own process; see the module doc.

    ``data``: core.data.datasets_local.LabelledData (task "sequence") or core.data.token_data.TokenData (task "token"); the
    first ``steps * batch_size`` training rows and 8 held-out rows are used. ``on_progress(fraction, message)``
    may raise (core.runtime.job_outcome.JobCancelled) to stop: the running child is killed. Raises ValueError for bad settings.
    """
    import torch  # lazy: torch loads in seconds; the page imports this module for its dataclasses

    if not isinstance(steps, int) or not 2 <= steps <= MAX_STEPS:
        raise ValueError(msg("remedies.steps_must_whole_number", max_steps=MAX_STEPS, steps=steps))
    runs = plan(short_run(cfg, steps), names)
    kind = resolve_device(cfg.device).kind
    sub = data.subset(steps * cfg.batch_size, 8)
    threads = torch.get_num_threads()
    measured: dict[str, dict] = {}
    todo = [r for r in runs if r[3]]
    with tempfile.TemporaryDirectory(prefix="encoderlab-remedies-") as tmp:
        for i, (name, label, c, _) in enumerate(todo):
            if on_progress:
                on_progress(i / len(todo), msg("progress.remedies.run", run=i + 1, runs=len(todo), label=label))
            measured[name] = _run_child(c, sub, Path(tmp) / name, threads, on_progress, i / len(todo))
    if on_progress:
        on_progress(1.0, msg("progress.done"))
    base = measured.get(BASELINE, {})
    rows = []
    for name, label, c, changed in runs:
        m = measured.get(name, {})
        ok = changed and not m.get("error")
        mem = m.get("train_mb") if ok else None
        sps = m.get("steps_per_s") if ok else None
        b_mem, b_sps = (base.get("train_mb"), base.get("steps_per_s")) if not base.get("error") else (None, None)
        rows.append(
            RemedyRow(
                name=name,
                label=label,
                changed=changed,
                settings=_settings(c),
                peak_mb=m.get("peak_mb") if ok else None,
                train_mb=mem,
                steps_per_s=sps,
                memory_ratio=mem / b_mem if mem and b_mem else None,
                speed_ratio=sps / b_sps if sps and b_sps else None,
                precision=m.get("precision", ""),
                error=m.get("error"),
            )
        )
    return RemedyResult(
        rows=tuple(rows),
        device=kind,
        memory_kind="torch.cuda.max_memory_allocated" if kind == "cuda" else "peak RSS of the run's process",
        steps=steps,
        train_rows=len(sub.train),
        batch_size=cfg.batch_size,
        max_length=cfg.max_length,
        threads=threads,
    )


def _run_child(cfg, data, folder: Path, threads: int, on_progress, fraction: float) -> dict:
    """One run in a fresh interpreter; returns its measurements (or {"error": ...})."""
    folder.mkdir(parents=True, exist_ok=True)
    src, dst = folder / "in.pkl", folder / "out.pkl"
    src.write_bytes(pickle.dumps(dict(cfg=cfg, data=data, out_dir=str(folder / "run"), threads=threads)))
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        TOKENIZERS_PARALLELISM="false",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "core.train.remedies", "--child", str(src), str(dst)],
        cwd=str(REPO_ROOT),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    t0 = time.monotonic()
    try:
        while proc.poll() is None:
            time.sleep(0.2)
            if on_progress:  # may raise JobCancelled: the child is killed below
                on_progress(
                    fraction, msg("progress.remedies.child", settings=_settings(cfg), seconds=time.monotonic() - t0)
                )
            if time.monotonic() - t0 > CHILD_TIMEOUT_S:
                raise TimeoutError(msg("remedies.remedy_run_took_over", timeout_s=CHILD_TIMEOUT_S))
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    if dst.exists():
        return pickle.loads(dst.read_bytes())
    tail = err.strip().splitlines()[-1] if err.strip() else ""
    return {"error": exit_message(proc.returncode) + (f" ({tail})" if tail else "")}


def _rss_mb() -> float:
    """The resident set of this process now, in MB (Linux /proc; psutil elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        import psutil  # lazy: only where /proc is missing (macOS)

        return psutil.Process().memory_info().rss / 2**20


def _peak_rss_mb() -> float:
    import resource  # lazy: Unix-only standard module, only the child process reads it

    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 2**20  # Linux reports KiB, macOS bytes


def _preload(cfg) -> None:
    """Import what ``train`` imports lazily (accelerate, the family's modeling module), so that the RSS measured
    before training already holds the libraries and the difference is the run's own memory."""
    import accelerate  # noqa: F401  # lazy: the point of this function is to import it before measuring
    import transformers  # lazy: as accelerate

    res = resolve(cfg.checkpoint)  # the checkpoint's own model type (a generic family's comes from its config)
    mt = read_config(res.path).get("model_type", "") if res.path else ""
    mt = mt.replace("-", "_")  # transformers' module names: xlm-roberta -> xlm_roberta
    transformers.get_linear_schedule_with_warmup  # noqa: B018 - resolves the lazy optimization module
    if mt:
        try:
            importlib.import_module(f"transformers.models.{mt}.modeling_{mt}")
        except ImportError:  # a model type transformers keeps elsewhere: it is imported by the run itself
            pass


def _child(src: str, dst: str) -> int:
    """Entry point of one run: train, then write what was measured to ``dst``."""
    import torch  # lazy: as in measure_remedies

    job = pickle.loads(Path(src).read_bytes())
    torch.set_num_threads(int(job["threads"]))
    cfg = job["cfg"]
    cuda = resolve_device(cfg.device).kind == "cuda"
    times: list[float] = []

    def on_step(info) -> None:
        if info.kind == "train":
            times.append(time.perf_counter())

    _preload(cfg)  # what every run imports anyway stays out of "what training added"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    before = _rss_mb()
    out: dict[str, Any]
    try:
        res = train(cfg, job["data"], job["out_dir"], on_step=on_step)
        sps = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else None
        if cuda:
            peak = torch.cuda.max_memory_allocated() / 2**20
            out = dict(peak_mb=peak, train_mb=peak)
        else:
            peak = _peak_rss_mb()
            out = dict(peak_mb=peak, train_mb=max(peak - before, 0.0))
        out.update(steps_per_s=sps, precision=res.precision, steps=res.steps)
    except (ValueError, FinetuneError, RuntimeError, MemoryError) as e:
        kind = "remedies.child_out_of_memory" if is_oom(e) else "remedies.child_failed"
        out = {"error": msg(kind, type=type(e).__name__, error=carry(e))}  # a Message: the table explains it
    Path(dst).write_bytes(pickle.dumps(out))
    return 0


def job(cfg, data, steps: int = 6):
    """A core.runtime.jobs function (picklable: it runs in a worker process) measuring every remedy for ``cfg``."""
    return functools.partial(_job, cfg, data, steps)


def _job(cfg, data, steps: int, ctx) -> RemedyResult:
    return measure_remedies(cfg, data, steps=steps, on_progress=ctx.progress)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        sys.exit(_child(sys.argv[2], sys.argv[3]))
    print("usage: python -m core.train.remedies --child IN.pkl OUT.pkl (started by measure_remedies)", file=sys.stderr)
    sys.exit(2)

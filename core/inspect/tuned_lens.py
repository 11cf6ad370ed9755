"""Tuned lens (Belrose et al. 2023, "Eliciting latent predictions with the tuned lens"): training, saving and
loading.

One affine translator per intermediate depth, h -> W_d h + b_d with W_d = I and b_d = 0 at the start (the paper's
h + A_d h + b_d with A_d = 0), trained so that head(translator_d(h_d)) matches the last layer's distribution, loss
KL(final || lens). Training text is the bundled corpus's train split (assets/corpus/train.txt); ~15% of each
sentence's tokens are replaced by the mask token and the loss is taken at those positions only, because the lens is
read at [MASK]s. The KL to the final distribution at each depth is measured the same way on the held-out split
(assets/corpus/heldout.txt). core.inspect.lens reads the lens through them (``mode="tuned"``).

Translators are saved per model under ``lens_root()`` (ENCODERLAB_LENS_DIR, default <runs>/lens-cache: a "session"
folder of core.runtime.run_folders.evict_run_folders, so each model's folder is bounded by the runs' size and age limits; a load
touches it), keyed by ``model_key`` (core.runtime.artifacts.model_key with the tag ``f"lens{LENS_FORMAT}"``: a hash of
the checkpoint's config and weight files, name, size, mtime), so a second visit loads them at once. Bumping
LENS_FORMAT invalidates saved tuned lenses only (the corpus indexes and probe results have their own tags). Loaded
translators are kept in a small per-process LRU (LENS_CACHE entries).

Why not a library: the ``tuned-lens`` package targets decoder LMs (it reads GPT-style final norms and unembeddings)
and does not know BERT-style MLM heads; transformers has no lens at all.
"""

from __future__ import annotations

import functools
import json
import math
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from core.base.caches import register as register_cache
from core.base.messages import carry, msg
from core.base.paths import scrub
from core.base.settings import current
from core.data.masking import masked_batch
from core.inspect.lens_forward import LensError, apply_head, hidden_size, n_layers
from core.models.loading import LoadedModel, ModelSpec, load
from core.predict.fill_mask import FillMaskError, check_mlm
from core.represent.bundled_corpus import corpus_sentences
from core.runtime import artifacts
from core.runtime.job_outcome import JobCancelled

LENS_FORMAT = 1  # bump when the saved translators' meaning changes: old folders are then never read
LENS_CACHE = 8  # loaded translator sets kept per process (LRU)
WEIGHTS_FILE = "translators.safetensors"
REPORT_FILE = "report.json"
MAX_TUNE_STEPS = 5000
HOSTED_MAX_TUNE_STEPS = 1000


# ---------------------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class TuneConfig:
    """How to train a tuned lens: optimizer steps, sentences per step, their length, learning rate, seed."""

    steps: int = 200
    batch_size: int = 8  # sentences per step
    max_length: int = 64  # tokens per sentence, special tokens included
    lr: float = 2e-3
    mask_prob: float = 0.15
    seed: int = 0
    heldout_sentences: int = 128  # sentences of the held-out split the KL table is measured on

    def __post_init__(self) -> None:
        cap = HOSTED_MAX_TUNE_STEPS if current().hosted else MAX_TUNE_STEPS
        if not isinstance(self.steps, int) or not 1 <= self.steps <= cap:
            raise ValueError(msg("lens.tuned_lens_steps_must", cap=cap, steps=self.steps))
        if not isinstance(self.batch_size, int) or not 1 <= self.batch_size <= 256:
            raise ValueError(msg("lens.sentences_per_step_must", batch_size=self.batch_size))
        if not isinstance(self.max_length, int) or not 8 <= self.max_length <= 512:
            raise ValueError(msg("lens.sentence_length_must_from", max_length=self.max_length))
        if not (isinstance(self.lr, (int, float)) and 0 < self.lr <= 1):
            raise ValueError(msg("lens.learning_rate_must_above", lr=self.lr))
        if not 0 < self.mask_prob <= 0.5:
            raise ValueError(msg("lens.mask_share_must_above", mask_prob=self.mask_prob))
        if not isinstance(self.heldout_sentences, int) or not 1 <= self.heldout_sentences <= 5000:
            raise ValueError(msg("lens.held_out_sentences_must", heldout_sentences=self.heldout_sentences))


# ---------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class TuneReport:
    """A trained tuned lens: how it was trained and its KL to the last layer per depth on held-out text."""

    key: str
    checkpoint: str
    family: str
    n_layers: int
    steps: int
    seconds: float
    loss_first: float  # mean KL over the intermediate depths, first step (train batch)
    loss_last: float  # the same, mean of the last 10 steps
    kl_raw: tuple[float, ...]  # per depth 0..L, held-out, nats
    kl_tuned: tuple[float, ...]
    heldout_positions: int  # masked positions the KL is averaged over
    config: dict = field(default_factory=dict)
    created: float = 0.0  # time.time() when it was trained (a retrained lens is a new one)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> TuneReport:
        d = json.loads(text)
        d["kl_raw"], d["kl_tuned"] = tuple(d["kl_raw"]), tuple(d["kl_tuned"])
        return cls(**d)


# ---------------------------------------------------------------------------------------------- translators and training
def _torch_module():
    class TunedLens(torch.nn.Module):
        """One affine translator per intermediate depth 0..L-1: states (L, M, H) -> W_d h + b_d."""

        def __init__(self, layers: int, hidden: int):
            super().__init__()
            self.n_layers, self.hidden = layers, hidden
            self.weight = torch.nn.Parameter(torch.eye(hidden).repeat(layers, 1, 1))  # (L, H, H), identity
            self.bias = torch.nn.Parameter(torch.zeros(layers, hidden))  # (L, H)

        def forward(self, states):  # (L, M, H) -> (L, M, H)
            return torch.baddbmm(self.bias[:, None, :], states, self.weight.transpose(1, 2))

    return TunedLens


@functools.lru_cache(maxsize=1)
def _tuned_cls():
    return _torch_module()


def TunedLens(layers: int, hidden: int):  # noqa: N802 - a class in all but name (built on first use)
    """A fresh tuned lens of identity translators for a model with ``layers`` layers of width ``hidden``."""
    return _tuned_cls()(layers, hidden)


def _masked_batch(tok, sentences: Sequence[str], max_length: int, mask_prob: float, gen, device: str):
    """core.data.masking.masked_batch on this device: ids (B, T), attention (B, T), rows (M,), cols (M,) masked."""
    ids, attn, _, _, pick = masked_batch(tok, sentences, gen, mask_prob, max_length)
    rows, cols = pick.nonzero(as_tuple=True)
    return ids.to(device), attn.to(device), rows.to(device), cols.to(device)


def _teacher_states(model, ids, attn, rows, cols):
    """(L+1, M, H) at the masked (row, col) pairs of a padded batch, transformers' own forward."""
    out = model.base_model(input_ids=ids, attention_mask=attn, output_hidden_states=True)
    return torch.stack(out.hidden_states)[:, rows, cols]


def _kl_per_depth(model, states, tuned, lin=None):
    """KL(last || lens) per depth 0..L-1 averaged over the M positions: (L,), plus the M count."""
    L = states.shape[0] - 1
    m, h = states.shape[1], states.shape[2]
    with torch.no_grad():
        target = apply_head(model, states[L], lin).float().log_softmax(-1)  # (M, V)
    x = tuned(states[:L]) if tuned is not None else states[:L]
    logp = apply_head(model, x.reshape(L * m, h), lin).float().log_softmax(-1).view(L, m, -1)
    return (target.exp()[None] * (target[None] - logp)).sum(-1).mean(-1)  # (L,)


def measure_kl(
    lm: LoadedModel, tuned=None, sentences: Sequence[str] | None = None, cfg: TuneConfig | None = None, batch: int = 32
) -> tuple[tuple[float, ...], int]:
    """KL(last layer || lens) per depth 0..L (nats, the last is 0), averaged over the masked positions of
    ``sentences`` (default: the held-out split's first cfg.heldout_sentences), masks drawn from cfg.seed.
    Returns (kl per depth, positions). ``tuned`` None measures the raw lens."""
    cfg = cfg or TuneConfig()
    sentences = list(sentences if sentences is not None else corpus_sentences("heldout")[: cfg.heldout_sentences])
    if not sentences:
        raise LensError(msg("lens.no_heldout_sentences"))
    model, tok = lm.model, lm.tokenizer
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    total, count = None, 0
    with torch.inference_mode():
        for i in range(0, len(sentences), batch):
            ids, attn, rows, cols = _masked_batch(
                tok, sentences[i : i + batch], cfg.max_length, cfg.mask_prob, gen, lm.device
            )
            states = _teacher_states(model, ids, attn, rows, cols)
            kl = _kl_per_depth(model, states, tuned) * len(rows)
            total = kl if total is None else total + kl
            count += len(rows)
    assert total is not None  # sentences is not empty (checked above): one batch at least
    per = (total / count).tolist()
    return tuple(float(v) for v in per) + (0.0,), count


def train_tuned_lens(
    lm: LoadedModel,
    cfg: TuneConfig | None = None,
    on_step: Callable[[int, int, float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    sentences: Sequence[str] | None = None,
):
    """Train one affine translator per intermediate depth on the corpus's train split (or ``sentences``).

    Returns (TunedLens, losses per step). ``on_step(step, steps, loss)`` after each step; ``should_stop()`` true
    ends early (what was learnt so far is returned). The model's weights are not changed (its head is frozen while
    the translators learn through it). Raises FillMaskError for a model without an MLM head.
    """
    cfg = cfg or TuneConfig()
    check_mlm(lm)
    model, tok = lm.model, lm.tokenizer
    L, H = n_layers(model), hidden_size(model)
    pool = list(sentences if sentences is not None else corpus_sentences("train"))
    if not pool:
        raise LensError(msg("lens.no_training_sentences"))
    order = random.Random(cfg.seed)  # this run's own streams: never the process-wide RNG (core/train/rng.py)
    gen = torch.Generator().manual_seed(cfg.seed)
    tuned = TunedLens(L, H).to(lm.device)
    opt = torch.optim.Adam(tuned.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10) * max(0.05, 1 - s / cfg.steps))
    frozen = [p for p in model.parameters() if p.requires_grad]
    losses: list[float] = []
    try:
        for p in frozen:  # the head only passes gradients on to the translators
            p.requires_grad_(False)
        for step in range(cfg.steps):
            if should_stop is not None and should_stop():
                break
            batch = [pool[order.randrange(len(pool))] for _ in range(cfg.batch_size)]
            ids, attn, rows, cols = _masked_batch(tok, batch, cfg.max_length, cfg.mask_prob, gen, lm.device)
            with torch.no_grad():
                states = _teacher_states(model, ids, attn, rows, cols)  # (L+1, M, H)
            loss = _kl_per_depth(model, states, tuned).sum()  # each depth's translator has its own loss term
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()) / L)
            if on_step is not None:
                on_step(step + 1, cfg.steps, losses[-1])
    finally:
        for p in frozen:
            p.requires_grad_(True)
    tuned.eval()
    for p in tuned.parameters():
        p.requires_grad_(False)
    return tuned, losses


# ---------------------------------------------------------------------------------------------- storage
def lens_root() -> Path:
    """Where tuned lenses are saved: $ENCODERLAB_LENS_DIR, default <runs>/lens-cache (bounded with the runs)."""
    return artifacts.cache_root("ENCODERLAB_LENS_DIR", "lens-cache")


def model_key(lm: LoadedModel) -> str:
    """The key of the checkpoint's weights the tuned lens is saved under (core.runtime.artifacts.model_key, tagged
    ``f"lens{LENS_FORMAT}"``)."""
    return artifacts.model_key(lm, f"lens{LENS_FORMAT}")


def lens_dir(lm: LoadedModel) -> Path:
    """This model's folder under lens_root() (named by family and key: never by a server path)."""
    return lens_root() / f"{lm.spec.family}-{model_key(lm)}"


_CACHE: OrderedDict[tuple[str, str], tuple[Any, TuneReport, int]] = OrderedDict()  # (lens, report, file version)
_CACHE_LOCK = threading.Lock()


def _forget_all() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


register_cache(__name__, _forget_all)  # not _tuned_cls: a lens made before a reset must stay a TunedLens


def save_tuned(lm: LoadedModel, tuned, report: TuneReport) -> None:
    """Write the translators and their report to lens_dir(lm), whole or not at all."""
    from safetensors.torch import save_file  # lazy: only saving and loading translators needs it

    def fill(tmp: Path) -> None:
        save_file(
            {"weight": tuned.weight.detach().cpu().contiguous(), "bias": tuned.bias.detach().cpu().contiguous()},
            str(tmp / WEIGHTS_FILE),
        )
        (tmp / REPORT_FILE).write_text(report.to_json())

    artifacts.write_folder(lens_dir(lm), fill)
    with _CACHE_LOCK:
        _CACHE.pop((report.key, lm.device), None)


def load_tuned(lm: LoadedModel):
    """(TunedLens, TuneReport) saved for this model, or None when there is none. Raises LensError when the saved
    one is damaged (a file cut short or overwritten: core.runtime.artifacts.damaged_files, or one that does not
    parse); it is set aside first, so the next call finds none and a new one can be trained."""
    key = model_key(lm)
    folder = lens_dir(lm)
    wf, rf = folder / WEIGHTS_FILE, folder / REPORT_FILE
    if not folder.is_dir():
        return None
    try:
        # another process (a job, a Ray replica) may have saved a newer lens since: the cache holds one per version
        version = rf.stat().st_mtime_ns
    except OSError:
        version = -1  # no report: reading it below says the folder is damaged
    with _CACHE_LOCK:
        hit = _CACHE.get((key, lm.device))
        if hit is not None and hit[2] == version:
            _CACHE.move_to_end((key, lm.device))
            return hit[0], hit[1]
    from safetensors.torch import load_file  # lazy: only saving and loading translators needs it

    try:
        bad = artifacts.damaged_files(folder)
        if bad:
            raise ValueError(", ".join(bad))
        report = TuneReport.from_json(rf.read_text())
        w = load_file(str(wf))
        tuned = TunedLens(w["weight"].shape[0], w["weight"].shape[1])
        tuned.load_state_dict(w)
    except artifacts.read_errors() as e:
        artifacts.set_aside(folder)
        with _CACHE_LOCK:
            _CACHE.pop((key, lm.device), None)
        raise LensError(msg("lens.saved_tuned_lens_unreadable", problem=str(e))) from None
    tuned.to(lm.device).eval().requires_grad_(False)
    artifacts.touch(folder)  # in use: the runs' age bound counts from here
    with _CACHE_LOCK:
        _CACHE[(key, lm.device)] = (tuned, report, version)
        while len(_CACHE) > LENS_CACHE:
            _CACHE.popitem(last=False)
    return tuned, report


def tuned_report(lm: LoadedModel) -> TuneReport | None:
    """The saved tuned lens's report for this model, or None. Raises LensError when it is damaged (load_tuned)."""
    found = load_tuned(lm)
    return found[1] if found else None


# ---------------------------------------------------------------------------------------------- training run
def tune(
    lm: LoadedModel,
    cfg: TuneConfig | None = None,
    on_progress: Callable[..., None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    save: bool = True,
) -> tuple[Any, TuneReport]:
    """Train a tuned lens, measure raw vs tuned KL on the held-out split, save it beside the model (``save``).
    ``on_progress(fraction, message, **metrics)``. Returns (TunedLens, TuneReport)."""
    cfg = cfg or TuneConfig()
    t0 = time.perf_counter()

    def step(i: int, n: int, loss: float) -> None:
        if on_progress is not None:
            on_progress(0.9 * i / n, msg("progress.lens.step", step=i, total=n, kl=loss), step=i, kl=loss)

    tuned, losses = train_tuned_lens(lm, cfg, on_step=step, should_stop=should_stop)
    seconds = time.perf_counter() - t0
    if should_stop is not None and should_stop():
        raise JobCancelled()
    if on_progress is not None:
        on_progress(0.92, msg("progress.lens.measuring"))
    kl_raw, n = measure_kl(lm, None, cfg=cfg)
    kl_tuned, _ = measure_kl(lm, tuned, cfg=cfg)
    report = TuneReport(
        key=model_key(lm),
        checkpoint=scrub(lm.spec.checkpoint),
        family=lm.spec.family,
        n_layers=n_layers(lm.model),
        steps=len(losses),
        seconds=round(seconds, 2),
        loss_first=losses[0] if losses else math.nan,
        loss_last=sum(losses[-10:]) / max(1, len(losses[-10:])) if losses else math.nan,
        kl_raw=kl_raw,
        kl_tuned=kl_tuned,
        heldout_positions=n,
        config=asdict(cfg),
        created=time.time(),
    )
    if save:
        save_tuned(lm, tuned, report)
    if on_progress is not None:
        on_progress(1.0, msg("progress.lens.saved"))
    return tuned, report


def tune_job(spec: ModelSpec, cfg: TuneConfig | None = None):
    """A core.runtime.jobs function training and saving a tuned lens for ``spec`` (a fresh copy of the model, loaded in the
    job): a partial of a module-level function over plain data, so it runs in a worker process."""
    return functools.partial(_run_tune_job, spec, cfg or TuneConfig())


def _run_tune_job(spec: ModelSpec, cfg: TuneConfig, ctx) -> TuneReport:
    ctx.progress(0.0, msg("progress.loading_fresh_copy"))
    lm = load(spec, task="mlm")
    try:
        check_mlm(lm)
    except FillMaskError as e:
        raise LensError(carry(e)) from None
    _, report = tune(lm, cfg, on_progress=ctx.progress, should_stop=lambda: ctx.cancelled)
    return report

"""Fine-tuning settings: ``FinetuneConfig`` (every run's settings, checked once), the articles' suggested values, the
out-of-memory ``REMEDIES`` that change a config, and ``FinetuneError``.

What the Fine-tune page, the URL fields and the command line (core.train.finetune_cli) read before a run starts;
the loop itself is core.train.finetune.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace

from core.base.fields import bounded, check_bounds, default_of
from core.base.messages import Problem, msg
from core.base.settings import current as current_settings
from core.models.devices import resolve_device
from core.models.loading import read_config, resolve
from core.registry import CONFIG_DIR, FAMILIES, ModelLoadError
from core.train import common as training

MAX_STEPS_LIMIT = int(os.environ.get("ENCODERLAB_MAX_STEPS", "5000"))
MAX_LENGTH_LIMIT = 512
POOLINGS = ("cls", "mean", "scalar_mix")
TASKS = ("sequence", "token")  # sequence classification (one label per text) or token classification (one per word)
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
# The third article's practice, quoted on the page and checked by FinetuneConfig.advice().
ARTICLE_LR = (2e-5, 5e-5)  # sequence classification (BERT's paper)
ARTICLE_TOKEN_LR = (3e-5, 7e-5)  # sequence labelling (NER, POS)
TOKEN_LR = 5e-5  # the default lr for task "token": the middle of the article's range
SEQUENCE_LR = 3e-5  # the default lr for task "sequence": within ARTICLE_LR
ARTICLE_MIN_LENGTH = 64  # "do not go below 64"
ARTICLE_DROPOUT = (0.1, 0.3)
ARTICLE_PATIENCE = (2, 3)
MAX_DROPOUT = 0.5
HEAD_DROPOUT = 0.1  # EncoderLab's own heads (mean pooling, scalar mix) when FinetuneConfig.dropout is None


OOM_KIND = "finetune.out_of_memory"  # the kind of the FinetuneError a run that ran out of memory ends with


class FinetuneError(Problem, RuntimeError):
    """Training stopped for a reason the user can act on (NaN loss, out of memory, a bad resume).

    ``remedies`` names the entries of ``REMEDIES`` that would change the run's config (out of memory only), so a
    page can offer "restart with ..." through ``apply_remedy``."""

    def __init__(self, message: str, remedies: tuple[str, ...] = ()):
        super().__init__(message)
        self.remedies = tuple(remedies)


@dataclass(frozen=True)
class FinetuneConfig:
    """Everything one run needs besides the data. ``__post_init__`` raises ValueError with the fix."""

    # Numeric settings declare their range once (core.base.fields.bounded): __post_init__, the page's widgets, the URL
    # fields and the command line all read it from here.
    family: str
    checkpoint: str
    # the server's limit (ENCODERLAB_MAX_EPOCHS, lower on the hosted demo), read at each check
    epochs: int = bounded(3, 1, lambda: min(50, current_settings().max_epochs), label="Epochs")
    # > 0 caps the run at this many optimizer steps (overrides epochs)
    max_steps: int = bounded(
        0,
        0,
        MAX_STEPS_LIMIT,
        label="Max steps",
        hint="0 uses epochs. This page is for short fine-tunes; use the command line for long ones",
    )
    # None: 3e-5 for task "sequence", TOKEN_LR (5e-5) for task "token"; the stops are the page's slider
    lr: float | None = bounded(
        None,
        1e-7,
        1e-2,
        kind=float,
        label="Learning rate",
        hint="BERT papers use 2e-5 to 5e-5",
        stops=(1e-5, 2e-5, 3e-5, 5e-5, 7e-5, 1e-4, 3e-4, 1e-3, 3e-3),
    )
    batch_size: int = bounded(16, 1, 512, stops=(4, 8, 16, 32, 64), label="Batch size")
    max_length: int = bounded(
        128, 8, MAX_LENGTH_LIMIT, stops=(32, 64, 128, 256, 512), label="Max length", hint="tokens"
    )
    # Warmup beyond half the run leaves the linear decay too little room; the article's practice is 0.1.
    warmup_ratio: float = bounded(0.1, 0.0, 0.5, step=0.05, label="Warmup ratio", hint="0.1 is usual")
    weight_decay: float = bounded(0.01, 0.0, 0.3, step=0.01, label="Weight decay", hint="0.01 is usual")
    grad_clip: float = bounded(1.0, 0.0, 10.0, step=0.5, label="Gradient clipping", hint="0 turns it off")
    seed: int = bounded(42, 0, 2**31 - 1, label="Seed")
    freeze_embeddings: bool = False
    # freeze the first N encoder layers (more than the model has freezes them all)
    freeze_layers: int = bounded(0, 0, 48, label="Freeze layers")
    # "cls": the family's own head ([CLS]/<s> for sequences, every token for token labelling); "mean": mean over
    # tokens + a linear head (sequences only); "scalar_mix": ELMo's scalar mix, a learned softmax-weighted sum of
    # every hidden state (embeddings included) times a learned gamma, then (sequences) mean over tokens + a head
    pooling: str = "cls"
    # evaluations without improvement before stopping early; 0 = never stop early
    patience: int = bounded(2, 0, 20, label="Patience", hint="0 = no early stopping")
    evals_per_epoch: int = bounded(1, 1, 20, label="Evaluations per epoch")
    length_grouping: bool = True
    device: str = "auto"
    # "auto": bf16 autocast on a GPU that supports it, fp32 on CPU; "bf16" (GPU, or CPU autocast); "fp16" (GPU only)
    precision: str = "auto"
    # A number sets the encoder's hidden dropout and the head's (DROPOUT_KEYS), 0 to 0.5 (the article: 0.1 to 0.3).
    # None keeps each checkpoint's own (ALBERT's is 0, DistilBERT's head 0.2) and 0.1 in EncoderLab's own heads
    # (mean, scalar mix): what every run did before the setting existed.
    dropout: float | None = bounded(
        None,
        0.0,
        MAX_DROPOUT,
        kind=float,
        label="Dropout",
        hint="the article: 0.1 to 0.3",
        step=0.05,
        stops=tuple(round(0.05 * i, 2) for i in range(round(MAX_DROPOUT / 0.05) + 1)),
    )
    task: str = "sequence"
    gradient_checkpointing: bool = False  # recompute activations in backward: less memory, ~30% slower
    # record the data map (task "sequence": core.train.datamap, Dataset Cartography); bench/finetune.py times it off
    data_map: bool = True

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(msg("finetune.task_must_sequence_classify", task=self.task))
        if self.lr is None:
            object.__setattr__(self, "lr", TOKEN_LR if self.task == "token" else SEQUENCE_LR)
        if self.family not in FAMILIES:
            raise ValueError(msg("finetune.unknown_family_choose_one", family=self.family, choices=", ".join(FAMILIES)))
        if not str(self.checkpoint).strip():
            raise ValueError(msg("finetune.no_checkpoint"))
        check_bounds(self)  # every bounded field above: ValueError naming it, its range and the value
        if self.pooling not in POOLINGS:
            raise ValueError(msg("finetune.pooling_must_one_got", choices=", ".join(POOLINGS), pooling=self.pooling))
        if self.task == "token" and self.pooling == "mean":
            raise ValueError(msg("finetune.mean_pooling_makes_one"))
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(msg("finetune.device_must_auto_cpu", device=self.device))
        if self.precision not in PRECISIONS:
            raise ValueError(
                msg("finetune.precision_must_one_got", choices=", ".join(PRECISIONS), precision=self.precision)
            )
        if self.precision == "fp16" and _device_kind(self.device) != "cuda":
            raise ValueError(msg("finetune.fp16_needs_cuda"))
        if not isinstance(self.gradient_checkpointing, bool):
            raise ValueError(
                msg("finetune.gradient_checkpointing_must_true", gradient_checkpointing=self.gradient_checkpointing)
            )

    def advice(self, hidden_size: int | None = None) -> tuple[str, ...]:
        """Plain-English warnings about settings the third article advises against (the page shows them before
        Start). ``hidden_size`` below SMALL_HIDDEN (a mini) silences the lr-too-high note: small models need more."""
        out = []
        if self.max_length < ARTICLE_MIN_LENGTH:
            out.append(
                msg(
                    "finetune.max_length_below_article",
                    max_length=self.max_length,
                    min_length=ARTICLE_MIN_LENGTH,
                )
            )
        lo, hi = ARTICLE_TOKEN_LR if self.task == "token" else ARTICLE_LR
        small = hidden_size is not None and hidden_size < SMALL_HIDDEN
        lr = self.lr
        assert lr is not None  # __post_init__ put the task's default in place of None
        if lr < lo or (lr > hi and not small):
            out.append(
                msg(
                    "finetune.lr_too_high" if lr > hi else "finetune.lr_too_low",
                    lr=lr,
                    lo=lo,
                    hi=hi,
                    what=msg("finetune.what_token" if self.task == "token" else "finetune.what_sequence"),
                )
            )
        dlo, dhi = ARTICLE_DROPOUT
        if self.dropout is not None and not dlo <= self.dropout <= dhi:
            out.append(msg("finetune.dropout_outside_article_s", dropout=self.dropout, low=dlo, high=dhi))
        plo, phi = ARTICLE_PATIENCE
        if self.patience and not plo <= self.patience <= phi:
            out.append(msg("finetune.early_stopping_patience_outside", patience=self.patience, low=plo, high=phi))
        if self.grad_clip == 0:
            out.append(msg("finetune.gradient_clipping_off_article"))
        return tuple(out)


def _device_kind(device: str) -> str:
    return resolve_device(device).kind


# The articles' settings (BERT's paper: lr 2e-5...5e-5, 2-4 epochs, batch 16/32; 10% warmup, weight decay 0.01).
# The articles' practice is FinetuneConfig's own defaults (read from its fields, so they are written once), with
# their learning rate for a sequence task (the field's default is None: it depends on the task).
ARTICLE_SETTINGS = dict(
    {
        n: default_of(FinetuneConfig, n)
        for n in ("epochs", "max_steps", "batch_size", "max_length", "warmup_ratio", "weight_decay", "grad_clip")
    },
    lr=SEQUENCE_LR,
)
# A small model (the bundled minis: 6 layers x 384) with the articles' lr learns nothing in a short CPU run (40
# steps on the drug reviews: every review "positive", +0.0 vs majority). Four times the lr, one epoch and 64
# tokens give a clear result in about a minute: tests/core/test_finetune.py measures it on the page's defaults.
SMALL_MODEL_SETTINGS = dict(ARTICLE_SETTINGS, epochs=1, lr=1e-4, max_length=64)
SMALL_HIDDEN = 512  # hidden sizes below this count as small (the minis: 384; BERT-base: 768)
DEFAULT_DATA = "wordnet"  # six balanced topics (majority 1/6): a short run shows what it learnt


# Token labelling: the article's lr range for sequence labelling, its middle (5e-5) as the default. As for texts,
# a mini learns nothing at it in a short CPU run (bert-mini on the bundled sample, 3 epochs = 45 steps at 5e-5:
# every word "O", entity F1 0.00); 3e-4 for 3 epochs gives a clear result (tests/core/test_finetune.py).
ARTICLE_TOKEN_SETTINGS = dict(ARTICLE_SETTINGS, lr=TOKEN_LR)
SMALL_MODEL_TOKEN_SETTINGS = dict(SMALL_MODEL_SETTINGS, lr=3e-4, epochs=3)


def suggested_settings(hidden_size: int | None, task: str = "sequence") -> dict:
    """The page's starting hyperparameters for a model of this hidden size (None: unknown, the articles')."""
    small = hidden_size is not None and hidden_size < SMALL_HIDDEN
    if task == "token":
        return dict(SMALL_MODEL_TOKEN_SETTINGS if small else ARTICLE_TOKEN_SETTINGS)
    return dict(SMALL_MODEL_SETTINGS if small else ARTICLE_SETTINGS)


def hidden_size_of(checkpoint: str) -> int | None:
    """The checkpoint's hidden size from its config.json (on this machine, or the shipped official one), else None."""
    try:
        path = resolve(checkpoint).path
        shipped = CONFIG_DIR / (checkpoint.replace("/", "__") + ".json")  # an official id not downloaded here
        cfg = read_config(path) if path else json.loads(shipped.read_text())
    except (ModelLoadError, OSError, ValueError):
        return None
    size = cfg.get("hidden_size", cfg.get("dim"))  # DistilBERT calls it dim
    return int(size) if isinstance(size, int) else None


def effective_precision(cfg: FinetuneConfig) -> str:
    """What the run will really use: "fp32", "bf16" or "fp16" ("auto": bf16 on a GPU that has it, else fp32)."""
    kind = _device_kind(cfg.device)
    if cfg.precision == "auto":
        return "bf16" if kind == "cuda" and training.bf16_ok() else "fp32"
    return cfg.precision


def _mixed(cfg: FinetuneConfig) -> FinetuneConfig:
    if effective_precision(cfg) != "fp32":
        return cfg
    on_gpu = _device_kind(cfg.device) == "cuda"
    return replace(cfg, precision="fp16" if on_gpu and not training.bf16_ok() else "bf16")


# The out-of-memory remedies of the third article, in the order it gives them (plus the two every trainer has):
# name -> (label, how it changes a config). A remedy that would not change a config is not offered for it.
# The label is a Message (finetune.remedy.<name>): the page writes it in its language.
REMEDIES: dict[str, tuple[str, Callable[[FinetuneConfig], FinetuneConfig]]] = {
    "gradient_checkpointing": (
        msg("finetune.remedy.gradient_checkpointing"),
        lambda c: replace(c, gradient_checkpointing=True),
    ),
    "mixed_precision": (msg("finetune.remedy.mixed_precision"), _mixed),
    "half_batch": (msg("finetune.remedy.half_batch"), lambda c: replace(c, batch_size=max(1, c.batch_size // 2))),
    "max_length_64": (
        msg("finetune.remedy.max_length_64"),
        lambda c: replace(c, max_length=max(min(c.max_length, ARTICLE_MIN_LENGTH), c.max_length // 2)),
    ),
    "freeze_embeddings": (msg("finetune.remedy.freeze_embeddings"), lambda c: replace(c, freeze_embeddings=True)),
}


def apply_remedy(cfg: FinetuneConfig, name: str) -> FinetuneConfig:
    """``cfg`` with one of ``REMEDIES`` applied. Raises ValueError for an unknown name."""
    if name not in REMEDIES:
        raise ValueError(msg("finetune.unknown_remedy_choose_one", name=name, choices=", ".join(REMEDIES)))
    return REMEDIES[name][1](cfg)


def remedies_for(cfg: FinetuneConfig) -> tuple[str, ...]:
    """The names in ``REMEDIES`` that would change this config (what an out-of-memory error offers)."""
    return tuple(n for n in REMEDIES if apply_remedy(cfg, n) != cfg)

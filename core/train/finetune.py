"""Short fine-tunes for text classification: one linear, step-commented training function on `accelerate`.

The same ``train`` runs on CPU, on one GPU (bf16 autocast) and on several processes under ``accelerate launch``
(``accelerate launch --multi_gpu --num_processes 2 -m core.train.finetune ... --device cpu`` runs two CPU processes
over gloo; accelerate's ``--cpu`` flag alone starts only one). It loads a fresh copy of the checkpoint through
``core.models.loading.load`` (never the app's cached model), pads each batch only to its longest row (through the
tokenizer) and groups rows of similar length into batches, uses AdamW with no decay on biases and LayerNorm
weights, linear warmup and decay, gradient clipping, evaluates on the held-out split, stops early, checkpoints
every epoch and resumes. Padding, parameter groups, out-of-memory detection, the Accelerator and checkpoints are
core.train.common's, shared with pretraining.

Command line::

    python -m core.train.finetune --family bert --checkpoint /path/to/model --data drugreview --epochs 2 --out runs/x
"""
from __future__ import annotations

import argparse
import io
import json
import math
import os
import random
import shutil
import time
import zipfile
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from core import registry
from core.data.datasets_local import BUNDLED, DataError, LabelledData, Split, load_bundled
from core.base.settings import current as current_settings
from core.base.fields import add_argument, bounded, check_bounds, default_of
from core.train.memory import drop_frames
from core.models.loading import BUILD_LOCK, ModelSpec, load
from core.registry import FAMILIES, ModelLoadError
from core.models.devices import resolve_device
from core.train import common as training
from core.train.common import is_oom  # noqa: F401 - core.train.finetune.is_oom, for callers that knew it here

MAX_STEPS_LIMIT = int(os.environ.get("ENCODERLAB_MAX_STEPS", "5000"))
MAX_LENGTH_LIMIT = 512
META_FILE = "encoderlab_finetune.json"
HEAD_FILE = "pooling_head.safetensors"
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


class FinetuneError(RuntimeError):
    """Training stopped for a reason the user can act on (NaN loss, out of memory, a bad resume).

    ``remedies`` names the entries of ``REMEDIES`` that would change the run's config (out of memory only), so a
    page can offer "restart with ..." through ``apply_remedy``."""

    def __init__(self, message: str, remedies: tuple[str, ...] = ()):
        super().__init__(message)
        self.remedies = tuple(remedies)


# ---------------------------------------------------------------------------------------------- config
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
    max_steps: int = bounded(0, 0, MAX_STEPS_LIMIT, label="Max steps", hint="0 uses epochs. This page is for short "
                             "fine-tunes; use the command line for long ones")
    # None: 3e-5 for task "sequence", TOKEN_LR (5e-5) for task "token"; the stops are the page's slider
    lr: float | None = bounded(None, 1e-7, 1e-2, kind=float, label="Learning rate", hint="BERT papers use 2e-5 to 5e-5",
                               stops=(1e-5, 2e-5, 3e-5, 5e-5, 7e-5, 1e-4, 3e-4, 1e-3, 3e-3))
    batch_size: int = bounded(16, 1, 512, stops=(4, 8, 16, 32, 64), label="Batch size")
    max_length: int = bounded(128, 8, MAX_LENGTH_LIMIT, stops=(32, 64, 128, 256, 512), label="Max length",
                              hint="tokens")
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
    dropout: float | None = bounded(None, 0.0, MAX_DROPOUT, kind=float, label="Dropout", hint="the article: 0.1 to 0.3",
                                    step=0.05, stops=tuple(round(0.05 * i, 2) for i in range(round(MAX_DROPOUT / 0.05) + 1)))
    task: str = "sequence"
    gradient_checkpointing: bool = False  # recompute activations in backward: less memory, ~30% slower

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"Task must be 'sequence' (classify whole texts) or 'token' (label every word), "
                             f"got {self.task!r}.")
        if self.lr is None:
            object.__setattr__(self, "lr", TOKEN_LR if self.task == "token" else SEQUENCE_LR)
        if self.family not in FAMILIES:
            raise ValueError(f"Unknown family {self.family!r}: choose one of {', '.join(FAMILIES)}.")
        if not str(self.checkpoint).strip():
            raise ValueError("No checkpoint: pick one in the sidebar or give a local model folder.")
        check_bounds(self)  # every bounded field above: ValueError naming it, its range and the value
        if self.pooling not in POOLINGS:
            raise ValueError(f"Pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}.")
        if self.task == "token" and self.pooling == "mean":
            raise ValueError("Mean pooling makes one vector per text, but token classification labels every word. "
                             "Choose pooling 'cls' (the family's token head) or 'scalar_mix'.")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"Device must be auto, cpu or cuda, got {self.device!r}.")
        if self.precision not in PRECISIONS:
            raise ValueError(f"Precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}.")
        if self.precision == "fp16" and _device_kind(self.device) != "cuda":
            raise ValueError("fp16 mixed precision needs a CUDA GPU (it relies on a gradient scaler and fp16 kernels); "
                             "this run is on the CPU. Choose 'bf16' (CPU autocast) or 'fp32'.")
        if not isinstance(self.gradient_checkpointing, bool):
            raise ValueError(f"Gradient checkpointing must be True or False, got {self.gradient_checkpointing!r}.")

    def advice(self, hidden_size: int | None = None) -> tuple[str, ...]:
        """Plain-English warnings about settings the third article advises against (the page shows them before
        Start). ``hidden_size`` below SMALL_HIDDEN (a mini) silences the lr-too-high note: small models need more."""
        out = []
        if self.max_length < ARTICLE_MIN_LENGTH:
            out.append(f"Max length {self.max_length} is below {ARTICLE_MIN_LENGTH}. The article: shorten "
                       f"max_seq_length to save memory, \"but do not go below {ARTICLE_MIN_LENGTH}\": longer texts "
                       "are cut off and lose the context the model needs.")
        lo, hi = ARTICLE_TOKEN_LR if self.task == "token" else ARTICLE_LR
        what = "sequence labelling" if self.task == "token" else "sequence classification"
        small = hidden_size is not None and hidden_size < SMALL_HIDDEN
        if self.lr < lo or (self.lr > hi and not small):
            out.append(f"Learning rate {self.lr:.0e} is outside the article's {lo:.0e} to {hi:.0e} for {what}. "
                       + ("Too high a rate can make the loss oscillate or diverge." if self.lr > hi else
                          "Too low a rate learns little in a short run."))
        dlo, dhi = ARTICLE_DROPOUT
        if self.dropout is not None and not dlo <= self.dropout <= dhi:
            out.append(f"Dropout {self.dropout:g} is outside the article's {dlo:g} to {dhi:g}.")
        plo, phi = ARTICLE_PATIENCE
        if self.patience and not plo <= self.patience <= phi:
            out.append(f"Early-stopping patience {self.patience} is outside the article's {plo} to {phi} evaluations.")
        if self.grad_clip == 0:
            out.append("Gradient clipping is off. The article clips gradients (1.0) when the loss oscillates.")
        return tuple(out)


def _device_kind(device: str) -> str:
    return resolve_device(device).kind


# The articles' settings (BERT's paper: lr 2e-5...5e-5, 2-4 epochs, batch 16/32; 10% warmup, weight decay 0.01).
# The articles' practice is FinetuneConfig's own defaults (read from its fields, so they are written once), with
# their learning rate for a sequence task (the field's default is None: it depends on the task).
ARTICLE_SETTINGS = dict({n: default_of(FinetuneConfig, n) for n in ("epochs", "max_steps", "batch_size", "max_length",
                                                                    "warmup_ratio", "weight_decay", "grad_clip")},
                        lr=SEQUENCE_LR)
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
    from core.models.loading import read_config, resolve
    from core.registry import CONFIG_DIR

    try:
        path = resolve(checkpoint).path
        shipped = CONFIG_DIR / (checkpoint.replace("/", "__") + ".json")  # an official id not downloaded here
        cfg = read_config(path) if path else json.loads(shipped.read_text())
    except (ModelLoadError, OSError, ValueError):
        return None
    size = cfg.get("hidden_size", cfg.get("dim"))  # DistilBERT calls it dim
    return int(size) if isinstance(size, int) else None


# ---------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class StepInfo:
    """What ``on_step`` receives: one optimizer step ("train") or one evaluation ("eval")."""

    kind: str
    step: int
    total_steps: int
    epoch: float
    loss: float | None = None
    lr: float | None = None
    samples_per_s: float | None = None
    eta_s: float | None = None
    eval_accuracy: float | None = None
    eval_loss: float | None = None
    eval_f1: float | None = None  # task "token": held-out entity F1 (seqeval), the score early stopping follows

    @property
    def fraction(self) -> float:
        return self.step / max(1, self.total_steps)

    def message(self, with_eta: bool = True) -> str:
        """One status line; ``with_eta=False`` where the caller shows its own estimate (the app's job panel)."""
        if self.kind == "eval":
            f1 = "" if self.eval_f1 is None else f" · entity F1 {self.eval_f1:.3f}"
            what = "token accuracy" if self.eval_f1 is not None else "accuracy"
            return (f"step {self.step}/{self.total_steps} · epoch {self.epoch:.2f} · held-out {what} "
                    f"{self.eval_accuracy:.3f}{f1}")
        eta = "" if self.eta_s is None or not with_eta else f" · ETA {self.eta_s:,.0f}s"
        return (f"step {self.step}/{self.total_steps} · epoch {self.epoch:.2f} · loss {self.loss:.4f} · "
                f"{self.samples_per_s:,.1f} samples/s{eta}")

    def metrics(self) -> dict[str, float]:
        keys = ("step", "epoch", "loss", "lr", "samples_per_s") if self.kind == "train" else \
            ("step", "epoch", "eval_accuracy", "eval_loss") + (("eval_f1",) if self.eval_f1 is not None else ())
        return {k: getattr(self, k) for k in keys}


@dataclass(frozen=True)
class FinetuneResult:
    """A finished run: metrics on the held-out split, its curves, and where the model folder is."""

    config: FinetuneConfig
    data_name: str
    label_names: tuple[str, ...]
    model_dir: str
    device: str
    precision: str
    steps: int
    epochs_done: float
    stop_reason: str  # "finished", "early stopping", "max steps"
    train_seconds: float
    samples_per_s: float
    params_total: int
    params_trainable: int
    accuracy: float
    macro_f1: float
    majority_rate: float
    best_step: int
    confusion: np.ndarray  # (true, predicted) counts
    history: tuple[dict, ...]  # train steps: step, epoch, loss, lr, samples_per_s
    evals: tuple[dict, ...]  # evaluations: step, epoch, eval_accuracy, eval_loss
    test_texts: tuple[str, ...]
    test_labels: np.ndarray  # (n,)
    test_probs: np.ndarray  # (n, classes)
    padding_saved: float  # share of pad tokens avoided against padding every batch to max_length
    # pooling "scalar_mix": the learned softmax weights over (embeddings, layer 1..L), summing to 1
    layer_weights: tuple[float, ...] | None = None
    layer_gamma: float | None = None
    # task "token": entity-level P/R/F1 (seqeval), token accuracy, per-label table, majority-tag baseline. Then
    # accuracy is the token accuracy, macro_f1 the tag-level macro-F1, majority_rate the majority tag's token
    # accuracy, and test_texts/test_labels/test_probs/confusion are per word (the first piece of every word).
    token_metrics: Any = None  # core.data.token_data.TokenMetrics

    @property
    def task(self) -> str:
        return self.config.task

    @property
    def test_preds(self) -> np.ndarray:
        return self.test_probs.argmax(-1)

    def worst_errors(self, n: int = 10) -> list[dict]:
        """Wrong held-out predictions, most confident first."""
        preds = self.test_preds
        wrong = np.flatnonzero(preds != self.test_labels)
        order = wrong[np.argsort(-self.test_probs[wrong, preds[wrong]])][:n]
        return [dict(text=self.test_texts[i], true=self.label_names[self.test_labels[i]],
                     predicted=self.label_names[preds[i]], confidence=float(self.test_probs[i, preds[i]]),
                     p_true=float(self.test_probs[i, self.test_labels[i]])) for i in order]


# ---------------------------------------------------------------------------------------------- data plumbing
@dataclass
class _Encoded:
    ids: list[list[int]]
    extra: dict[str, list[list[int]]]  # token_type_ids where the family has them
    labels: list[int]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> int:  # the DataLoader hands indices to the collate function
        return i


def _encode(tokenizer, split: Split, max_length: int) -> _Encoded:
    enc = tokenizer(list(split.texts), list(split.texts_b) if split.texts_b is not None else None,
                    truncation=True, max_length=max_length)
    extra = {k: enc[k] for k in ("token_type_ids",) if k in enc and k in tokenizer.model_input_names}
    return _Encoded(enc["input_ids"], extra, list(split.labels))


@dataclass
class _EncodedWords(_Encoded):
    """Token classification: ``labels`` per piece (the word's tag id on its first piece, -100 elsewhere)."""

    n_words: list[int] = field(default_factory=list)  # words that fit in max_length, per sentence


def _encode_words(tokenizer, split, label2id: dict[str, int], max_length: int) -> _EncodedWords:
    from core.data.token_data import align_batch

    rows = align_batch(tokenizer, split.words, split.tags, label2id, max_length)
    extra = {"token_type_ids": [r["token_type_ids"] for r in rows]} if rows and "token_type_ids" in rows[0] else {}
    return _EncodedWords([r["input_ids"] for r in rows], extra, [r["labels"] for r in rows],
                         [r["n_words"] for r in rows])


class _SequenceTask:
    """What sequence classification adds to the shared loop: one label per row, a (batch, classes) logit."""

    name, head = "sequence", "seqcls"

    def __init__(self, data):
        from core.data.datasets_local import LabelledData

        if not isinstance(data, LabelledData):
            raise DataError("Sequence classification needs labelled texts (a table or a bundled set); token-labelled "
                            "data goes with task 'token'.")
        self.data = data

    def tokenizer(self, tokenizer):
        return tokenizer

    def encode(self, tokenizer, split, max_length: int) -> _Encoded:
        return _encode(tokenizer, split, max_length)

    def collator(self, enc: _Encoded, tokenizer):
        import torch
        from transformers import DataCollatorWithPadding

        # transformers' collator pads input_ids/attention_mask/token_type_ids through tokenizer.pad to the batch's
        # longest row (dynamic padding); labels and our row indices pass through as (batch,) tensors.
        pad = DataCollatorWithPadding(tokenizer, return_tensors="pt")

        def collate(indices: list[int]) -> dict[str, Any]:
            feats = [{"input_ids": enc.ids[i], **{k: v[i] for k, v in enc.extra.items()}, "labels": enc.labels[i]}
                     for i in indices]
            return {**pad(feats), "idx": torch.tensor(indices)}
        return collate

    def units(self, probs_row, labels_row):
        """The scored units of one evaluated row: its class probabilities, shape (1, classes)."""
        return probs_row[None]

    def targets(self, enc: _Encoded) -> np.ndarray:
        return np.asarray(enc.labels)

    def score(self, probs: np.ndarray, enc: _Encoded) -> tuple[float, dict]:
        """The early-stopping score (held-out accuracy) and extra eval fields."""
        return float((probs.argmax(-1) == self.targets(enc)).mean()), {}


class _TokenTask(_SequenceTask):
    """Token classification: labels per piece (-100 off first pieces), a (batch, pieces, tags) logit, scores per
    word; the early-stopping score is the entity F1 (token accuracy is mostly the O tag)."""

    name, head = "token", "tokcls"

    def __init__(self, data):
        from core.data.token_data import TokenData

        if not isinstance(data, TokenData):
            raise DataError("Token classification needs word-labelled data (CoNLL/IOB or JSONL, or the bundled "
                            "sample); labelled texts go with task 'sequence'.")
        self.data = data

    def tokenizer(self, tokenizer):
        from core.data.token_data import words_tokenizer

        return words_tokenizer(tokenizer)

    def encode(self, tokenizer, split, max_length: int) -> _EncodedWords:
        return _encode_words(tokenizer, split, self.data.label2id, max_length)

    def collator(self, enc: _EncodedWords, tokenizer):
        import torch
        from transformers import DataCollatorForTokenClassification

        # transformers' collator pads input_ids/attention_mask (tokenizer.pad) and the labels with -100, to the
        # batch's longest row: the same dynamic padding as the sequence collator. We add the row indices.
        pad = DataCollatorForTokenClassification(tokenizer, label_pad_token_id=-100, return_tensors="pt")

        def collate(indices: list[int]) -> dict[str, Any]:
            feats = [{"input_ids": enc.ids[i], "labels": enc.labels[i], **{k: v[i] for k, v in enc.extra.items()}}
                     for i in indices]
            return {**pad(feats), "idx": torch.tensor(indices)}
        return collate

    def units(self, probs_row, labels_row):
        return probs_row[labels_row != -100]  # (words, tags): the first piece of every word

    def targets(self, enc: _EncodedWords) -> np.ndarray:
        return np.asarray([y for row in enc.labels for y in row if y != -100], dtype=np.int64)

    def tag_lists(self, flat_ids: np.ndarray, enc: _EncodedWords) -> list[list[str]]:
        names, out, i = self.data.label_names, [], 0
        for n in enc.n_words:
            out.append([names[j] for j in flat_ids[i:i + n]])
            i += n
        return out

    def score(self, probs: np.ndarray, enc: _EncodedWords) -> tuple[float, dict]:
        import warnings

        from seqeval.metrics import f1_score

        gold = self.tag_lists(self.targets(enc), enc)
        pred = self.tag_lists(probs.argmax(-1), enc)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tags not in IOB form: noted when the data was read
            f1 = float(f1_score(gold, pred, zero_division=0))
        return f1, {"eval_f1": f1}


def _task(cfg, data) -> _SequenceTask:
    return _TokenTask(data) if cfg.task == "token" else _SequenceTask(data)


class LengthGroupedBatches:
    """Batches of indices: shuffle, cut into mega-batches of 50 batches, sort each by length, then shuffle the
    batches. Rows of similar length share a batch, so dynamic padding adds few pad tokens (HF's
    LengthGroupedSampler idea). ``shuffle=False`` gives sorted batches (evaluation)."""

    def __init__(self, lengths: list[int], batch_size: int, seed: int, shuffle: bool = True, group: bool = True):
        self.lengths, self.batch_size, self.seed, self.shuffle, self.group = lengths, batch_size, seed, shuffle, group
        self.epoch = 0
        self.drop_last = False

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)

    def __iter__(self):
        n, bs = len(self.lengths), self.batch_size
        rng = random.Random(self.seed + self.epoch)
        idx = list(range(n))
        if not self.shuffle:
            if self.group:
                idx.sort(key=lambda i: -self.lengths[i])
            yield from (idx[i:i + bs] for i in range(0, n, bs))
            return
        rng.shuffle(idx)
        if self.group:
            mega = bs * 50
            idx = [i for m in range(0, n, mega) for i in sorted(idx[m:m + mega], key=lambda i: -self.lengths[i])]
        batches = [idx[i:i + bs] for i in range(0, n, bs)]
        if self.group:
            rng.shuffle(batches)
        yield from batches


def padding_saved(lengths: list[int], batch_size: int, max_length: int, seed: int = 0, group: bool = True) -> float:
    """Share of padded tokens avoided by dynamic padding (+ length grouping) against padding to max_length."""
    fixed = len(lengths) * max_length
    s = LengthGroupedBatches(lengths, batch_size, seed, shuffle=True, group=group)
    dynamic = sum(len(b) * max(lengths[i] for i in b) for b in s)
    return 1.0 - dynamic / fixed


# ---------------------------------------------------------------------------------------------- model plumbing
def _torch_nn():
    import torch
    from torch import nn

    return torch, nn


def _mean_pool_classifier(backbone, num_labels: int, dropout: float):
    """The encoder, mean over real tokens, dropout, one linear layer. Returns an nn.Module with ``.logits`` output."""
    torch, nn = _torch_nn()
    from transformers.modeling_outputs import SequenceClassifierOutput

    class MeanPoolClassifier(nn.Module):
        # The backbone comes in as an argument, not from this function's closure: a class is freed only by a full
        # garbage collection, and a closure cell would keep the backbone (and its GPU memory) alive with it.
        def __init__(self, backbone):
            super().__init__()
            self.backbone = backbone
            hidden = getattr(backbone.config, "hidden_size", None) or backbone.config.dim
            self.dropout = nn.Dropout(dropout)
            self.classifier = nn.Linear(hidden, num_labels)

        def forward(self, input_ids, attention_mask, **kw):
            h = self.backbone(input_ids=input_ids, attention_mask=attention_mask, **kw).last_hidden_state  # (b, t, H)
            m = attention_mask.unsqueeze(-1).to(h.dtype)  # (b, t, 1)
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)  # (b, H)
            return SequenceClassifierOutput(logits=self.classifier(self.dropout(pooled)))

    return MeanPoolClassifier(backbone)


def _scalar_mix_model(backbone, num_labels: int, dropout: float, per_token: bool):
    """ELMo's scalar mix (Peters et al., 2018): ``gamma * sum_j softmax(s)_j h_j`` over every hidden state
    (embeddings and each layer), then per token (token labelling) or mean over real tokens (sequences), dropout
    and one linear layer. ``layer_weights()`` gives softmax(s). s starts at 0 (an even mix), gamma at 1."""
    torch, nn = _torch_nn()
    from transformers.modeling_outputs import SequenceClassifierOutput, TokenClassifierOutput

    class ScalarMixClassifier(nn.Module):
        def __init__(self, backbone):  # an argument, not the closure's: see _mean_pool_classifier
            super().__init__()
            self.backbone = backbone
            cfg = backbone.config
            hidden = getattr(cfg, "hidden_size", None) or cfg.dim
            layers = getattr(cfg, "num_hidden_layers", None) or cfg.n_layers
            self.per_token = per_token
            self.mix = nn.Parameter(torch.zeros(layers + 1))  # (L+1,): embeddings, layer 1..L
            self.gamma = nn.Parameter(torch.ones(()))
            self.dropout = nn.Dropout(dropout)
            self.classifier = nn.Linear(hidden, num_labels)

        def layer_weights(self):
            return torch.softmax(self.mix.detach().float(), 0)

        def forward(self, input_ids, attention_mask, **kw):
            hs = self.backbone(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                               **kw).hidden_states  # L+1 tensors (b, t, H)
            w = torch.softmax(self.mix, 0).to(hs[0].dtype)
            h = self.gamma * torch.einsum("l,lbth->bth", w, torch.stack(hs))  # (b, t, H)
            if self.per_token:
                return TokenClassifierOutput(logits=self.classifier(self.dropout(h)))  # (b, t, labels)
            m = attention_mask.unsqueeze(-1).to(h.dtype)  # (b, t, 1)
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)  # (b, H)
            return SequenceClassifierOutput(logits=self.classifier(self.dropout(pooled)))

    return ScalarMixClassifier(backbone)


# The scalar mix has L + 2 numbers; at the encoder's learning rate (3e-5) they would not move visibly in a short
# run (Adam moves each by about lr per step), so they learn this many times faster.
MIX_LR_SCALE = 100.0
MIX_PARAMS = ("mix", "gamma")  # the scalar mix's own parameters (ScalarMixClassifier)


def _encoder_layers(base_model):
    """The list of per-layer modules of the encoder, or None when layers share weights (ALBERT)."""
    for path in ("encoder.layer", "transformer.layer"):
        obj = base_model
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if obj is not None:
            return obj
    return None


def _freeze(model, cfg: FinetuneConfig) -> None:
    base = model.backbone if hasattr(model, "backbone") else model.base_model
    if cfg.freeze_embeddings:
        for p in base.embeddings.parameters():
            p.requires_grad = False
    if cfg.freeze_layers:
        layers = _encoder_layers(base)
        if layers is None:
            raise ValueError(f"{registry.family(cfg.family).label} shares one layer's weights across its whole depth, so "
                             "freezing the first N layers would freeze all of them. Set 'freeze first N layers' to 0 "
                             "(you can still freeze the embeddings).")
        if cfg.freeze_layers >= len(layers):
            raise ValueError(f"This model has {len(layers)} layers; freezing {cfg.freeze_layers} would leave only "
                             f"the head to train. Choose fewer than {len(layers)}.")
        for layer in layers[:cfg.freeze_layers]:
            for p in layer.parameters():
                p.requires_grad = False


def _param_groups(model, weight_decay: float, lr: float) -> list[dict]:
    """core.train.common's groups: no decay on biases and LayerNorm weights; the scalar mix's weights and gamma (1-D
    and 0-D, so no decay either) at MIX_LR_SCALE times the encoder's small lr."""
    return training.param_groups(model, lr, weight_decay, head_lr_mult=MIX_LR_SCALE, head_prefixes=MIX_PARAMS)


def _load_fresh(cfg: FinetuneConfig, data):
    """A new copy of the checkpoint with a classification head of the right size (never a cached model): the
    family's own head ("cls": *ForSequenceClassification, or *ForTokenClassification for task "token"), or the
    base model under a mean-pooling or scalar-mix head. ``cfg.dropout`` (when set) goes to the encoder and the head."""
    id2label = dict(enumerate(data.label_names))
    spec = ModelSpec(cfg.family, cfg.checkpoint, "cpu")  # accelerate moves it to its device
    dropout = {} if cfg.dropout is None else dict.fromkeys(registry.family(cfg.family).dropout_keys, float(cfg.dropout))
    head_dropout = HEAD_DROPOUT if cfg.dropout is None else float(cfg.dropout)
    if cfg.pooling == "cls":
        lm = load(spec, "tokcls" if cfg.task == "token" else "seqcls",
                  model_kwargs=dict(num_labels=data.num_labels, id2label=id2label,
                                    label2id={v: k for k, v in id2label.items()}, ignore_mismatched_sizes=True,
                                    **dropout))
        model = lm.model
    else:
        lm = load(spec, "base", model_kwargs=dropout)
        # Mean pooling and the scalar mix never read the base model's pooler, so it would get no gradient, and DDP
        # under `accelerate launch` raises at step 2 for a parameter that took no part in the loss. Dropped here.
        if getattr(lm.model, "pooler", None) is not None:
            lm.model.pooler = None
        lm.model.config.id2label, lm.model.config.label2id = id2label, {v: k for k, v in id2label.items()}
        with BUILD_LOCK:  # its fresh nn.Linear must not be built while another thread's from_pretrained runs
            if cfg.pooling == "mean":
                model = _mean_pool_classifier(lm.model, data.num_labels, head_dropout)
            else:
                model = _scalar_mix_model(lm.model, data.num_labels, head_dropout, per_token=cfg.task == "token")
    if cfg.gradient_checkpointing:
        hf = model.backbone if hasattr(model, "backbone") else model
        if not getattr(hf, "supports_gradient_checkpointing", False):
            raise ValueError(f"{type(hf).__name__} does not support gradient checkpointing; turn it off.")
        # use_reentrant=False: torch's recommended form; it also keeps gradients flowing when the embeddings are
        # frozen (the reentrant form needs an input that requires grad).
        hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    torch, _ = _torch_nn()
    bad = [n for n, p in model.named_parameters() if not torch.isfinite(p).all()]
    if bad:
        raise FinetuneError(f"The checkpoint holds NaN or infinite weights ({bad[0]}{' and more' if len(bad) > 1 else ''}), "
                            "so every loss would be NaN. Pick another checkpoint.")
    return model, lm.tokenizer


@contextmanager
def _accelerator(cfg: FinetuneConfig):
    """An Accelerator for this run (core.train.common.accelerator: one device/precision setting per process, so a run
    with other settings than one in progress raises FinetuneError) and the precision it runs in."""
    precision = effective_precision(cfg)  # bf16 on the CPU is torch's CPU autocast; fp16 is refused there (config)
    mixed = {"fp32": "no", "bf16": "bf16", "fp16": "fp16"}[precision]
    with training.accelerator(_device_kind(cfg.device), mixed, FinetuneError) as acc:
        yield acc, precision


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
REMEDIES: dict[str, tuple[str, Callable[[FinetuneConfig], FinetuneConfig]]] = {
    "gradient_checkpointing": ("gradient checkpointing",
                               lambda c: replace(c, gradient_checkpointing=True)),
    "mixed_precision": ("mixed precision (bf16, or fp16 on a GPU without bf16)", _mixed),
    "half_batch": ("half the batch size", lambda c: replace(c, batch_size=max(1, c.batch_size // 2))),
    "max_length_64": ("a shorter max length (halved, not under 64)",
                      lambda c: replace(c, max_length=max(min(c.max_length, ARTICLE_MIN_LENGTH),
                                                          c.max_length // 2))),
    "freeze_embeddings": ("freeze the embeddings", lambda c: replace(c, freeze_embeddings=True)),
}


def apply_remedy(cfg: FinetuneConfig, name: str) -> FinetuneConfig:
    """``cfg`` with one of ``REMEDIES`` applied. Raises ValueError for an unknown name."""
    if name not in REMEDIES:
        raise ValueError(f"Unknown remedy {name!r}: choose one of {', '.join(REMEDIES)}.")
    return REMEDIES[name][1](cfg)


def remedies_for(cfg: FinetuneConfig) -> tuple[str, ...]:
    """The names in ``REMEDIES`` that would change this config (what an out-of-memory error offers)."""
    return tuple(n for n in REMEDIES if apply_remedy(cfg, n) != cfg)


def _oom_message(cfg: FinetuneConfig, device: str) -> str:
    names = remedies_for(cfg)
    offer = "; ".join(REMEDIES[n][0] for n in names) or "a smaller checkpoint"
    return (f"Out of memory on {device} with batch size {cfg.batch_size} and max length {cfg.max_length}. "
            f"Try batch size {max(1, cfg.batch_size // 2)} or max length {max(8, cfg.max_length // 2)}, freeze the "
            "embeddings or the first layers, or pick a smaller checkpoint (DistilBERT, ALBERT, a bundled mini). "
            f"The article's remedies that would change this run: {offer}.")


# ---------------------------------------------------------------------------------------------- training
def train(cfg: FinetuneConfig, data, out_dir: str | Path,
          on_step: Callable[[StepInfo], None] | None = None, should_stop: Callable[[], bool] | None = None,
          resume: bool = False) -> FinetuneResult:
    """Fine-tune ``cfg.checkpoint`` on ``data.train``; evaluate on ``data.test``; save to ``out_dir/model``.

    ``data`` is a core.data.datasets_local.LabelledData for task "sequence", a core.data.token_data.TokenData for task
    "token"; the two differ only in small adapters (_SequenceTask, _TokenTask: encoding, collation, what a
    held-out row scores), the loop below is one.

    ``on_step`` is called after every optimizer step and every evaluation (the UI turns it into a progress
    bar and live curves); if it raises (e.g. core.runtime.jobs.JobCancelled), or ``should_stop()`` turns true, the
    state is checkpointed to ``out_dir/checkpoint`` first so ``resume=True`` continues from that step.
    Raises ValueError/ModelLoadError/DataError for bad settings, FinetuneError for NaN loss, out of memory
    or a checkpoint that does not match, and core.runtime.jobs.JobCancelled when stopped from outside.
    """
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader
    from transformers import get_linear_schedule_with_warmup

    from core.runtime.jobs import JobCancelled

    out = Path(out_dir)
    ckpt_dir, model_dir = out / "checkpoint", out / "model"
    task = _task(cfg, data)
    if len(data.train) < 2 or len(data.test) < 1:
        raise DataError("The data needs at least two training rows and one held-out row.")

    # 1. One Accelerator: picks the device (CPU, GPU, or this process's share under `accelerate launch`),
    #    turns on bf16/fp16 autocast as asked (bf16 on GPU by default), and shards the batches across processes.
    with _accelerator(cfg) as (acc, precision):
        from core.train.rng import RunRNG

        # The run's own random stream (head init, dropout), not the process-wide seed other sessions share.
        rng = RunRNG(cfg.seed, cuda=acc.device.type == "cuda")

        # 2. A fresh copy of the model with a head for our labels, frozen where asked.
        with rng.active():
            model, tokenizer = _load_fresh(cfg, data)
        _freeze(model, cfg)
        params_total = sum(p.numel() for p in model.parameters())
        params_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)

        # 3. Tokenize once, unpadded; batches are padded to their own longest row, from length-grouped indices.
        #    (Token task: pre-split words, tags on first pieces, -100 elsewhere.)
        word_tok = task.tokenizer(tokenizer)
        train_enc = task.encode(word_tok, data.train, cfg.max_length)
        test_enc = task.encode(word_tok, data.test, cfg.max_length)
        train_lengths = [len(x) for x in train_enc.ids]
        sampler = LengthGroupedBatches(train_lengths, cfg.batch_size, cfg.seed, group=cfg.length_grouping)
        # Loaders get their own generator: drawing their base seed from the global RNG would shift dropout masks
        # after a resume.
        train_dl = DataLoader(train_enc, batch_sampler=sampler, collate_fn=task.collator(train_enc, word_tok),
                              generator=torch.Generator().manual_seed(cfg.seed))
        test_dl = DataLoader(test_enc, batch_sampler=LengthGroupedBatches([len(x) for x in test_enc.ids],
                                                                          cfg.batch_size * 2, 0, shuffle=False),
                             collate_fn=task.collator(test_enc, word_tok),
                             generator=torch.Generator().manual_seed(cfg.seed))

        # 4. AdamW with no decay on biases/LayerNorm, then let accelerate place model, optimizer and loaders.
        # fused=True: one kernel per step for all parameters, as Trainer's default optimizer ("adamw_torch_fused");
        # the per-parameter loop took a quarter of a small model's step on a CPU (bench/finetune.py, token part).
        optimizer = torch.optim.AdamW(_param_groups(model, cfg.weight_decay, cfg.lr), lr=cfg.lr, fused=True)
        model, optimizer, train_dl, test_dl = acc.prepare(model, optimizer, train_dl, test_dl)

        # 5. Step budget (per process, after sharding) and the linear warmup + linear decay schedule.
        steps_per_epoch = len(train_dl)
        total_steps = steps_per_epoch * cfg.epochs
        stop_reason = "finished"
        if cfg.max_steps and cfg.max_steps < total_steps:
            total_steps, stop_reason = cfg.max_steps, "max steps"
        warmup = math.ceil(cfg.warmup_ratio * total_steps)
        scheduler = get_linear_schedule_with_warmup(optimizer, warmup, total_steps)
        acc.register_for_checkpointing(scheduler)
        eval_points = {min(steps_per_epoch, math.ceil(steps_per_epoch * (k + 1) / cfg.evals_per_epoch))
                       for k in range(cfg.evals_per_epoch)}

        # 6. Resume: model, optimizer, scheduler and RNG from the checkpoint, our counters from trainer_state.json.
        state = dict(global_step=0, epoch=0, step_in_epoch=0, history=[], evals=[], best_acc=-1.0, best_step=0,
                     bad_evals=0, best_probs=None, train_seconds=0.0, samples=0, fingerprint=data.fingerprint(),
                     config=asdict(cfg))
        best_weights = None
        if resume:  # accelerate restores the RNG states it saved: this run's (core.train.common.load_checkpoint)
            state, best_weights = _load_checkpoint(acc, ckpt_dir, cfg, data, rng)

        y_test = task.targets(test_enc)  # (units,): one per row, or one per word (token task)

        def evaluate() -> tuple[float, float, float, dict, np.ndarray]:
            """(score for early stopping, accuracy, loss, extra eval fields, probs (units, classes))."""
            model.eval()
            rows: dict[int, np.ndarray] = {}
            with torch.no_grad():
                for batch in test_dl:
                    idx, labels = batch.pop("idx"), batch.pop("labels")
                    logits = model(**batch).logits.float()  # (b, classes) or (b, pieces, tags)
                    if logits.ndim == 3:  # widths differ across processes: pad the piece axis first
                        logits = acc.pad_across_processes(logits, dim=1)
                        labels = acc.pad_across_processes(labels, dim=1, pad_index=-100)
                    idx = acc.pad_across_processes(idx, dim=0, pad_index=-1)
                    logits = acc.pad_across_processes(logits, dim=0)
                    labels = acc.pad_across_processes(labels, dim=0, pad_index=-100)
                    idx, probs_b, labels = (acc.gather(idx).cpu(), torch.softmax(acc.gather(logits), -1).cpu(),
                                            acc.gather(labels).cpu())
                    for r, i in enumerate(idx.tolist()):
                        if i >= 0:  # duplicates from even batching land on the same row
                            rows[i] = task.units(probs_b[r], labels[r]).numpy()
            model.train()
            probs = np.concatenate([rows[i] for i in range(len(test_enc))]).astype(np.float32)
            acc_ = float((probs.argmax(-1) == y_test).mean())
            loss_ = float(-np.log(np.clip(probs[np.arange(len(y_test)), y_test], 1e-12, None)).mean())
            score, extra = task.score(probs, test_enc)
            return score, acc_, loss_, extra, probs

        def emit(info: StepInfo) -> None:
            if on_step is not None and acc.is_main_process:
                on_step(info)

        # 7. The loop: forward (autocast on GPU), loss, backward, clip, step, schedule; evaluate at epoch ends.
        model.train()
        t_last = time.perf_counter()
        failure: BaseException | None = None
        try:
            while state["global_step"] < total_steps and state["epoch"] < cfg.epochs:
                epoch = state["epoch"]
                sampler.epoch = epoch  # same shuffle on every process, new one every epoch
                loader = acc.skip_first_batches(train_dl, state["step_in_epoch"]) if state["step_in_epoch"] else train_dl
                for batch in loader:
                    if should_stop is not None and should_stop():
                        raise JobCancelled()
                    batch.pop("idx")
                    labels = batch.pop("labels")
                    with rng.active():  # dropout draws this run's stream
                        logits = model(**batch).logits  # (b, classes) or (b, pieces, tags); autocast wraps forward
                        # One loss for both tasks: rows (b, classes) against (b,), or pieces (b*t, tags) against
                        # (b*t,), where -100 (special tokens, later pieces of a word, padding) is ignored.
                        loss = F.cross_entropy(logits.float().flatten(0, -2), labels.flatten(), ignore_index=-100)
                        loss_value = loss.item()
                        if not math.isfinite(loss_value):
                            raise FinetuneError(
                                f"The training loss became {loss_value} at step {state['global_step'] + 1} (learning "
                                f"rate {scheduler.get_last_lr()[0]:.2e}). Training stopped and no model was saved. "
                                "Lower the learning rate (2e-5 to 5e-5 is usual), keep gradient clipping on (1.0), "
                                "or use fp32.")
                        acc.backward(loss)
                        if cfg.grad_clip > 0:
                            acc.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                        optimizer.step()
                        scheduler.step()
                        optimizer.zero_grad(set_to_none=True)
                    state["global_step"] += 1
                    state["step_in_epoch"] += 1
                    now = time.perf_counter()
                    state["train_seconds"] += now - t_last
                    t_last = now
                    state["samples"] += labels.shape[0] * acc.num_processes
                    sps = state["samples"] / max(state["train_seconds"], 1e-9)
                    step_time = state["train_seconds"] / state["global_step"]
                    info = StepInfo("train", state["global_step"], total_steps, epoch + state["step_in_epoch"] / steps_per_epoch,
                                    loss=loss_value, lr=float(scheduler.get_last_lr()[0]), samples_per_s=sps,
                                    eta_s=step_time * (total_steps - state["global_step"]))
                    state["history"].append(info.metrics())
                    emit(info)
                    last_of_run = state["global_step"] >= total_steps
                    if state["step_in_epoch"] in eval_points or last_of_run:
                        # 8. Evaluate on the held-out split; remember the best weights; stop early on a plateau.
                        score, eval_acc, eval_loss, extra, probs = evaluate()
                        ev = StepInfo("eval", state["global_step"], total_steps, info.epoch, eval_accuracy=eval_acc,
                                      eval_loss=eval_loss, **extra)
                        state["evals"].append(ev.metrics())
                        emit(ev)
                        if score > state["best_acc"]:  # held-out accuracy, or entity F1 for the token task
                            state.update(best_acc=score, best_step=state["global_step"], bad_evals=0, best_probs=probs)
                            best_weights = {k: v.detach().to("cpu", copy=True)
                                            for k, v in acc.unwrap_model(model).state_dict().items()}
                        else:
                            state["bad_evals"] += 1
                        t_last = time.perf_counter()  # evaluation time is not training time
                        if cfg.patience and state["bad_evals"] >= cfg.patience and not last_of_run:
                            stop_reason = "early stopping"
                            break
                    if last_of_run:
                        break
                else:
                    state["epoch"] += 1
                    state["step_in_epoch"] = 0
                    # 9. Checkpoint every epoch, so a crash or Cancel loses at most one epoch.
                    _save_checkpoint(acc, ckpt_dir, state, best_weights, rng)
                    continue
                break
        except JobCancelled as e:
            _save_checkpoint(acc, ckpt_dir, state, best_weights, rng)  # resume=True continues from this very step
            failure = e
        except Exception as e:
            failure = FinetuneError(_oom_message(cfg, str(acc.device)), remedies_for(cfg)) if is_oom(e) else e
        if failure is not None:
            # Raised outside the except blocks, with the traceback's frames cleared and our own references
            # dropped: an exception's traceback keeps every frame's locals (model, optimizer state, activations)
            # alive, on the GPU too, for as long as anyone holds the exception.
            training.release(acc, model, optimizer)
            model = optimizer = scheduler = train_dl = test_dl = loader = batch = labels = logits = loss = None
            best_weights = None
            drop_frames(failure)
            raise failure

        # 10. Keep the best evaluation's weights, save model + tokenizer (+ our metadata), drop the checkpoint.
        unwrapped = acc.unwrap_model(model)
        if best_weights is not None:
            unwrapped.load_state_dict(best_weights)
        probs = state["best_probs"]
        result = _result(cfg, data, model_dir, str(acc.device), precision, state, stop_reason, params_total,
                         params_trainable, probs, y_test, train_lengths, task, test_enc, unwrapped)
        acc.wait_for_everyone()
        if acc.is_main_process:
            _save_model(unwrapped, tokenizer, cfg, data, model_dir, result)
            shutil.rmtree(ckpt_dir, ignore_errors=True)
        acc.wait_for_everyone()
        training.release(acc, model, optimizer)
        return result


def _result(cfg, data, model_dir, device, precision, state, stop_reason, params_total, params_trainable, probs,
            labels_np, train_lengths, task, test_enc, model) -> FinetuneResult:
    from sklearn.metrics import confusion_matrix, f1_score

    preds = probs.argmax(-1)
    k = data.num_labels
    token_metrics, texts, majority = None, data.test.texts if task.name == "sequence" else (), None
    if task.name == "token":
        from core.data.token_data import token_metrics as score_tokens

        gold, pred = task.tag_lists(labels_np, test_enc), task.tag_lists(preds, test_enc)
        words = [tuple(ws[:n]) for ws, n in zip(data.test.words, test_enc.n_words)]
        token_metrics = score_tokens(words, gold, pred, data.majority_tag(),
                                     words_truncated=data.test.n_words - sum(test_enc.n_words))
        texts = tuple(w for ws in words for w in ws)  # per word, like test_labels and test_probs
        majority = token_metrics.majority_accuracy
    weights = model.layer_weights() if hasattr(model, "layer_weights") else None
    return FinetuneResult(
        config=cfg, data_name=data.name, label_names=data.label_names, model_dir=str(model_dir), device=device,
        precision=precision, steps=state["global_step"],
        epochs_done=state["history"][-1]["epoch"] if state["history"] else 0.0, stop_reason=stop_reason,
        train_seconds=state["train_seconds"], samples_per_s=state["samples"] / max(state["train_seconds"], 1e-9),
        params_total=params_total, params_trainable=params_trainable,
        accuracy=float((preds == labels_np).mean()),
        macro_f1=float(f1_score(labels_np, preds, average="macro", labels=list(range(k)), zero_division=0)),
        majority_rate=data.majority_rate() if majority is None else majority, best_step=state["best_step"],
        confusion=confusion_matrix(labels_np, preds, labels=list(range(k))),
        history=tuple(state["history"]), evals=tuple(state["evals"]), test_texts=texts,
        test_labels=labels_np, test_probs=probs,
        padding_saved=padding_saved(train_lengths, cfg.batch_size, cfg.max_length, cfg.seed, cfg.length_grouping),
        layer_weights=None if weights is None else tuple(float(w) for w in weights),
        layer_gamma=None if weights is None else float(model.gamma.detach()), token_metrics=token_metrics)


def _save_checkpoint(acc, ckpt_dir: Path, state: dict, best_weights: dict | None, rng) -> None:
    """core.train.common's checkpoint: accelerate's state (model, optimizer, scheduler, this run's RNG), our counters,
    the best evaluation's weights and held-out probabilities."""
    training.save_checkpoint(acc, ckpt_dir, rng, {k: v for k, v in state.items() if k != "best_probs"},
                             tensors={"best": best_weights}, arrays={"best_probs": state["best_probs"]})


def _load_checkpoint(acc, ckpt_dir: Path, cfg: FinetuneConfig, data: LabelledData, rng) -> tuple[dict, dict | None]:
    if not training.has_checkpoint(ckpt_dir):
        raise FinetuneError(f"Nothing to resume: {ckpt_dir} has no checkpoint. Start a new run instead.")
    state = json.loads((ckpt_dir / training.STATE_FILE).read_text())
    if state["fingerprint"] != data.fingerprint():
        raise FinetuneError("The checkpoint was trained on different data; resume with the same dataset or start anew.")
    old = state["config"]
    changed = [k for k in ("task", "family", "checkpoint", "batch_size", "max_length", "pooling", "seed", "epochs",
                           "max_steps", "freeze_layers", "freeze_embeddings") if old.get(k) != getattr(cfg, k)]
    if changed:
        raise FinetuneError(f"The checkpoint used different settings ({', '.join(changed)}); resume with the same "
                            "settings or start a new run.")
    state, tensors, arrays = training.load_checkpoint(acc, ckpt_dir, rng, tensors=("best",), arrays=("best_probs",))
    state["best_probs"] = arrays["best_probs"]
    return state, tensors["best"]


def _save_model(model, tokenizer, cfg: FinetuneConfig, data, model_dir: Path, result: FinetuneResult) -> None:
    from safetensors.torch import save_file

    model_dir.mkdir(parents=True, exist_ok=True)
    if cfg.pooling == "cls":
        model.save_pretrained(str(model_dir))  # a standard *ForSequenceClassification / *ForTokenClassification folder
    else:
        model.backbone.save_pretrained(str(model_dir))  # the encoder, loadable as the family's base model
        if cfg.pooling == "mean":
            head = model.classifier.state_dict()
        else:  # the scalar mix's weights and gamma with the linear layer, under their module names
            head = {k: v for k, v in model.state_dict().items() if not k.startswith("backbone.")}
        save_file({k: v.contiguous() for k, v in head.items()}, str(model_dir / HEAD_FILE))
    tokenizer.save_pretrained(str(model_dir))  # the original: words_tokenizer's prefix space is added when tagging
    meta = dict(config=asdict(cfg), label_names=list(data.label_names), data=data.name, source=data.source,
                licence=data.licence, accuracy=result.accuracy, macro_f1=result.macro_f1, steps=result.steps,
                layer_weights=result.layer_weights)
    if result.token_metrics is not None:
        tm = result.token_metrics
        meta.update(entity_f1=tm.f1, entity_precision=tm.precision, entity_recall=tm.recall,
                    token_accuracy=tm.token_accuracy, majority_accuracy=tm.majority_accuracy)
    (model_dir / META_FILE).write_text(json.dumps(meta, indent=2))


# ---------------------------------------------------------------------------------------------- using a result
@dataclass
class FinetunedModel:
    model: Any
    tokenizer: Any
    label_names: tuple[str, ...]
    pooling: str
    max_length: int
    device: str
    task: str = "sequence"
    word_tokenizer: Any = None  # task "token": the tokenizer for pre-split words (core.data.token_data.words_tokenizer)
    recipe: tuple | None = field(default=None, repr=False, compare=False)  # how another process loads it (core.runtime.backend)


def load_finetuned(model_dir: str | Path, device: str = "auto") -> FinetunedModel:
    """Load a folder written by ``train`` for prediction. Raises ModelLoadError if it is not one."""
    from safetensors.torch import load_file

    meta_path = Path(model_dir) / META_FILE
    if not meta_path.exists():
        raise ModelLoadError(f"{model_dir} is not a fine-tuned EncoderLab folder (no {META_FILE}).")
    meta = json.loads(meta_path.read_text())
    c = meta["config"]
    spec = ModelSpec(c["family"], str(model_dir), device)
    task = c.get("task", "sequence")
    if c["pooling"] == "cls":
        lm = load(spec, "tokcls" if task == "token" else "seqcls")
        model = lm.model
    else:
        lm = load(spec, "base")
        head = load_file(str(Path(model_dir) / HEAD_FILE))
        if c["pooling"] == "mean":
            model = _mean_pool_classifier(lm.model, len(meta["label_names"]), 0.0)
            model.classifier.load_state_dict(head)
        else:
            model = _scalar_mix_model(lm.model, len(meta["label_names"]), 0.0, per_token=task == "token")
            missing, unexpected = model.load_state_dict(head, strict=False)
            if unexpected or [k for k in missing if not k.startswith("backbone.")]:
                raise ModelLoadError(f"{model_dir}/{HEAD_FILE} does not match a scalar-mix head of this model.")
        model.to(lm.device)
    model.eval()
    word_tok = None
    if task == "token":
        from core.data.token_data import words_tokenizer

        word_tok = words_tokenizer(lm.tokenizer)
    return FinetunedModel(model, lm.tokenizer, tuple(meta["label_names"]), c["pooling"], c["max_length"], lm.device,
                          task, word_tok, recipe=("core.train.finetune:load_finetuned", (str(model_dir),), {"device": device}))


def split_words(text: str) -> list[str]:
    """Words and punctuation of a typed sentence, the way CoNLL files split them ("Paris." -> "Paris", ".")."""
    import re

    return re.findall(r"\w+(?:[-'’.]\w+)*|[^\w\s]", text)


def tag(fm: FinetunedModel, texts: list[str] | list[list[str]]) -> list[list[tuple[str, str, float]]]:
    """Per-word tags of a token model: for each text (a string, split by ``split_words``, or a list of words),
    (word, tag, probability) for every word that fits in the model's max length."""
    import torch

    from core.data.token_data import align_batch

    if fm.task != "token":
        raise ValueError("This model classifies whole texts; tag() needs a token-classification fine-tune.")
    sentences = [split_words(x) if isinstance(x, str) else list(x) for x in texts]
    out: list[list[tuple[str, str, float]]] = [[] for _ in sentences]
    todo = [i for i, s in enumerate(sentences) if s]
    rows = align_batch(fm.word_tokenizer, [sentences[i] for i in todo], None, None, fm.max_length)
    if not rows:
        return out
    # padded through the tokenizer (its side); labels mark each word's first piece, -100 elsewhere and on padding
    b = training.pad(fm.tokenizer, [{"input_ids": r["input_ids"], "labels": r["labels"]} for r in rows],
                     fill={"labels": -100})
    labels = b.pop("labels")  # (n, width)
    enc = {"input_ids": b["input_ids"], "attention_mask": b["attention_mask"]}
    if "token_type_ids" in rows[0]:
        enc["token_type_ids"] = torch.zeros_like(b["input_ids"])
    with torch.no_grad():
        probs = torch.softmax(fm.model(**{k: v.to(fm.device) for k, v in enc.items()}).logits.float(), -1).cpu()
    for r, i in enumerate(todo):
        first = [p for p, y in enumerate(labels[r].tolist()) if y != -100]  # the first piece of each word
        for w, p in zip(sentences[i], first):
            k = int(probs[r, p].argmax())
            out[i].append((w, fm.label_names[k], float(probs[r, p, k])))
    return out


def classify(fm: FinetunedModel, texts: list[str], texts_b: list[str] | None = None) -> np.ndarray:
    """Class probabilities, shape (len(texts), classes).

    Concurrent calls on the same model (one per session thread) run as one batch (core.runtime.serving); single texts
    and pairs batch separately (the tokenizer takes one kind per call)."""
    from core.runtime.backend import batched

    if not texts:
        return _classify_now(fm, texts, texts_b)
    op = "classify" if texts_b is None else "classify_pairs"
    return batched(fm, op, _classify_batch, (list(texts), None if texts_b is None else list(texts_b)))


def _classify_batch(fm: FinetunedModel, items: Sequence[tuple[list[str], list[str] | None]]) -> list[np.ndarray]:
    """Several callers' texts (all single, or all pairs) as one forward, split back per caller."""
    probs = _classify_now(fm, [x for a, _ in items for x in a],
                          None if items[0][1] is None else [x for _, b in items for x in b])
    out, i = [], 0
    for a, _ in items:
        out.append(probs[i:i + len(a)])
        i += len(a)
    return out


def _classify_now(fm: FinetunedModel, texts: list[str], texts_b: list[str] | None = None) -> np.ndarray:
    import torch

    enc = fm.tokenizer(texts, texts_b, truncation=True, max_length=fm.max_length, padding=True, return_tensors="pt")
    enc = {k: v.to(fm.device) for k, v in enc.items() if k in fm.tokenizer.model_input_names}
    with torch.no_grad():
        return torch.softmax(fm.model(**enc).logits.float(), -1).cpu().numpy()


def zip_folder(folder: str | Path) -> bytes:
    """The folder as a zip archive in memory (for the download button)."""
    buf = io.BytesIO()
    folder = Path(folder)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, Path(folder.name) / p.relative_to(folder))
    return buf.getvalue()


def runs_root(session_id: str) -> Path:
    """Where this session's runs live: $ENCODERLAB_RUNS/<session> (default /tmp/encoderlab-runs)."""
    return Path(os.environ.get("ENCODERLAB_RUNS", "/tmp/encoderlab-runs")) / session_id


def job_fn(cfg: FinetuneConfig, data: LabelledData, out_dir: str | Path, resume: bool = False):
    """A core.runtime.jobs function: runs ``train`` and reports each step as progress + metrics (live curves).

    A partial of a module-level function over plain data, so core.runtime.jobs can run it in a worker process."""
    import functools

    return functools.partial(_run_job, cfg, data, str(out_dir), resume)


def _run_job(cfg: FinetuneConfig, data: LabelledData, out_dir: str, resume: bool, ctx) -> FinetuneResult:
    def on_step(info: StepInfo) -> None:
        # the job panel adds its own ETA to this line: one estimate, not two
        ctx.progress(info.fraction, info.message(with_eta=False), kind=info.kind, **info.metrics())

    ctx.progress(0.0, "loading a fresh copy of the model")
    return train(cfg, data, out_dir, on_step=on_step, should_stop=lambda: ctx.cancelled, resume=resume)


def job_resource(cfg: FinetuneConfig) -> str:
    """'gpu' when the run will use CUDA, else 'cpu' (the job queue limits each separately)."""
    from core.runtime.jobs import resource_for

    return resource_for(cfg.device)


# ---------------------------------------------------------------------------------------------- command line
def _load_data(args):
    if args.task == "token":
        from core.data.token_data import load_bundled_tokens, read_tokens

        path = Path(args.data)
        data = load_bundled_tokens() if args.data in ("tokens", "drugreview") else read_tokens(path.read_bytes(), path.name)
        return data.subset(args.train_rows, args.test_rows) if (args.train_rows or args.test_rows) else data
    if args.data in BUNDLED:
        data = load_bundled(args.data)
    else:
        from core.data.datasets_local import from_table, read_table

        path = Path(args.data)
        df = read_table(path.read_bytes(), path.name)
        data = from_table(df, args.text_col, args.label_col, args.text_col_b, name=path.name)
    if args.train_rows or args.test_rows:
        data = data.subset(args.train_rows, args.test_rows)
    return data


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m core.train.finetune", description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", required=True, choices=list(FAMILIES))
    ap.add_argument("--checkpoint", required=True, help="Hub id, encoderlab/<name> or a local folder")
    ap.add_argument("--data", default="drugreview", help="a bundled set (drugreview, wordnet; tokens for --task token) "
                    "or a .csv/.tsv/.jsonl file (.conll/.iob/.jsonl for --task token)")
    ap.add_argument("--text-col", default="text")
    ap.add_argument("--text-col-b", default=None)
    ap.add_argument("--label-col", default="label")
    ap.add_argument("--train-rows", type=int, default=0)
    ap.add_argument("--test-rows", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--resume", action="store_true")
    # defaults and ranges from FinetuneConfig's fields (core.base.fields): argparse refuses an out-of-range value itself
    add_argument(ap, FinetuneConfig, "lr", help="None: 3e-5, or 5e-5 for --task token")
    for f in ("epochs", "max_steps", "batch_size", "max_length", "warmup_ratio", "weight_decay", "grad_clip",
              "seed", "freeze_layers", "patience", "evals_per_epoch"):
        add_argument(ap, FinetuneConfig, f)
    for f, choices in (("pooling", POOLINGS), ("device", ("auto", "cpu", "cuda")), ("precision", PRECISIONS),
                       ("task", TASKS)):
        add_argument(ap, FinetuneConfig, f, choices=choices)
    ap.add_argument("--freeze-embeddings", action="store_true")
    ap.add_argument("--gradient-checkpointing", action="store_true")
    add_argument(ap, FinetuneConfig, "dropout", help="encoder + head dropout; None: the checkpoint's")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    try:
        cfg = FinetuneConfig(args.family, args.checkpoint, **{k: getattr(args, k) for k in (
            "epochs", "max_steps", "lr", "batch_size", "max_length", "warmup_ratio", "weight_decay", "grad_clip",
            "seed", "freeze_embeddings", "freeze_layers", "pooling", "patience", "evals_per_epoch", "device",
            "precision", "task", "gradient_checkpointing", "dropout")})
        data = _load_data(args)
    except ValueError as e:
        ap.error(str(e))
    def show(info: StepInfo) -> None:
        print(info.message(), flush=True)

    try:
        r = train(cfg, data, args.out, on_step=show, resume=args.resume)
    except (ValueError, FinetuneError) as e:
        print(f"error: {e}", flush=True)
        return 2
    from accelerate import PartialState  # initialised by train()'s Accelerator (multi-CPU under `accelerate launch`)

    if PartialState().is_main_process:
        extra = {} if r.token_metrics is None else dict(entity_f1=round(r.token_metrics.f1, 4))
        if r.layer_weights is not None:
            extra["layer_weights"] = [round(w, 4) for w in r.layer_weights]
        print(json.dumps(dict(**extra, accuracy=round(r.accuracy, 4), macro_f1=round(r.macro_f1, 4),
                              majority_rate=round(r.majority_rate, 4), steps=r.steps, stop=r.stop_reason,
                              samples_per_s=round(r.samples_per_s, 2), processes=_num_processes(),
                              model_dir=r.model_dir)), flush=True)
    return 0


def _num_processes() -> int:
    from accelerate import PartialState

    return PartialState().num_processes


if __name__ == "__main__":
    raise SystemExit(main())

"""Fine-tuning model plumbing: a fresh copy of the checkpoint with a head for the labels (the family's own, or
core.predict.classify's mean-pooling / scalar-mix heads), freezing, AdamW parameter groups, the run's Accelerator,
and writing the finished model folder that core.predict.classify.load_finetuned reads back.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from core import registry
from core.base.messages import msg
from core.models.devices import resolve_device
from core.models.loading import BUILD_LOCK, ModelSpec, load
from core.predict.classify import HEAD_FILE, META_FILE, mean_pool_classifier, scalar_mix_model
from core.runtime import artifacts
from core.runtime.disk_full import whole_or_nothing
from core.train import common as training
from core.train.finetune_config import HEAD_DROPOUT, FinetuneConfig, FinetuneError, effective_precision

# The scalar mix has L + 2 numbers; at the encoder's learning rate (3e-5) they would not move visibly in a short
# run (Adam moves each by about lr per step), so they learn this many times faster.
MIX_LR_SCALE = 100.0
MIX_PARAMS = ("mix", "gamma")  # the scalar mix's own parameters (ScalarMixClassifier)


def freeze(model, cfg: FinetuneConfig) -> None:
    base = model.backbone if hasattr(model, "backbone") else model.base_model
    if cfg.freeze_embeddings:
        for p in base.embeddings.parameters():
            p.requires_grad = False
    if cfg.freeze_layers:
        layers = registry.encoder_layers(base)
        if layers is None:
            raise ValueError(msg("finetune.shared_layers_cannot_freeze", label=registry.family(cfg.family).label))
        if cfg.freeze_layers >= len(layers):
            raise ValueError(
                msg("finetune.freeze_too_many_layers", n_layers=len(layers), freeze_layers=cfg.freeze_layers)
            )
        for layer in layers[: cfg.freeze_layers]:
            for p in layer.parameters():
                p.requires_grad = False


def param_groups(model, weight_decay: float, lr: float) -> list[dict]:
    """core.train.common's groups: no decay on biases and LayerNorm weights; the scalar mix's weights and gamma (1-D
    and 0-D, so no decay either) at MIX_LR_SCALE times the encoder's small lr."""
    return training.param_groups(model, lr, weight_decay, head_lr_mult=MIX_LR_SCALE, head_prefixes=MIX_PARAMS)


def load_fresh(cfg: FinetuneConfig, data):
    """A new copy of the checkpoint with a classification head of the right size (never a cached model): the
    family's own head ("cls": *ForSequenceClassification, or *ForTokenClassification for task "token"), or the
    base model under a mean-pooling or scalar-mix head. ``cfg.dropout`` (when set) goes to the encoder and the head."""
    id2label = dict(enumerate(data.label_names))
    spec = ModelSpec(cfg.family, cfg.checkpoint, "cpu")  # accelerate moves it to its device
    dropout = {} if cfg.dropout is None else dict.fromkeys(registry.family(cfg.family).dropout_keys, float(cfg.dropout))
    head_dropout = HEAD_DROPOUT if cfg.dropout is None else float(cfg.dropout)
    if cfg.pooling == "cls":
        lm = load(
            spec,
            "tokcls" if cfg.task == "token" else "seqcls",
            model_kwargs=dict(
                num_labels=data.num_labels,
                id2label=id2label,
                label2id={v: k for k, v in id2label.items()},
                ignore_mismatched_sizes=True,
                **dropout,
            ),
        )
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
                model = mean_pool_classifier(lm.model, data.num_labels, head_dropout)
            else:
                model = scalar_mix_model(lm.model, data.num_labels, head_dropout, per_token=cfg.task == "token")
    if cfg.gradient_checkpointing:
        hf = model.backbone if hasattr(model, "backbone") else model
        if not getattr(hf, "supports_gradient_checkpointing", False):
            raise ValueError(msg("finetune.does_not_support_gradient", model_class=type(hf).__name__))
        # use_reentrant=False: torch's recommended form; it also keeps gradients flowing when the embeddings are
        # frozen (the reentrant form needs an input that requires grad).
        enable = getattr(hf, "activation_checkpointing_enable", None)  # the name since transformers 5.2x
        if enable is not None:
            enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:  # an older transformers (a lent GPU machine's own); the old name warns that v6 drops it
            hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    bad = [n for n, p in model.named_parameters() if not p.isfinite().all()]
    if bad:
        raise FinetuneError(
            msg("finetune.checkpoint_holds_nan_infinite", bad=bad[0], and_more=" and more" if len(bad) > 1 else "")
        )
    return model, lm.tokenizer


@contextmanager
def accelerator(cfg: FinetuneConfig):
    """An Accelerator for this run (core.train.common.accelerator: one device/precision setting per process, so a run
    with other settings than one in progress raises FinetuneError) and the precision it runs in."""
    precision = effective_precision(cfg)  # bf16 on the CPU is torch's CPU autocast; fp16 is refused there (config)
    mixed = {"fp32": "no", "bf16": "bf16", "fp16": "fp16"}[precision]
    with training.accelerator(resolve_device(cfg.device).kind, mixed, FinetuneError) as acc:
        yield acc, precision


def save_model(model, tokenizer, cfg: FinetuneConfig, data, model_dir: Path, result) -> None:
    """Write the run folder: the model (the family's own folder, or the encoder plus HEAD_FILE), its tokenizer,
    META_FILE (config, labels, data, held-out metrics of ``result``, a core.train.finetune.FinetuneResult) and the
    files' checksums. Whole or not at all (core.runtime.artifacts.write_folder, which records the checksums): a run
    stopped or out of disk in the middle leaves no ``model_dir`` that a page would offer as a finished run, and a
    full disk raises core.runtime.disk_full.DiskFullError."""
    from safetensors.torch import save_file  # lazy: safetensors' torch half imports torch

    def fill(tmp: Path) -> None:
        with whole_or_nothing(tmp):
            if cfg.pooling == "cls":
                model.save_pretrained(str(tmp))  # a standard *ForSequenceClassification / *ForTokenClassification
            else:
                model.backbone.save_pretrained(str(tmp))  # the encoder, loadable as the family's base model
                if cfg.pooling == "mean":
                    head = model.classifier.state_dict()
                else:  # the scalar mix's weights and gamma with the linear layer, under their module names
                    head = {k: v for k, v in model.state_dict().items() if not k.startswith("backbone.")}
                save_file({k: v.contiguous() for k, v in head.items()}, str(tmp / HEAD_FILE))
            tokenizer.save_pretrained(str(tmp))  # the original: words_tokenizer's prefix space is added when tagging
            (tmp / META_FILE).write_text(json.dumps(_meta(cfg, data, result), indent=2))

    artifacts.write_folder(model_dir, fill)  # load_finetuned tells a damaged file from a good one by the checksums


def _meta(cfg: FinetuneConfig, data, result) -> dict:
    """META_FILE's contents: config, labels, data and the held-out metrics of ``result``."""
    meta = dict(
        config=asdict(cfg),
        label_names=list(data.label_names),
        data=data.name,
        source=data.source,
        licence=data.licence,
        accuracy=result.accuracy,
        macro_f1=result.macro_f1,
        steps=result.steps,
        layer_weights=result.layer_weights,
    )
    if result.token_metrics is not None:
        tm = result.token_metrics
        meta.update(
            entity_f1=tm.f1,
            entity_precision=tm.precision,
            entity_recall=tm.recall,
            token_accuracy=tm.token_accuracy,
            majority_accuracy=tm.majority_accuracy,
        )
    return meta

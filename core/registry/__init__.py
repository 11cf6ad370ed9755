"""The family registry: everything that differs between encoder families, as data and small adapters.

Pages and core modules ask this package about a family (its mask token, pair head, tokenizer kind, classes per
task, official checkpoints and the figures the seed articles claim for them, where its heads and attention
projections live) instead of naming one. core.models resolves and loads checkpoints with it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
ASSETS = REPO_ROOT / "assets"
CONFIG_DIR = ASSETS / "configs"

TASKS = ("base", "mlm", "pretraining", "seqcls", "tokcls")


class ModelLoadError(ValueError):
    """A checkpoint could not be resolved or loaded. The message names the problem and the fix."""

    def __str__(self) -> str:  # hosted mode: the message names no server path (core.hosted.scrub)
        from core.hosted import scrub

        return scrub(super().__str__())


@dataclass(frozen=True)
class Checkpoint:
    id: str
    family: str
    claim_m: float | None = None  # parameters the seed articles claim, in millions
    claim_note: str = ""
    language: str = "en"
    model_type: str | None = None  # architecture when it differs from the family's (hfl's RoBERTa is BERT code)
    note: str = ""


@dataclass(frozen=True)
class Family:
    key: str
    label: str
    model_type: str
    mask_token: str
    pair_head: str | None  # "nsp", "sop" or None
    pair_head_note: str
    tokenizer_kind: str
    position_embeddings: str
    objectives: tuple[str, ...]
    classes: dict[str, str]
    checkpoints: tuple[Checkpoint, ...]
    bundled: str  # folder name under the zoo
    base_checkpoint: str  # the base-size architecture used for the Speed page
    summary: str = ""
    head_output: str = ""  # the attention output projection, a dotted path inside one layer (core.ablation)
    token_types: bool = False  # the model takes token_type_ids (segment A/B embeddings)
    piece_kind: str = "wordpiece"  # "wordpiece" (## continues a word), "bpe" (Ġ starts one), "unigram" (▁ starts one)
    specials: dict[str, str] = field(default_factory=dict)  # the tokenizer's special tokens, by transformers' names
    shared_layers: bool = False  # one set of layer weights applied at every depth (ALBERT)
    distilled_from: str | None = None  # the family key of the teacher this family's checkpoints were distilled from
    dropout_keys: tuple[str, str] = ("hidden_dropout_prob", "classifier_dropout")  # config keys: hidden, classifier


FAMILIES: dict[str, Family] = {
    "bert": Family(
        key="bert", label="BERT", model_type="bert", mask_token="[MASK]", pair_head="nsp",
        pair_head_note="BERT was pretrained with Next Sentence Prediction: its NSP head says whether B follows A.",
        tokenizer_kind="WordPiece", position_embeddings="learned absolute, 512",
        objectives=("MLM", "NSP"),
        classes={"base": "BertModel", "mlm": "BertForMaskedLM", "pretraining": "BertForPreTraining",
                 "seqcls": "BertForSequenceClassification"},
        checkpoints=(
            Checkpoint("bert-base-uncased", "bert", 110, "110M (BERT-Base)"),
            Checkpoint("bert-large-uncased", "bert", 340, "340M, also quoted as 334M (BERT-Large)"),
            Checkpoint("bert-base-chinese", "bert", None, language="zh"),
        ),
        bundled="bert-mini", base_checkpoint="bert-base-uncased",
        summary="Bidirectional Transformer encoder; MLM (15%, 80/10/10) + NSP; WordPiece 30K.",
        head_output="attention.output.dense",
        token_types=True, piece_kind="wordpiece", specials=dict(cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]"),
    ),
    "roberta": Family(
        key="roberta", label="RoBERTa", model_type="roberta", mask_token="<mask>", pair_head=None,
        pair_head_note=("RoBERTa has no sentence-pair head: its authors dropped NSP after finding that MLM alone, "
                        "on full-length contiguous text, did as well or better downstream."),
        tokenizer_kind="Byte-level BPE", position_embeddings="learned absolute, 512 (+2 offset)",
        objectives=("MLM (dynamic masking)",),
        classes={"base": "RobertaModel", "mlm": "RobertaForMaskedLM", "pretraining": "RobertaForMaskedLM",
                 "seqcls": "RobertaForSequenceClassification"},
        checkpoints=(
            Checkpoint("roberta-base", "roberta", 125, "125M (RoBERTa-base)"),
            Checkpoint("roberta-large", "roberta", 355, "355M (not in the articles; paper figure)"),
            Checkpoint("hfl/chinese-roberta-wwm-ext", "roberta", None, language="zh", model_type="bert",
                       note="RoBERTa-style training (whole-word masking, no NSP) on BERT code and a WordPiece vocab"),
        ),
        bundled="roberta-mini", base_checkpoint="roberta-base",
        summary="BERT retrained longer on 10x data; no NSP; dynamic masking; byte-level BPE 50K.",
        head_output="attention.output.dense",
        token_types=False, piece_kind="bpe",
        specials=dict(bos_token="<s>", cls_token="<s>", eos_token="</s>", sep_token="</s>", pad_token="<pad>",
                      unk_token="<unk>", mask_token="<mask>"),
    ),
    "albert": Family(
        key="albert", label="ALBERT", model_type="albert", mask_token="[MASK]", pair_head="sop",
        pair_head_note="ALBERT was pretrained with Sentence Order Prediction: its SOP head says whether A and B are in order.",
        tokenizer_kind="SentencePiece Unigram", position_embeddings="learned absolute, 512",
        objectives=("MLM (n-gram)", "SOP"),
        classes={"base": "AlbertModel", "mlm": "AlbertForMaskedLM", "pretraining": "AlbertForPreTraining",
                 "seqcls": "AlbertForSequenceClassification"},
        checkpoints=(
            Checkpoint("albert-base-v2", "albert", 12, "12M (ALBERT-base)"),
            Checkpoint("albert-large-v2", "albert", 18, "18M (ALBERT-large)"),
            Checkpoint("albert-xlarge-v2", "albert", 59, "59M (ALBERT-xlarge)"),
        ),
        bundled="albert-mini", base_checkpoint="albert-base-v2",
        summary="Factorized embeddings (V×E + E×H) and one layer shared across depth; SOP instead of NSP.",
        head_output="attention.dense",
        token_types=True, piece_kind="unigram", shared_layers=True, dropout_keys=("hidden_dropout_prob", "classifier_dropout_prob"),
        specials=dict(cls_token="[CLS]", sep_token="[SEP]", pad_token="<pad>", unk_token="<unk>", mask_token="[MASK]"),
    ),
    "distilbert": Family(
        key="distilbert", label="DistilBERT", model_type="distilbert", mask_token="[MASK]", pair_head=None,
        pair_head_note=("DistilBERT has no sentence-pair head: it was distilled from BERT with MLM, soft-logit KL "
                        "and hidden-state cosine losses only, and it has no token-type embeddings."),
        tokenizer_kind="WordPiece", position_embeddings="learned absolute, 512",
        objectives=("MLM", "distillation (KL)", "hidden cosine"),
        classes={"base": "DistilBertModel", "mlm": "DistilBertForMaskedLM", "pretraining": "DistilBertForMaskedLM",
                 "seqcls": "DistilBertForSequenceClassification"},
        checkpoints=(
            Checkpoint("distilbert-base-uncased", "distilbert", 66, "66M, ~1.7x faster than BERT-base"),
        ),
        bundled="distilbert-mini", base_checkpoint="distilbert-base-uncased",
        summary="6-layer student of BERT-base (every other layer), triple loss; ~40% smaller, ~1.7x faster.",
        head_output="attention.out_lin",
        token_types=False, piece_kind="wordpiece", distilled_from="bert", dropout_keys=("dropout", "seq_classif_dropout"),
        specials=dict(cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]"),
    ),
}


PAIR_HEADS = {"nsp": "Next Sentence Prediction", "sop": "Sentence Order Prediction"}


def family(key: str) -> Family:
    """Return the registry entry for a family key; raises ModelLoadError for an unknown one."""
    try:
        return FAMILIES[key]
    except KeyError:
        raise ModelLoadError(f"Unknown family {key!r}. Choose one of: {', '.join(FAMILIES)}.") from None


def families_with(**fields: Any) -> list[Family]:
    """The families whose fields equal the given values, e.g. ``families_with(pair_head="sop")``."""
    return [f for f in FAMILIES.values() if all(getattr(f, k) == v for k, v in fields.items())]


def official_checkpoints() -> list[Checkpoint]:
    return [c for f in FAMILIES.values() for c in f.checkpoints]


def checkpoint_info(checkpoint_id: str) -> Checkpoint | None:
    for c in official_checkpoints():
        if c.id == checkpoint_id:
            return c
    return None


def family_of_model_type(model_type: str) -> str | None:
    for f in FAMILIES.values():
        if f.model_type == model_type:
            return f.key
    return None


def bundled_id(family_key: str) -> str:
    return f"encoderlab/{family(family_key).bundled}"


def mlm_head(model):
    """The model's MLM head as a function of hidden states (n, H) -> logits (n, V); None when it has none."""
    import torch

    cls = getattr(model, "cls", None)
    if cls is not None and hasattr(cls, "predictions"):  # BertForMaskedLM / BertForPreTraining
        return cls.predictions
    for name in ("lm_head", "predictions"):  # RoBERTa; ALBERT (MLM and pretraining)
        if isinstance(getattr(model, name, None), torch.nn.Module):
            return getattr(model, name)
    if hasattr(model, "vocab_projector"):  # DistilBertForMaskedLM
        return lambda h: model.vocab_projector(model.vocab_layer_norm(model.activation(model.vocab_transform(h))))
    return None


def pair_head_module(model):
    """The NSP (BERT) or SOP (ALBERT) classifier, pooled (n, H) -> logits (n, 2); None when the model has none."""
    cls = getattr(model, "cls", None)
    if cls is not None and hasattr(cls, "seq_relationship"):  # BertForPreTraining / BertForNextSentencePrediction
        return cls.seq_relationship
    return getattr(model, "sop_classifier", None)  # AlbertForPreTraining


def attention_layers(model) -> list[tuple[int, Any]]:
    """(depth, attention output projection) for every depth of the encoder, from the family's ``head_output``.
    A layer shared across depth (ALBERT) appears once per depth, as the same module, by transformers' own
    layer -> group rule. Raises ModelLoadError for a model of no known family."""
    # a wrapper (core.finetune's mean-pool classifier) holds the transformers model as a submodule
    inner = next((m for m in model.modules() if hasattr(m, "base_model") and hasattr(m, "config")), model)
    base = inner.base_model
    cfg = base.config
    fam_key = family_of_model_type(getattr(cfg, "model_type", ""))
    if fam_key is None or not FAMILIES[fam_key].head_output:
        raise ModelLoadError(f"{type(model).__name__} is not a model of a known family: its attention heads "
                             "cannot be located.")
    suffix = "." + FAMILIES[fam_key].head_output
    mods = [m for name, m in base.named_modules() if ("." + name).endswith(suffix)]  # in layer order
    n = int(cfg.num_hidden_layers)
    if len(mods) == n:
        return list(enumerate(mods))
    groups = int(getattr(cfg, "num_hidden_groups", 0) or 0)
    if groups and len(mods) == groups:  # shared layers: one module per group, each applied at several depths
        return [(i, mods[int(i / (n / groups))]) for i in range(n)]
    raise ModelLoadError(f"{type(model).__name__}: found {len(mods)} attention output projections for {n} layers "
                         "(inner layer groups are not supported).")


def model_class(family_key: str, task: str, model_type: str):
    import transformers

    if task not in TASKS:
        raise ModelLoadError(f"Unknown task {task!r}: use one of {', '.join(TASKS)}.")
    fam_key = family_of_model_type(model_type) or family_key
    if task == "tokcls":  # every family has a *ForTokenClassification; the Auto class picks it from model_type
        return transformers.AutoModelForTokenClassification
    return getattr(transformers, FAMILIES[fam_key].classes[task])


def official_config(checkpoint_id: str):
    """The shipped official config (assets/configs) as a transformers config object; no weights needed."""
    import transformers

    name = checkpoint_id.replace("/", "__") + ".json"
    path = CONFIG_DIR / name
    if not path.exists():
        raise ModelLoadError(f"No shipped config for {checkpoint_id!r} (looked for {path}).")
    d = json.loads(path.read_text())
    return transformers.AutoConfig.for_model(**d)

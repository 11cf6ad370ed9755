"""The generic family: any encoder transformers loads with a masked-LM head whose model_type no family here claims
(CamemBERT, DeBERTa-v2, MPNet, a private fine-tune). Its ``Family`` is derived from the checkpoint itself: the mask
token and special tokens from its tokenizer, the piece kind from the tokenizer's model, token types from the inputs
the tokenizer produces. It has no pair head, no fast forward (the transformers forward runs) and no q/k view.

What it serves: every page that needs only the encoder and the MLM head (fill-mask, attention maps, layer lens,
attributions of a masked word, corpus search, projector, probes, fine-tune through the Auto classes). What it
cannot: NSP/SOP (no pair head), head ablation and head importance where its attention output projection cannot be
found by name, pretraining recipes (those are per family).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from core.registry.types import Family

KEY = "generic"

FAMILY = Family(
    key=KEY,
    label="Other encoder (any masked LM)",
    model_type="",
    mask_token="",
    pair_head=None,
    pair_head_note=(
        "This checkpoint's family is not in EncoderLab's registry: it is used through transformers' "
        "generic masked-LM classes, which have no sentence-pair head."
    ),
    tokenizer_kind="from the checkpoint's tokenizer",
    position_embeddings="from the checkpoint's config",
    objectives=("MLM",),
    classes={
        "base": "AutoModel",
        "mlm": "AutoModelForMaskedLM",
        "pretraining": "AutoModelForMaskedLM",
        "seqcls": "AutoModelForSequenceClassification",
    },
    checkpoints=(),
    bundled="",
    base_checkpoint="",
    summary=(
        "Any encoder transformers loads with a masked-LM head (CamemBERT, DeBERTa-v2, MPNet, your own): "
        "type its folder or Hugging Face id under Checkpoint → custom."
    ),
    qk_modules=None,
    value_proj=None,
    qk_note=(
        "This checkpoint is of a family EncoderLab does not know, so where its query and key projections live "
        "is not known: there is no q/k view."
    ),
    generic=True,
    # the tiny test model of the generic family: a DeBERTa-v2 (relative positions) with the bert-base-uncased vocab
    tiny_model_type="deberta-v2",
    tiny_tokenizer="bert-uncased",
)


def piece_kind(tokenizer: Any) -> str:
    """ "wordpiece", "bpe" or "unigram", from the tokenizer's own model (its tokenizers backend), not from its name."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        kind = type(backend.model).__name__
        if kind == "WordPiece":
            return "wordpiece"
        if kind == "Unigram":
            return "unigram"
        if kind == "BPE":
            # a BPE over SentencePiece's "▁" marker (CamemBERT-style) starts words with ▁, byte-level BPE with Ġ
            return "unigram" if "Metaspace" in repr(backend.pre_tokenizer) else "bpe"
    vocab = list(tokenizer.get_vocab()) if hasattr(tokenizer, "get_vocab") else []
    if any(t.startswith("##") for t in vocab):
        return "wordpiece"
    return "unigram" if any(t.startswith("▁") for t in vocab) else "bpe"


def derive(config: Any, tokenizer: Any) -> Family:
    """The generic family filled in from one checkpoint's config and tokenizer."""
    specials = {k: str(v) for k, v in getattr(tokenizer, "special_tokens_map", {}).items() if isinstance(v, str)}
    mt = str(getattr(config, "model_type", "") or "")
    return replace(
        FAMILY,
        label=f"{FAMILY.label}: {mt}" if mt else FAMILY.label,
        model_type=mt,
        mask_token=str(tokenizer.mask_token or ""),
        specials=specials,
        token_types="token_type_ids" in getattr(tokenizer, "model_input_names", ()),
        piece_kind=piece_kind(tokenizer),
        tokenizer_kind=type(tokenizer).__name__,
    )

"""ELECTRA (Clark et al. 2020): a small generator fills masks, a discriminator learns which tokens it replaced.

One registry entry and the few adapters the family needs. The generator checkpoints are ``ElectraForMaskedLM``
(``classes["mlm"]``: they fill masks like any MLM family); the discriminator checkpoints are
``ElectraForPreTraining`` (``classes["rtd"]``: one logit per token, "was this token replaced?", core.predict.replaced_tokens).
``classes["pretraining"]`` is the generator's MLM, as for the other MLM-only families, so a pretraining run or a
tiny test model of this family fills masks; the discriminator is asked for by its own task, "rtd".

Collected by core/registry/__init__.py.
"""

from __future__ import annotations

from typing import Any

from core.registry import layers
from core.registry.types import Checkpoint, Family, HeadTuple, MlmHead

KEY = "electra"
RTD_TASK = "rtd"  # the discriminator's task: classes[RTD_TASK] is its transformers class


def electra_mlm(model: Any) -> MlmHead | None:
    """The generator's MLM head as a function of hidden states (n, H) -> logits (n, V); None for a model without
    one (a discriminator). ELECTRA keeps it as two modules: H -> E (dense, GELU, LayerNorm), then E -> V."""
    pred, out = getattr(model, "generator_predictions", None), getattr(model, "generator_lm_head", None)
    if pred is None or out is None:
        return None
    return lambda h: out(pred(h))


def electra_head(model: Any) -> HeadTuple | None:
    """The generator's head as (dense, activation, layer norm, decoder), for the fast masked forward."""
    pred, out = getattr(model, "generator_predictions", None), getattr(model, "generator_lm_head", None)
    if pred is None or out is None:
        return None
    return pred.dense, pred.activation, pred.LayerNorm, out


ELECTRA = Family(
    key=KEY,
    label="ELECTRA",
    model_type="electra",
    mask_token="[MASK]",
    pair_head=None,
    pair_head_note=(
        "ELECTRA has no sentence-pair head: it was pretrained with replaced token detection only "
        "(a generator's MLM feeds the discriminator), with no NSP or SOP."
    ),
    tokenizer_kind="WordPiece",
    position_embeddings="learned absolute, 512",
    objectives=("replaced token detection (RTD)", "generator MLM"),
    classes={
        "base": "ElectraModel",
        "mlm": "ElectraForMaskedLM",
        "pretraining": "ElectraForMaskedLM",
        "seqcls": "ElectraForSequenceClassification",
        RTD_TASK: "ElectraForPreTraining",
    },
    checkpoints=(
        Checkpoint(f"google/{KEY}-small-generator", KEY, None, note="generator: fills masks"),
        Checkpoint(f"google/{KEY}-base-generator", KEY, None, note="generator: fills masks"),
        # The ELECTRA paper's sizes (its Table 1); the seed articles quote none for ELECTRA.
        Checkpoint(
            f"google/{KEY}-small-discriminator",
            KEY,
            14,
            "14M (ELECTRA-Small, paper figure)",
            note="discriminator: replaced token detection",
        ),
        Checkpoint(
            f"google/{KEY}-base-discriminator",
            KEY,
            110,
            "110M (ELECTRA-Base, paper figure)",
            note="discriminator: replaced token detection",
        ),
    ),
    bundled="",  # no bundled ELECTRA: the official checkpoints (HF cache) or a local folder
    base_checkpoint=f"google/{KEY}-base-discriminator",
    summary=(
        "A small MLM generator replaces 15% of tokens; the discriminator (the model kept) predicts for every "
        "token whether it was replaced, so it learns from all tokens, not only the masked ones."
    ),
    head_output="attention.output.dense",
    token_types=True,
    piece_kind="wordpiece",
    specials=dict(cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]"),
    layer_parts=layers.bert_layers,  # BERT's layers; the E -> H embedding projection is handled there
    head_parts=electra_head,
    mlm_head=electra_mlm,
    # ELECTRA-Small's shape in miniature: embeddings (E) smaller than hidden (H), so the projection runs
    tiny_extra=dict(embedding_size=16),
    tiny_tokenizer="bert-uncased",
    config_facts=(
        ("embedding size E", "embedding_size"),
        ("hidden size H", "hidden_size"),
        ("layers", "num_hidden_layers"),
        ("heads", "num_attention_heads"),
        ("positions", "max_position_embeddings"),
    ),
)

FAMILY = ELECTRA  # the name core/registry/__init__.py collects the other family modules by

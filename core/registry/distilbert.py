"""DistilBERT: a 6-layer student of BERT-base, distilled with MLM, soft-logit KL and hidden-state cosine losses."""

from core.registry import layers
from core.registry.types import Checkpoint, Family, GlueClaim, SpeedClaim

FAMILY = Family(
    key="distilbert",
    label="DistilBERT",
    model_type="distilbert",
    mask_token="[MASK]",
    pair_head=None,
    pair_head_note=(
        "DistilBERT has no sentence-pair head: it was distilled from BERT with MLM, soft-logit KL "
        "and hidden-state cosine losses only, and it has no token-type embeddings."
    ),
    tokenizer_kind="WordPiece",
    position_embeddings="learned absolute, 512",
    objectives=("MLM", "distillation (KL)", "hidden cosine"),
    classes={
        "base": "DistilBertModel",
        "mlm": "DistilBertForMaskedLM",
        "pretraining": "DistilBertForMaskedLM",
        "seqcls": "DistilBertForSequenceClassification",
    },
    checkpoints=(Checkpoint("distilbert-base-uncased", "distilbert", 66, "66M, ~1.7x faster than BERT-base"),),
    bundled="distilbert-mini",
    base_checkpoint="distilbert-base-uncased",
    summary="6-layer student of BERT-base (every other layer), triple loss; ~40% smaller, ~1.7x faster.",
    head_output="attention.out_lin",
    token_types=False,
    piece_kind="wordpiece",
    distilled_from="bert",
    dropout_keys=("dropout", "seq_classif_dropout"),
    specials=dict(cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]"),
    qk_modules=("q_lin", "k_lin"),
    value_proj=("attention.v_lin", 0, 1),
    layer_parts=layers.distilbert_layers,
    head_parts=layers.distilbert_head,
    mlm_head=layers.distilbert_mlm,
    speed_claims=(SpeedClaim("bert", "DistilBERT is about 1.7x faster than BERT-base", 1.7),),
    glue_claim=GlueClaim("DistilBERT", (82.8, 88.5, 89.3, 91.3, 48.7)),
    size_keys=dict(
        hidden="dim", layers="n_layers", heads="n_heads", ffn="hidden_dim", max_pos="max_position_embeddings"
    ),
    tiny_tokenizer="bert-uncased",
)

"""ALBERT: factorized embeddings, one layer shared across depth, SOP, SentencePiece Unigram."""

from core.registry import layers
from core.registry.types import Checkpoint, Family, GlueClaim, SpeedClaim

FAMILY = Family(
    key="albert",
    label="ALBERT",
    model_type="albert",
    mask_token="[MASK]",
    pair_head="sop",
    pair_head_note="ALBERT was pretrained with Sentence Order Prediction: its SOP head says whether A and B are in order.",
    tokenizer_kind="SentencePiece Unigram",
    position_embeddings="learned absolute, 512",
    objectives=("MLM (n-gram)", "SOP"),
    classes={
        "base": "AlbertModel",
        "mlm": "AlbertForMaskedLM",
        "pretraining": "AlbertForPreTraining",
        "seqcls": "AlbertForSequenceClassification",
    },
    checkpoints=(
        Checkpoint("albert-base-v2", "albert", 12, "12M (ALBERT-base)"),
        Checkpoint("albert-large-v2", "albert", 18, "18M (ALBERT-large)"),
        Checkpoint("albert-xlarge-v2", "albert", 59, "59M (ALBERT-xlarge)"),
    ),
    bundled="albert-mini",
    base_checkpoint="albert-base-v2",
    summary="Factorized embeddings (V×E + E×H) and one layer shared across depth; SOP instead of NSP.",
    head_output="attention.dense",
    value_proj=("attention.value", 0, 1),
    token_types=True,
    piece_kind="unigram",
    shared_layers=True,
    dropout_keys=("hidden_dropout_prob", "classifier_dropout_prob"),
    specials=dict(cls_token="[CLS]", sep_token="[SEP]", pad_token="<pad>", unk_token="<unk>", mask_token="[MASK]"),
    layer_parts=layers.albert_layers,
    head_parts=layers.albert_head,
    speed_claims=(SpeedClaim("bert", "ALBERT-base is not faster at inference despite ~9x fewer parameters", 1.0),),
    glue_claim=GlueClaim("ALBERT-base", (84.2, 90.3, 91.2, 93.9, 54.8)),
    # E < H keeps the factorization visible; no dropout so a tiny model's outputs are repeatable in train mode too
    tiny_extra=dict(embedding_size=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    config_facts=(("embedding size E", "embedding_size"), ("layer groups", "num_hidden_groups")),
)

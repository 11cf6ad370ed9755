"""BERT: the original bidirectional encoder (MLM + NSP, WordPiece, token types)."""

from core.registry import layers
from core.registry.types import Checkpoint, Family, GlueClaim

FAMILY = Family(
    key="bert",
    label="BERT",
    model_type="bert",
    mask_token="[MASK]",
    pair_head="nsp",
    pair_head_note="BERT was pretrained with Next Sentence Prediction: its NSP head says whether B follows A.",
    tokenizer_kind="WordPiece",
    position_embeddings="learned absolute, 512",
    objectives=("MLM", "NSP"),
    classes={
        "base": "BertModel",
        "mlm": "BertForMaskedLM",
        "pretraining": "BertForPreTraining",
        "seqcls": "BertForSequenceClassification",
    },
    checkpoints=(
        Checkpoint("bert-base-uncased", "bert", 110, "110M (BERT-Base)"),
        Checkpoint("bert-large-uncased", "bert", 340, "340M, also quoted as 334M (BERT-Large)"),
        Checkpoint("bert-base-chinese", "bert", None, language="zh"),
        Checkpoint(
            "hfl/chinese-macbert-base",
            "bert",
            None,
            language="zh",
            mlm_as_correction=True,
            note="MacBERT: whole-word and n-gram masking with similar words in place of [MASK]",
        ),
    ),
    bundled="bert-mini",
    base_checkpoint="bert-base-uncased",
    summary="Bidirectional Transformer encoder; MLM (15%, 80/10/10) + NSP; WordPiece 30K.",
    head_output="attention.output.dense",
    token_types=True,
    piece_kind="wordpiece",
    specials=dict(cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]"),
    layer_parts=layers.bert_layers,
    head_parts=layers.bert_head,
    glue_claim=GlueClaim("BERT-base", (84.6, 89.2, 90.5, 93.5, 52.1)),
    tiny_tokenizer="bert-uncased",
)

"""RoBERTa: BERT retrained without NSP, dynamic masking, byte-level BPE, positions offset past the padding index."""

from core.registry import layers
from core.registry.types import Checkpoint, Family, GlueClaim

FAMILY = Family(
    key="roberta",
    label="RoBERTa",
    model_type="roberta",
    mask_token="<mask>",
    pair_head=None,
    pair_head_note=(
        "RoBERTa has no sentence-pair head: its authors dropped NSP after finding that MLM alone, "
        "on full-length contiguous text, did as well or better downstream."
    ),
    tokenizer_kind="Byte-level BPE",
    position_embeddings="learned absolute, 512 (+2 offset)",
    objectives=("MLM (dynamic masking)",),
    classes={
        "base": "RobertaModel",
        "mlm": "RobertaForMaskedLM",
        "pretraining": "RobertaForMaskedLM",
        "seqcls": "RobertaForSequenceClassification",
    },
    checkpoints=(
        Checkpoint("roberta-base", "roberta", 125, "125M (RoBERTa-base)"),
        Checkpoint("roberta-large", "roberta", 355, "355M (not in the articles; paper figure)"),
        Checkpoint(
            "hfl/chinese-roberta-wwm-ext",
            "roberta",
            None,
            language="zh",
            model_type="bert",
            note="RoBERTa-style training (whole-word masking, no NSP) on BERT code and a WordPiece vocab",
        ),
        Checkpoint(
            "hfl/rbt3",
            "roberta",
            None,
            language="zh",
            model_type="bert",
            note="RoBERTa-wwm-ext cut to its first 3 layers and trained on: BERT code, WordPiece vocab",
        ),
    ),
    bundled="roberta-mini",
    base_checkpoint="roberta-base",
    summary="BERT retrained longer on 10x data; no NSP; dynamic masking; byte-level BPE 50K.",
    head_output="attention.output.dense",
    token_types=False,
    piece_kind="bpe",
    specials=dict(
        bos_token="<s>",
        cls_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
    ),
    layer_parts=layers.bert_layers,
    head_parts=layers.roberta_head,
    positions_after_pad=True,
    pair_separators=2,
    glue_claim=GlueClaim("RoBERTa-base", (87.6, 91.9, 92.8, 94.8, 63.6)),
    tiny_extra=dict(type_vocab_size=1),
    tiny_vocab=300,
)

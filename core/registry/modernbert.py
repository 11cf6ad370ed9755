"""ModernBERT: today's BERT. Rotary positions, alternating local/global attention, GLU feed-forward, pre-LayerNorm,
an 8192-token context and a code-aware BPE vocabulary; MLM only (30% masked)."""

from core.registry import layers
from core.registry.types import Checkpoint, Family

FAMILY = Family(
    key="modernbert",
    label="ModernBERT",
    model_type="modernbert",
    mask_token="[MASK]",
    pair_head=None,
    pair_head_note="ModernBERT has no sentence-pair head: it was pretrained with MLM alone (30% masked, no NSP).",
    tokenizer_kind="BPE (OLMo-style, 50K)",
    position_embeddings="rotary (RoPE), 8192",
    objectives=("MLM (30%)",),
    classes={
        "base": "ModernBertModel",
        "mlm": "ModernBertForMaskedLM",
        "pretraining": "ModernBertForMaskedLM",
        "seqcls": "ModernBertForSequenceClassification",
    },
    checkpoints=(
        Checkpoint("answerdotai/ModernBERT-base", "modernbert", 149, "149M (not in the articles; ModernBERT paper)"),
        Checkpoint("answerdotai/ModernBERT-large", "modernbert", 395, "395M (not in the articles; ModernBERT paper)"),
    ),
    bundled="",
    base_checkpoint="answerdotai/ModernBERT-base",
    summary=(
        "Rotary positions, local (128-token) attention with global attention every third layer, GLU, "
        "pre-LayerNorm; 8192-token context; trained on 2T tokens."
    ),
    head_output="attn.Wo",
    final_norm="final_norm",  # pre-LayerNorm layers: the base model normalises after the last one
    token_types=False,
    piece_kind="bpe",
    specials=dict(cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]"),
    qk_modules=None,
    value_proj=("attn.Wqkv", 2, 3),
    qk_note=(
        "ModernBERT computes q, k and v in one fused projection (Wqkv) and rotates q and k by their positions "
        "inside attention (rotary), so there are no separate query and key projections to show."
    ),
    mlm_head=layers.modernbert_mlm,
    dropout_keys=("mlp_dropout", "classifier_dropout"),
    tiny_extra=dict(global_attn_every_n_layers=2, local_attention=16),
    tiny_vocab=300,
    config_facts=(
        ("context (tokens)", "max_position_embeddings"),
        ("global attention every n layers", "global_attn_every_n_layers"),
        ("local attention window (tokens)", "local_attention"),
    ),
)

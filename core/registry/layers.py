"""Small adapters: where a family's layer parts and MLM head live inside a transformers model.

``*_layers(base, lin)`` give the fast masked forward (core.models.masked_forward) and the layer lens (core.inspect.lens) what they
write out: the embedding step and one parts tuple per layer application (``types.LayerParts``); they return None
for options that forward does not reproduce (relative positions, ALBERT inner groups), which then run the
transformers forward. ``*_head`` give the MLM head as (dense, activation, layer norm, decoder).
"""

from __future__ import annotations

from typing import Any

from core.registry.types import Embed, HeadTuple, LayerTuple, Lin, MlmHead


def _bert_layer(layer: Any) -> LayerTuple:  # BertLayer / RobertaLayer / XLMRobertaLayer
    sa, so = layer.attention.self, layer.attention.output
    return (
        sa.query,
        sa.key,
        sa.value,
        sa.num_attention_heads,
        so.dense,
        so.LayerNorm,
        layer.intermediate.dense,
        layer.intermediate.intermediate_act_fn,
        layer.output.dense,
        layer.output.LayerNorm,
    )


def bert_layers(base: Any, lin: Lin) -> tuple[Embed, list[LayerTuple]] | None:
    """BERT-style encoders (BERT, RoBERTa, XLM-RoBERTa, ELECTRA): absolute positions only."""
    if getattr(base.config, "position_embedding_type", "absolute") != "absolute":
        return None
    embed = getattr(base, "embeddings_project", None)  # ELECTRA: embeddings smaller than hidden, projected up
    if embed is not None:
        return (lambda ids: lin(embed, base.embeddings(input_ids=ids))), [_bert_layer(x) for x in base.encoder.layer]
    return (lambda ids: base.embeddings(input_ids=ids)), [_bert_layer(x) for x in base.encoder.layer]


def albert_layers(base: Any, lin: Lin) -> tuple[Embed, list[LayerTuple]] | None:
    """ALBERT: the shared layer once per depth, by transformers' own layer -> group rule; one inner group only."""
    cfg = base.config
    if cfg.inner_group_num != 1:
        return None
    n, groups = cfg.num_hidden_layers, base.encoder.albert_layer_groups
    group_of = [int(i / (n / cfg.num_hidden_groups)) for i in range(n)]

    def parts(layer: Any) -> LayerTuple:  # AlbertLayer
        at = layer.attention
        return (
            at.query,
            at.key,
            at.value,
            at.num_attention_heads,
            at.dense,
            at.LayerNorm,
            layer.ffn,
            layer.activation,
            layer.ffn_output,
            layer.full_layer_layer_norm,
        )

    return (
        (lambda ids: lin(base.encoder.embedding_hidden_mapping_in, base.embeddings(input_ids=ids))),
        [parts(groups[g].albert_layers[0]) for g in group_of],
    )


def distilbert_layers(base: Any, lin: Lin) -> tuple[Embed, list[LayerTuple]] | None:
    """DistilBERT's TransformerBlocks."""

    def parts(layer: Any) -> LayerTuple:
        at = layer.attention
        return (
            at.q_lin,
            at.k_lin,
            at.v_lin,
            at.n_heads,
            at.out_lin,
            layer.sa_layer_norm,
            layer.ffn.lin1,
            layer.ffn.activation,
            layer.ffn.lin2,
            layer.output_layer_norm,
        )

    return (lambda ids: base.embeddings(input_ids=ids)), [parts(x) for x in base.transformer.layer]


def bert_head(model: Any) -> HeadTuple | None:
    p = getattr(getattr(model, "cls", None), "predictions", None)  # BertForMaskedLM / BertForPreTraining
    if p is None:
        return None
    return p.transform.dense, p.transform.transform_act_fn, p.transform.LayerNorm, p.decoder


def roberta_head(model: Any) -> HeadTuple | None:
    import torch.nn.functional as F

    h = getattr(model, "lm_head", None)  # RobertaLMHead: dense, gelu, layer_norm, decoder
    return None if h is None else (h.dense, F.gelu, h.layer_norm, h.decoder)


def albert_head(model: Any) -> HeadTuple | None:
    p = getattr(model, "predictions", None)
    return None if p is None else (p.dense, p.activation, p.LayerNorm, p.decoder)


def distilbert_head(model: Any) -> HeadTuple | None:
    if not hasattr(model, "vocab_projector"):
        return None
    return model.vocab_transform, model.activation, model.vocab_layer_norm, model.vocab_projector


def distilbert_mlm(model: Any) -> MlmHead | None:
    """DistilBertForMaskedLM keeps its head as four attributes of the model, not one module."""
    if not hasattr(model, "vocab_projector"):
        return None
    return lambda h: model.vocab_projector(model.vocab_layer_norm(model.activation(model.vocab_transform(h))))


def modernbert_mlm(model: Any) -> MlmHead | None:
    """ModernBertForMaskedLM: a prediction head, then the decoder (the tied embeddings)."""
    if not hasattr(model, "head") or not hasattr(model, "decoder"):
        return None
    return lambda h: model.decoder(model.head(h))

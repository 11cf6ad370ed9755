"""Parameter anatomy of a checkpoint, computed from its config on the meta device (no weights needed)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from core.registry import (
    GENERIC,
    build_model,
    checkpoint_info,
    family_of_model_type,
    official_config,
)
from core.registry import (
    family as family_entry,
)
from core.registry.shape import shape

PARTS = ("embeddings", "encoder", "pooler", "heads")


@dataclass(frozen=True)
class ParamBreakdown:
    checkpoint: str
    family: str
    embeddings: int
    encoder: int
    pooler: int
    heads: int
    claim_m: float | None
    claim_note: str
    layers: int
    hidden: int
    heads_n: int
    ffn: int
    vocab: int
    embedding_size: int
    shared_layers: bool
    facts: tuple[tuple[str, str, object], ...] = ()  # (label, config key, value): the family's config_facts here

    @property
    def backbone(self) -> int:
        """Encoder model without task heads: what the papers' parameter counts refer to."""
        return self.embeddings + self.encoder + self.pooler

    @property
    def total(self) -> int:
        return self.backbone + self.heads

    @property
    def diff_m(self) -> float | None:
        return None if self.claim_m is None else self.backbone / 1e6 - self.claim_m


def _part(name: str) -> str:
    """Where a parameter of the base model belongs. ALBERT's E->H projection sits in the encoder in transformers'
    code (ELECTRA's beside it), but it is part of the factorized embedding (V x E + E x H), so count it there."""
    if "embedding_hidden_mapping_in" in name or "embeddings_project" in name or ".embeddings." in name:
        return "embeddings"
    if "pooler" in name:
        return "pooler"
    return "encoder"  # the layers, whatever the family calls them (encoder.layer, transformer.layer, layers)


def _unique(model: Any) -> Iterator[tuple[str, Any]]:  # a torch model: (name, parameter) pairs
    seen: set[int] = set()
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) not in seen:
            seen.add(id(p))
            yield name, p


def _count(base) -> dict[str, int]:
    counts = dict.fromkeys(PARTS, 0)
    for name, p in _unique(base):
        counts[_part("x." + name)] += p.numel()
    return counts


def _head_count(pre) -> int:
    """Parameters of the pretraining model outside its base model (tied decoders are the embeddings: not here)."""
    inner = {id(p) for p in pre.base_model.parameters()}
    return sum(p.numel() for _, p in _unique(pre) if id(p) not in inner)


def breakdown_from_config(config, checkpoint: str = "", family: str | None = None) -> ParamBreakdown:
    """Count parameters of the pretraining model (backbone + MLM/NSP/SOP heads) built on the meta device.

    Tied weights (MLM decoder = word embeddings) are counted once, as embeddings.
    """
    import torch

    fam_key = family_of_model_type(config.model_type) or family or GENERIC.key
    with torch.device("meta"):
        base = build_model(fam_key, "base", config)  # with the pooler, as the papers count it
        pre = build_model(fam_key, "pretraining", config)
    counts = _count(base)
    counts["heads"] = _head_count(pre)
    info = checkpoint_info(checkpoint)
    c, sh = config, shape(config)
    facts = tuple(
        (label, key, getattr(c, key))
        for label, key in family_entry(fam_key).config_facts
        if getattr(c, key, None) is not None
    )
    return ParamBreakdown(
        checkpoint=checkpoint,
        family=fam_key,
        claim_m=info.claim_m if info else None,
        claim_note=info.claim_note if info else "",
        layers=sh.layers,
        hidden=sh.hidden,
        heads_n=sh.heads,
        ffn=sh.ffn,
        vocab=sh.vocab,
        embedding_size=sh.embedding,
        shared_layers=family_entry(fam_key).shared_layers,
        facts=facts,
        **counts,
    )


def breakdown(checkpoint_id: str) -> ParamBreakdown:
    """Breakdown of an official checkpoint from its shipped config. Raises ModelLoadError if none ships."""
    info = checkpoint_info(checkpoint_id)
    return breakdown_from_config(official_config(checkpoint_id), checkpoint_id, info.family if info else None)


@dataclass(frozen=True)
class Factorization:
    vocab: int
    hidden: int
    embedding: int
    full: int  # V x H
    factorized: int  # V x E + E x H
    saved: int
    ratio: float


def albert_factorization(vocab: int, hidden: int, embedding: int) -> Factorization:
    """V x H against V x E + E x H. Raises ValueError for non-positive sizes or E > H."""
    for name, v in (("V", vocab), ("H", hidden), ("E", embedding)):
        if not isinstance(v, int) or v <= 0:
            raise ValueError(f"{name} must be a positive whole number, got {v!r}.")
    if embedding > hidden:
        raise ValueError(f"E ({embedding}) larger than H ({hidden}) adds parameters: choose E <= H.")
    full = vocab * hidden
    fact = vocab * embedding + embedding * hidden
    return Factorization(vocab, hidden, embedding, full, fact, full - fact, full / fact)

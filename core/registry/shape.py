"""A model's shape, read from its config in one place: layers, hidden width, heads, feed-forward width, vocabulary
and the input embeddings' width.

Configs name these differently (DistilBERT's ``n_layers``, ``dim``, ``n_heads``, ``hidden_dim``; ALBERT's
``embedding_size``). transformers' ``attribute_map`` aliases some of them, not all, so every reader asks here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelShape:
    layers: int  # layer applications (ALBERT: its shared layer, once per depth)
    hidden: int  # width of the hidden states
    heads: int
    ffn: int  # width of the feed-forward's inner layer
    vocab: int
    embedding: int  # width of the input embeddings (ALBERT's E; the hidden width elsewhere)

    @property
    def depths(self) -> int:
        """Hidden-state depths a forward returns: the embeddings and every layer."""
        return self.layers + 1


def _first(cfg: Any, *names: str) -> int:
    for name in names:
        value = getattr(cfg, name, None)
        if value is not None:
            return int(value)
    return 0


def shape(config: Any) -> ModelShape:
    """The shape of a model with this config (a transformers config; missing sizes read 0)."""
    hidden = _first(config, "hidden_size", "dim")
    return ModelShape(
        layers=_first(config, "num_hidden_layers", "n_layers"),
        hidden=hidden,
        heads=_first(config, "num_attention_heads", "n_heads"),
        ffn=_first(config, "intermediate_size", "hidden_dim"),
        vocab=_first(config, "vocab_size"),
        embedding=_first(config, "embedding_size") or hidden,
    )

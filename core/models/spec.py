"""What a model is, apart from how it is loaded: ``ModelSpec`` (what the user picked) and ``LoadedModel`` (a model
and its tokenizer, ready for inference).

Views (app/views) name these types without importing the loader (core.models.loading, which re-exports them):
tests/test_house.py keeps loading and job starting out of views.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.base.messages import msg
from core.registry import Family, ModelLoadError, family, position_offset
from core.registry.generic import derive


@dataclass(frozen=True)
class ModelSpec:
    """What the user picked: a family, a checkpoint (Hub id, bundled id or folder) and a device choice."""

    family: str
    checkpoint: str
    device: str = "auto"
    quant: str = ""  # "int8": dynamic int8 linears after loading (core.compare.int8; CPU inference only)

    def __post_init__(self) -> None:
        family(self.family)
        if not self.checkpoint or not self.checkpoint.strip():
            raise ModelLoadError(msg("load.no_checkpoint_given"))
        if self.device not in ("auto", "cpu", "cuda"):
            raise ModelLoadError(msg("load.unknown_device_use_auto", device=self.device))
        if self.quant not in ("", "int8"):
            raise ModelLoadError(msg("load.unknown_quantization_use_fp", quant=self.quant))
        if self.quant and self.device == "cuda":
            raise ModelLoadError(msg("load.int8_cpu_only"))


@dataclass
class LoadedModel:
    """A model and its tokenizer, ready for inference. Never mutate a shared one: copy it first."""

    model: Any
    tokenizer: Any
    spec: ModelSpec
    task: str
    source: str
    path: str
    device: str
    missing_keys: tuple[str, ...] = ()
    _derived: Family | None = field(default=None, repr=False, compare=False)
    # how another process loads the same model: (loader "module:function", args, kwargs); core.runtime.backend sends it to
    # a model replica (Ray). None when loaded with a dtype or extra model arguments: it then always runs here.
    recipe: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def family(self) -> Family:
        """The spec's family; for the generic family, derived from this checkpoint's config and tokenizer."""
        fam = family(self.spec.family)
        if not fam.generic:
            return fam
        if self._derived is None:
            self._derived = derive(self.model.config, self.tokenizer)
        return self._derived

    @property
    def max_tokens(self) -> int:
        """How many tokens (special ones included) this model reads at most."""
        return max_tokens(self.model, self.tokenizer)

    @property
    def head_missing(self) -> bool:
        """True when the task's head weights were not in the checkpoint (they would be random)."""
        # transformers' own split: weights under base_model_prefix are the encoder's, everything else a task head
        # (BERT's cls., RoBERTa's lm_head, ModernBERT's head. and decoder., any family's classifier)
        prefix = str(getattr(self.model, "base_model_prefix", "") or "") + "."
        return any(not k.startswith(prefix) for k in self.missing_keys) if prefix != "." else bool(self.missing_keys)


def max_tokens(model, tokenizer) -> int:
    """How many tokens (special ones included) the model reads at most: its position table (less the offset of
    families whose positions start after the padding index) and the tokenizer's own limit."""
    cfg = model.config
    n = int(getattr(cfg, "max_position_embeddings", 512) or 512) - position_offset(cfg)
    tm = getattr(tokenizer, "model_max_length", n) or n
    return int(min(n, tm if tm < 10**6 else n))

"""The registry's types: a family (``Family``), an official checkpoint (``Checkpoint``), the claims the seed articles
make about them, and the error every loading problem raises. The families themselves live one per module beside
this one (core/registry/<family>.py); core/registry/__init__.py collects them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.base.messages import Problem
from core.base.paths import scrub


class ModelLoadError(Problem, ValueError):
    """A checkpoint could not be resolved or loaded. The message names the problem and the fix."""

    def __str__(self) -> str:  # hosted mode: the message names no server path (core.base.paths.scrub)
        return scrub(super().__str__())


@dataclass(frozen=True)
class Checkpoint:
    id: str
    family: str
    claim_m: float | None = None  # parameters the seed articles claim, in millions
    claim_note: str = ""
    language: str = "en"
    model_type: str | None = None  # architecture when it differs from the family's (hfl's RoBERTa is BERT code)
    note: str = ""
    # pretrained with similar words in place of [MASK] (MacBERT's "MLM as correction"): its MLM head never saw a mask
    # token, so what it puts behind one is not a meaningful fill-mask answer (Fill-mask says so)
    mlm_as_correction: bool = False


@dataclass(frozen=True)
class SpeedClaim:
    """A claim the seed articles make about this family's inference speed against another family's."""

    baseline: str  # family key of the model it is compared with
    text: str
    ratio: float  # claimed speedup (baseline latency / this family's latency)


@dataclass(frozen=True)
class GlueClaim:
    """The third seed article's GLUE dev figures for this family's base model (core.compare.glue_claims.GLUE_COLUMNS)."""

    model: str  # the article's name for the model, as printed
    figures: tuple[float, ...]


# The sizes every tiny test model shares (transformers' BertModelTester habit), by EncoderLab's own names; each
# family's ``size_keys`` says which config key takes each one.
TINY = dict(hidden=32, layers=2, heads=4, ffn=64, max_pos=128)
SIZE_KEYS = dict(
    hidden="hidden_size",
    layers="num_hidden_layers",
    heads="num_attention_heads",
    ffn="intermediate_size",
    max_pos="max_position_embeddings",
)

# A family's fast-forward adapter: (base model, linear fn) -> (embed(ids) -> (B, T, H), one parts tuple per layer
# application), or None where this model's options need the transformers forward. A parts tuple is
# (q, k, v, heads, out, norm1, ffn_in, act, ffn_out, norm2) of one post-LayerNorm layer (core.models.masked_forward.layer_forward).
# torch and transformers are followed as Any (pyproject.toml's mypy section), so a model, a module and a tensor are Any.
Embed = Callable[[Any], Any]  # input ids (B, T) -> embeddings (B, T, H)
Lin = Callable[[Any, Any], Any]  # (linear module, x) -> the linear applied to x (core.models.packed_linear.linears)
LayerTuple = tuple[Any, Any, Any, int, Any, Any, Any, Any, Any, Any]  # one layer's parts, in the order above
LayerParts = Callable[[Any, Lin], "tuple[Embed, list[LayerTuple]] | None"]
# A family's MLM head as parts: model -> (dense, activation, layer norm, decoder) or None when it has none.
HeadTuple = tuple[Any, Any, Any, Any]
HeadParts = Callable[[Any], "HeadTuple | None"]
MlmHead = Callable[[Any], Any]  # hidden states (n, H) -> logits (n, V)


@dataclass(frozen=True)
class Family:
    key: str
    label: str
    model_type: str
    mask_token: str
    pair_head: str | None  # "nsp", "sop" or None
    pair_head_note: str
    tokenizer_kind: str  # display text only: behaviour follows piece_kind / specials
    position_embeddings: str  # display text
    objectives: tuple[str, ...]  # display text
    classes: dict[str, str]  # task -> transformers class name
    checkpoints: tuple[Checkpoint, ...]
    bundled: str  # folder name under the zoo ("" when EncoderLab ships no model of this family)
    base_checkpoint: str  # the base-size architecture used for the Speed page ("" when none)
    summary: str = ""
    head_output: str = ""  # the attention output projection, a dotted path inside one layer (core.inspect.ablation)
    token_types: bool = False  # the model takes token_type_ids (segment A/B embeddings)
    piece_kind: str = "wordpiece"  # "wordpiece" (## continues a word), "bpe" (Ġ starts one), "unigram" (▁ starts one)
    specials: dict[str, str] = field(default_factory=dict)  # the tokenizer's special tokens, by transformers' names
    shared_layers: bool = False  # one set of layer weights applied at every depth (ALBERT)
    distilled_from: str | None = None  # the family key of the teacher this family's checkpoints were distilled from
    dropout_keys: tuple[str, str] = ("hidden_dropout_prob", "classifier_dropout")  # config keys: hidden, classifier
    # --- where things live, for the code that reaches inside a model
    qk_modules: tuple[str, str] | None = ("query", "key")  # last names of the q and k projections; None: fused
    qk_note: str = ""  # why there is no q/k view, when qk_modules is None
    # the value projection: its dotted path inside one layer, which part of its output holds the values and in how
    # many equal parts the output splits (0 of 1: all of it; 2 of 3: the last third of a fused q|k|v); None: unknown
    value_proj: tuple[str, int, int] | None = ("attention.self.value", 0, 1)
    layer_parts: LayerParts | None = (
        None  # fast masked forward (core.models.masked_forward); None: transformers forward
    )
    head_parts: HeadParts | None = None  # the MLM head written out for the fast forward; None: the head as is
    # model -> its head as a function (None for a model without one), for families with no single head module
    mlm_head: Callable[[Any], MlmHead | None] | None = None
    positions_after_pad: bool = False  # position ids start after the padding index (RoBERTa's offset of pad + 1)
    # the norm the base model applies after its last layer, a name under the base model ("": none; the layers' own
    # output is what the MLM head reads)
    final_norm: str = ""
    pair_separators: int = 1  # separators between A and B: [SEP] (1) or </s></s> (2)
    # --- what the seed articles claim about it (data the pages show beside what they measure)
    speed_claims: tuple[SpeedClaim, ...] = ()
    glue_claim: GlueClaim | None = None
    # --- the tiny random test model (core.models.tiny): the config keys of the shared sizes and extra config values
    size_keys: dict[str, str] = field(default_factory=lambda: dict(SIZE_KEYS))
    tiny_extra: dict[str, Any] = field(default_factory=dict)
    tiny_model_type: str = ""  # the tiny model's architecture when it is not model_type (the generic family's)
    tiny_tokenizer: str = "train"  # "bert-uncased": the real bert-base-uncased vocab; "train": trained on examples
    tiny_vocab: int = 200  # vocabulary size a trained tiny tokenizer gets
    # --- the architecture as the Models page shows it, from a config: (label, config key) pairs present in it
    config_facts: tuple[tuple[str, str], ...] = ()
    generic: bool = False  # derived from a checkpoint's own config and tokenizer (core.registry.generic)
    # the languages the bundled model reads, as Checkpoint.language ("en", "zh", "multi"): a Chinese-capable bundled
    # model ("zh" or "multi") is offered first in 中文 and gets Chinese examples (core.registry.reads_chinese)
    bundled_language: str = "en"

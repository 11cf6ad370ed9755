"""The family registry: everything that differs between encoder families, as data and small adapters.

Pages and core modules ask this package about a family (its mask token, pair head, piece kind, special tokens,
classes per task, official checkpoints and the figures the seed articles claim for them, where its heads and
attention projections live, how the fast masked forward runs it, its tiny test model) instead of naming one.
core.models.loading resolves and loads checkpoints with it.

One module per family (core/registry/bert.py, ...) holds its ``Family``; ``layers.py`` the adapters several share;
``generic.py`` the family of any other masked-LM encoder, derived from the checkpoint. Adding a family: one module
with its entry, collected below, its official configs in assets/configs, and its tiny config (``tiny_extra``,
``size_keys``); the tests parametrize over FAMILIES by themselves.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from core.base.messages import msg
from core.base.paths import ASSETS
from core.registry import albert, bert, distilbert, generic, modernbert, roberta, xlm_roberta
from core.registry.shape import shape
from core.registry.types import SIZE_KEYS as SIZE_KEYS  # "X as X": re-exported (mypy's no_implicit_reexport)
from core.registry.types import TINY as TINY
from core.registry.types import Checkpoint as Checkpoint
from core.registry.types import Family as Family
from core.registry.types import GlueClaim as GlueClaim
from core.registry.types import MlmHead as MlmHead
from core.registry.types import ModelLoadError as ModelLoadError
from core.registry.types import SpeedClaim as SpeedClaim

CONFIG_DIR = ASSETS / "configs"

TASKS = ("base", "mlm", "pretraining", "seqcls", "tokcls", "rtd")  # rtd: a replaced-token detector (ELECTRA)

FAMILIES: dict[str, Family] = {
    m.FAMILY.key: m.FAMILY for m in (bert, roberta, albert, distilbert, xlm_roberta, modernbert)
}
GENERIC = generic.FAMILY  # not in FAMILIES: it has no checkpoints of its own; family(GENERIC.key) returns it

PAIR_HEADS = {"nsp": "Next Sentence Prediction", "sop": "Sentence Order Prediction"}
PAIR_PROB_LABELS = {"nsp": "P(IsNext)", "sop": "P(in order)"}  # what the pair head's positive class means


def family(key: str) -> Family:
    """Return the registry entry for a family key (the generic family's too); ModelLoadError for an unknown one."""
    if key == GENERIC.key:
        return GENERIC
    try:
        return FAMILIES[key]
    except KeyError:
        raise ModelLoadError(
            msg("registry.unknown_family_choose_one", key=key, choices=", ".join(picker_families()))
        ) from None


def picker_families() -> list[str]:
    """The family keys a user can pick: every registered family, then the generic one."""
    return [*FAMILIES, GENERIC.key]


def families_with(**fields: Any) -> list[Family]:
    """The families whose fields equal the given values, e.g. ``families_with(pair_head="sop")``."""
    return [f for f in FAMILIES.values() if all(getattr(f, k) == v for k, v in fields.items())]


def bundled_families() -> list[Family]:
    """The families EncoderLab ships a small pretrained model of (assets/models)."""
    return [f for f in FAMILIES.values() if f.bundled]


def official_checkpoints() -> list[Checkpoint]:
    return [c for f in FAMILIES.values() for c in f.checkpoints]


def checkpoint_info(checkpoint_id: str) -> Checkpoint | None:
    for c in official_checkpoints():
        if c.id == checkpoint_id:
            return c
    return None


def family_of_model_type(model_type: str) -> str | None:
    for f in FAMILIES.values():
        if f.model_type == model_type:
            return f.key
    return None


def family_of_config(config: Any) -> Family:
    """The registered family of a transformers config by its model_type, else the generic family (not derived)."""
    key = family_of_model_type(str(getattr(config, "model_type", "") or ""))
    return FAMILIES[key] if key else GENERIC


def _inner(model: Any) -> Any:
    """The transformers model itself, also inside a wrapper (core.train.finetune's mean-pool classifier holds one)."""
    return next((m for m in model.modules() if hasattr(m, "base_model") and hasattr(m, "config")), model)


def family_of_model(model: Any) -> Family:
    """The family of a loaded model (a wrapper holding one, e.g. core.train.finetune's pooling classifier, too)."""
    return family_of_config(_inner(model).config)


def bundled_id(family_key: str) -> str:
    """The id of the family's bundled model (encoderlab/NAME); ModelLoadError for a family that has none."""
    f = family(family_key)
    if not f.bundled:
        raise ModelLoadError(msg("registry.no_bundled_model", label=f.label))
    return f"encoderlab/{f.bundled}"


CHINESE_LANGUAGES = ("zh", "multi")  # a Checkpoint.language / Family.bundled_language that reads Chinese


def language_of(checkpoint: str) -> str | None:
    """The language a known checkpoint reads ("en", "zh", "multi"): an official one's, or a bundled model's
    (``encoderlab/NAME``: its family's ``bundled_language``); None for any other checkpoint (a folder, a Hub id)."""
    info = checkpoint_info(checkpoint)
    if info is not None:
        return info.language
    return next((f.bundled_language for f in FAMILIES.values() if f.bundled and checkpoint == bundled_id(f.key)), None)


def reads_chinese(checkpoint: str) -> bool:
    """Whether a known checkpoint was trained on Chinese (its language is zh or multi)."""
    return language_of(checkpoint) in CHINESE_LANGUAGES


def chinese_bundled() -> list[tuple[str, str]]:
    """(family, id) of the bundled models that read Chinese (offered first in 中文)."""
    return [
        (f.key, bundled_id(f.key)) for f in FAMILIES.values() if f.bundled and f.bundled_language in CHINESE_LANGUAGES
    ]


def piece_kind(tokenizer: Any, family_key: str | None = None) -> str:
    """How this tokenizer marks words: "wordpiece", "bpe" or "unigram", read from the tokenizer's own model, so a
    checkpoint on another family's vocabulary (hfl's Chinese RoBERTa is WordPiece) is read right. The family's
    ``piece_kind`` when the tokenizer does not say."""
    try:
        return generic.piece_kind(tokenizer)
    except (AttributeError, ValueError, TypeError):
        return family(family_key).piece_kind if family_key else "wordpiece"


def position_offset(config: Any) -> int:
    """Positions the model's table holds before the first real one (RoBERTa-style: padding index + 1), else 0."""
    if family_of_config(config).positions_after_pad:
        return int(getattr(config, "pad_token_id", 0) or 0) + 1
    return 0


def mlm_head(model: Any) -> MlmHead | None:
    """The model's MLM head as a function of hidden states (n, H) -> logits (n, V); None when it has none.

    The family's adapter when it has one; else the model's one head module beside its base model (BERT's ``cls``,
    RoBERTa's ``lm_head``, ALBERT's ``predictions``, DeBERTa's ``cls``, MPNet's ``lm_head``...), which takes hidden
    states as they come out of the encoder."""
    import torch

    fam = family_of_config(getattr(model, "config", None))
    if fam.mlm_head is not None:
        return fam.mlm_head(model)
    base = getattr(model, "base_model", None)
    if base is None or base is model or model.get_output_embeddings() is None:
        return None  # a bare encoder or a task model: no vocabulary projection
    out = model.get_output_embeddings()

    def holding(parent: Any) -> list[Any]:
        return [
            m
            for _, m in parent.named_children()
            if m is not base and isinstance(m, torch.nn.Module) and any(p is out.weight for p in m.parameters())
        ]

    heads = holding(model)
    if len(heads) != 1:
        return None
    head = heads[0]
    # BertForPreTraining's ``cls`` holds the MLM head beside the NSP head and also wants the pooled output: go down
    # while one child holds the decoder and is not the decoder itself (cls -> cls.predictions)
    while (
        head is not out and len(inner := holding(head)) == 1 and inner[0] is not out and len(list(head.children())) > 1
    ):
        head = inner[0]
    return cast(MlmHead, head)  # a torch.nn.Module (holding() keeps only those): called on hidden states


def pair_head_module(model: Any) -> Callable[[Any], Any] | None:
    """The NSP (BERT) or SOP (ALBERT) classifier, pooled (n, H) -> logits (n, 2); None when the model has none."""
    cls = getattr(model, "cls", None)
    if cls is not None and hasattr(cls, "seq_relationship"):  # BertForPreTraining / BertForNextSentencePrediction
        return cast(Callable[[Any], Any], cls.seq_relationship)  # a torch.nn.Linear, called on pooled states
    return getattr(model, "sop_classifier", None)  # AlbertForPreTraining


def final_norm(model: Any) -> Callable[[Any], Any] | None:
    """The norm the base model applies after its last layer (the family's ``final_norm``), or None."""
    name = family_of_model(model).final_norm
    return getattr(_inner(model).base_model, name, None) if name else None


def qk_modules(model: Any) -> tuple[str, str] | None:
    """Last names of the query and key projections in this model's layers; None when the family fuses them."""
    return family_of_model(model).qk_modules


def attention_layers(model: Any) -> list[tuple[int, Any]]:
    """(depth, attention output projection) for every depth of the encoder, from the family's ``head_output``.
    A layer shared across depth (ALBERT) appears once per depth, as the same module, by transformers' own
    layer -> group rule. Raises ModelLoadError for a model whose heads cannot be located (the generic family)."""
    base = _inner(model).base_model
    if not family_of_config(base.config).head_output:
        raise ModelLoadError(msg("registry.not_model_family_encoderlab", model_class=type(model).__name__))
    return _per_depth(model, family_of_config(base.config).head_output)


def value_projections(model: Any) -> list[tuple[int, Any]]:
    """(depth, value projection) for every depth, from the family's ``value_proj`` (its part of the output:
    ``family_of_model(model).value_proj``), shared layers as in ``attention_layers``. Raises ModelLoadError for a
    model whose value projections the registry does not locate (the generic family)."""
    fam = family_of_model(model)
    if fam.value_proj is None:
        raise ModelLoadError(msg("registry.value_projection_not_located", model_class=type(model).__name__))
    return _per_depth(model, fam.value_proj[0])


def _per_depth(model: Any, path: str) -> list[tuple[int, Any]]:
    """(depth, the module at ``path`` inside that depth's layer) for every depth of the encoder."""
    base = _inner(model).base_model
    cfg = base.config
    suffix = "." + path
    mods = [m for name, m in base.named_modules() if ("." + name).endswith(suffix)]  # in layer order
    n = int(cfg.num_hidden_layers)
    if len(mods) == n:
        return list(enumerate(mods))
    groups = int(getattr(cfg, "num_hidden_groups", 0) or 0)
    if groups and len(mods) == groups:  # shared layers: one module per group, each applied at several depths
        return [(i, mods[int(i / (n / groups))]) for i in range(n)]
    raise ModelLoadError(
        msg("registry.projections_not_one_per_layer", model_class=type(model).__name__, n_mods=len(mods), n=n)
    )


def encoder_layers(base_model: Any) -> list[Any] | None:
    """The encoder's per-layer modules in order (the one layer list fine-tuning freezes and attribution scores
    per layer), found through transformers' generic API: under the base model, the first list of
    ``num_hidden_layers`` modules of one class (config ``attribute_map`` gives every family that name). None when
    there is none, as for a layer shared across depth (ALBERT: one module, several passes)."""
    import torch  # lazy: the registry is read by pages that never build a model

    n = shape(base_model.config).layers
    if n <= 0:
        return None
    return next(
        (
            list(mod)
            for mod in base_model.modules()
            if isinstance(mod, torch.nn.ModuleList) and len(mod) == n and len({type(m) for m in mod}) == 1
        ),
        None,
    )


def model_class(family_key: str, task: str, model_type: str) -> Any:  # a transformers class (Any to mypy)
    """The transformers class for ``task``: the family of ``model_type`` when registered (hfl's RoBERTa is BERT
    code), else ``family_key``'s; the generic family's Auto classes for any other architecture."""
    import transformers

    if task not in TASKS:
        raise ModelLoadError(msg("registry.unknown_task_use_one", task=task, choices=", ".join(TASKS)))
    fam = FAMILIES.get(family_of_model_type(model_type) or "") or family(family_key)
    if task == "tokcls":  # every family has a *ForTokenClassification; the Auto class picks it from model_type
        return transformers.AutoModelForTokenClassification
    if task not in fam.classes:
        raise ModelLoadError(msg("registry.no_model_for_task", label=fam.label, task=task))
    return getattr(transformers, fam.classes[task])


def build_model(family_key: str, task: str, config: Any) -> Any:  # a torch.nn.Module (Any to mypy)
    """A fresh model of ``task`` from a config (random weights; under ``torch.device("meta")`` no memory)."""
    cls = model_class(family_key, task, str(getattr(config, "model_type", "")))
    return cls.from_config(config) if cls.__name__.startswith("Auto") else cls(config)


def official_config(checkpoint_id: str) -> Any:  # a transformers.PretrainedConfig (Any to mypy)
    """The shipped official config (assets/configs) as a transformers config object; no weights needed."""
    import transformers

    name = checkpoint_id.replace("/", "__") + ".json"
    path = CONFIG_DIR / name
    if not path.exists():
        raise ModelLoadError(msg("registry.no_shipped_config", checkpoint_id=checkpoint_id, path=path))
    d = json.loads(path.read_text())
    return transformers.AutoConfig.for_model(**d)


from core.registry.electra import ELECTRA as _ELECTRA  # noqa: E402

FAMILIES[_ELECTRA.key] = _ELECTRA

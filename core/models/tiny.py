"""Tiny random models of each family, saved as real Hugging Face folders.

Tests and demos use them so that the real ``from_pretrained`` path runs without any download
(transformers' own ``BertModelTester`` habit: hidden 32, 2 layers). Weights are random: shapes, not meaning.
What each family's tiny model looks like is registry data (``Family.size_keys``, ``tiny_extra``,
``tiny_tokenizer``, ``tiny_vocab``, ``tiny_model_type``); this module only builds it.
"""

from __future__ import annotations

from pathlib import Path

from core.base.paths import ASSETS
from core.models.spec import LoadedModel, ModelSpec
from core.models.tokenizer_build import bert_uncased_tokenizer, save_tokenizer, train_tokenizer
from core.registry import TINY, build_model, family, official_config

# token ids a config may take, and the tokenizer attribute each comes from (set when the config class has it)
_TOKEN_IDS = dict(
    pad_token_id="pad_token_id",
    bos_token_id="cls_token_id",
    eos_token_id="sep_token_id",
    cls_token_id="cls_token_id",
    sep_token_id="sep_token_id",
)


def example_texts() -> list[str]:
    return [line.strip() for line in (ASSETS / "examples" / "en.txt").read_text().splitlines() if line.strip()]


def tiny_config(family_key: str, vocab_size: int, tokenizer=None, **overrides):
    """A small config of the family's own class: the shared tiny sizes (``TINY``, or ``overrides`` of hidden,
    layers, heads, ffn, max_pos) under the family's config keys, its ``tiny_extra``, and the tokenizer's ids.
    Raises ValueError for an unknown family or size."""
    import transformers

    fam = family(family_key)
    unknown = set(overrides) - set(TINY) - set(fam.tiny_extra)
    if unknown:
        raise ValueError(f"Unknown tiny sizes {sorted(unknown)}: use {', '.join(TINY)}.")
    t = {**TINY, **{k: v for k, v in overrides.items() if k in TINY}}
    kwargs = {fam.size_keys[k]: v for k, v in t.items()}
    kwargs.update(fam.tiny_extra)
    kwargs.update({k: v for k, v in overrides.items() if k in fam.tiny_extra})
    kwargs["vocab_size"] = vocab_size
    if fam.positions_after_pad:  # the table also holds the padding offset
        pad = tokenizer.pad_token_id if tokenizer is not None else 1
        kwargs[fam.size_keys["max_pos"]] = t["max_pos"] + pad + 1
    model_type = fam.tiny_model_type or fam.model_type
    defaults = transformers.AutoConfig.for_model(model_type)
    for key, attr in _TOKEN_IDS.items():
        value = getattr(tokenizer, attr, None) if tokenizer is not None else None
        if hasattr(defaults, key):
            kwargs[key] = value if value is not None else (0 if key == "pad_token_id" else None)
    return transformers.AutoConfig.for_model(model_type, **kwargs)


def tiny_tokenizer(family_key: str, out_dir: str | Path):
    """The family's tiny tokenizer, saved to ``out_dir``: the real bert-base-uncased vocab, or one trained on the
    bundled example texts with the family's piece kind and special tokens (core.models.tokenizer_build)."""
    fam = family(family_key)
    if fam.tiny_tokenizer == "bert-uncased":
        return bert_uncased_tokenizer(out_dir, family=family_key)
    raw = train_tokenizer(family_key, example_texts() * 3, vocab_size=fam.tiny_vocab)
    return save_tokenizer(family_key, raw, out_dir)


def make_tiny(family_key: str, out_dir: str | Path, seed: int = 0, task: str = "pretraining", **overrides) -> Path:
    """Build and save a tiny random model of the family (its ``task`` class) with a real tokenizer to ``out_dir``;
    returns the folder."""
    import torch

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = tiny_tokenizer(family_key, out)
    cfg = tiny_config(family_key, len(tok), tok, **overrides)
    torch.manual_seed(seed)
    model = build_model(family_key, task, cfg)
    model.save_pretrained(str(out))
    return out


def random_mlm(family_key: str, checkpoint_id: str, quick: bool, device: str = "cpu") -> LoadedModel:
    """An official checkpoint's config with random weights (seed 0) as the family's MLM on ``device``, with the
    real uncased WordPiece tokenizer (the one real vocabulary to be had offline); ``quick``: the family's tiny
    config. What the benches time where the weights do not matter (no pretrained base model can be had here)."""
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    tok = bert_uncased_tokenizer()
    cfg = tiny_config(family_key, len(tok), tok) if quick else official_config(checkpoint_id)
    model = build_model(family_key, "mlm", cfg).eval().to(device)
    name = f"tiny {family(family_key).label}" if quick else checkpoint_id
    return LoadedModel(
        model=model,
        tokenizer=tok,
        spec=ModelSpec(family_key, f"{name} (random weights)", torch.device(device).type),
        task="mlm",
        source="random init",
        path="",
        device=device,
    )

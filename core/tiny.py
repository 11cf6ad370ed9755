"""Tiny random models of each family, saved as real Hugging Face folders.

Tests and demos use them so that the real ``from_pretrained`` path runs without any download
(transformers' own ``BertModelTester`` habit: hidden 32, 2 layers). Weights are random: shapes, not meaning.
"""
from __future__ import annotations

from pathlib import Path

from core.models import ASSETS, FAMILIES
from core.tokenizer_build import bert_uncased_tokenizer, save_tokenizer, train_tokenizer

TINY = dict(hidden=32, layers=2, heads=4, ffn=64, max_pos=128)


def example_texts() -> list[str]:
    return [line.strip() for line in (ASSETS / "examples" / "en.txt").read_text().splitlines() if line.strip()]


def tiny_config(family: str, vocab_size: int, tokenizer=None, **overrides):
    """A small config of the family's own class (ALBERT keeps E < H and one shared layer)."""
    import transformers

    t = {**TINY, **overrides}
    pad = tokenizer.pad_token_id if tokenizer is not None else 0
    if family == "bert":
        return transformers.BertConfig(vocab_size=vocab_size, hidden_size=t["hidden"], num_hidden_layers=t["layers"],
                                       num_attention_heads=t["heads"], intermediate_size=t["ffn"],
                                       max_position_embeddings=t["max_pos"], pad_token_id=pad)
    if family == "roberta":
        return transformers.RobertaConfig(vocab_size=vocab_size, hidden_size=t["hidden"], num_hidden_layers=t["layers"],
                                          num_attention_heads=t["heads"], intermediate_size=t["ffn"],
                                          max_position_embeddings=t["max_pos"] + 2, type_vocab_size=1,
                                          pad_token_id=pad, bos_token_id=tokenizer.cls_token_id if tokenizer else 0,
                                          eos_token_id=tokenizer.sep_token_id if tokenizer else 2)
    if family == "albert":
        return transformers.AlbertConfig(vocab_size=vocab_size, embedding_size=max(8, t["hidden"] // 2),
                                         hidden_size=t["hidden"], num_hidden_layers=t["layers"],
                                         num_attention_heads=t["heads"], intermediate_size=t["ffn"],
                                         max_position_embeddings=t["max_pos"], pad_token_id=pad,
                                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if family == "distilbert":
        return transformers.DistilBertConfig(vocab_size=vocab_size, dim=t["hidden"], n_layers=t["layers"],
                                             n_heads=t["heads"], hidden_dim=t["ffn"],
                                             max_position_embeddings=t["max_pos"], pad_token_id=pad)
    raise ValueError(f"Unknown family {family!r}.")


def make_tiny(family: str, out_dir: str | Path, seed: int = 0, task: str = "pretraining", **overrides) -> Path:
    """Build and save a tiny random ``family`` model with a real tokenizer to ``out_dir``; returns the folder."""
    import torch
    import transformers

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if family in ("bert", "distilbert"):
        tok = bert_uncased_tokenizer(out, family=family)
    else:
        raw = train_tokenizer(family, example_texts() * 3, vocab_size=300 if family == "roberta" else 200)
        tok = save_tokenizer(family, raw, out)
    cfg = tiny_config(family, len(tok), tok, **overrides)
    torch.manual_seed(seed)
    cls = getattr(transformers, FAMILIES[family].classes[task])
    model = cls(cfg)
    model.save_pretrained(str(out))
    return out

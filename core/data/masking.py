"""Masked-language-model corruption as one pure function, plus the word boundaries whole-word masking needs.

BERT's recipe: select 15% of the (non-special) tokens; of the selected, 80% become the mask token, 10% a random
token and 10% stay unchanged; the loss is computed on the selected positions only (labels elsewhere are -100).
With whole-word masking the selection is made per word and covers every sub-token of a selected word, for
WordPiece (``##`` continuations), byte-level BPE (``Ġ`` starts a word) and Unigram (``▁`` starts a word).
Chinese has no word markers (each character is a token of its own, or several characters one piece): there the
words are the 词 of core.base.segment (jieba), and ``segment_starts`` moves the word starts to them from the
tokens' character offsets. The function is the same as transformers' ``DataCollatorForLanguageModeling`` / ``DataCollatorForWholeWordMask``
in behaviour, but takes an explicit ``torch.Generator`` so static masks, dynamic masks and evaluation masks
are reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from core.base.messages import msg
from core.base.segment import han_words

IGNORE = -100
WORD_MARKERS = {"wordpiece": "##", "bpe": "Ġ", "unigram": "▁"}


def word_starts(tokens: list[str], kind: str) -> list[bool]:
    """For each token of one run of text (no special tokens), whether it begins a new word.

    wordpiece: every token but the ``##`` continuations; bpe and unigram: tokens carrying the ``Ġ`` / ``▁``
    marker, and the first token (a sentence-initial BPE word has no ``Ġ``); a piece without the marker
    continues the word before it (so BPE/Unigram punctuation glued to a word goes with that word).
    """
    if kind not in WORD_MARKERS:
        raise ValueError(msg("masking.unknown_tokenizer_kind_use", kind=kind, choices=", ".join(WORD_MARKERS)))
    if kind == "wordpiece":
        return [not t.startswith("##") for t in tokens]
    marker = WORD_MARKERS[kind]
    return [i == 0 or t.startswith(marker) for i, t in enumerate(tokens)]


def segment_starts(text: str, offsets, starts: list[bool]) -> list[bool]:
    """``starts`` (from ``word_starts``, for the tokens whose character spans in ``text`` are ``offsets``) with
    Chinese words taken from the segmenter (core.base.segment): a token belongs to the Han word (词) its first
    non-space character falls in, so every token of one 词 continues its first one, and a token entering a new 词
    starts a word (a lone word-start marker before it, with no character of its own, opens that word). After a
    词, any other token with a character starts a word of its own (Chinese puts no word-start marker before
    "。" or "Python"); everything else keeps its piece-based start. A text without Han characters gets ``starts``
    back unchanged."""
    spans = han_words(text)
    if not spans:
        return list(starts)
    word_at = {i: k for k, (a, b) in enumerate(spans) for i in range(a, b)}
    out: list[bool] = []
    prev_word, prev_empty = None, False
    for n, ((a, b), s) in enumerate(zip(offsets, starts)):
        while a < b and text[a].isspace():
            a += 1
        w = word_at.get(a) if a < b else None
        if w is not None:
            s = n == 0 or (w != prev_word and not (prev_empty and out[-1]))
        elif a < b and prev_word is not None:
            s = True
        out.append(bool(s))
        prev_word, prev_empty = w, a >= b
    return out


def word_index(starts: list[bool]) -> list[int]:
    """Position of the first token of the word each token belongs to: [T, F, T, F, F] -> [0, 0, 2, 2, 2]."""
    out, cur = [], 0
    for i, s in enumerate(starts):
        if s or i == 0:
            cur = i
        out.append(cur)
    return out


@dataclass(frozen=True)
class Masked:
    input_ids: torch.Tensor  # (batch, seq) corrupted inputs
    labels: torch.Tensor  # (batch, seq) original id at selected positions, -100 elsewhere


def mask_tokens(
    input_ids: torch.Tensor,
    special: torch.Tensor,
    *,
    mask_id: int,
    vocab_size: int,
    generator: torch.Generator,
    mlm_probability: float = 0.15,
    word_ids: torch.Tensor | None = None,
    mask_ratio: float = 0.8,
    random_ratio: float = 0.1,
) -> Masked:
    """Corrupt a batch for MLM; pure (inputs are not modified) and deterministic for a given generator state.

    input_ids, special: (batch, seq); ``special`` is True at [CLS]/[SEP]/padding, which are never selected.
    word_ids: (batch, seq) from ``word_index`` for whole-word masking (None: each token is its own word).
    Returns the corrupted ids and the labels (-100 where not selected). Raises ValueError on bad ratios.
    """
    if not 0.0 <= mlm_probability <= 1.0 or mask_ratio < 0 or random_ratio < 0 or mask_ratio + random_ratio > 1:
        raise ValueError(
            msg(
                "masking.mlm_probability_must_mask",
                mlm_probability=mlm_probability,
                mask_ratio=mask_ratio,
                random_ratio=random_ratio,
            )
        )
    if input_ids.shape != special.shape:
        raise ValueError(
            msg(
                "masking.input_ids_special_differ", ids_shape=tuple(input_ids.shape), special_shape=tuple(special.shape)
            )
        )
    draw = torch.rand(input_ids.shape, generator=generator)  # (batch, seq)
    if word_ids is not None:
        draw = draw.gather(1, word_ids)  # every sub-token takes its word's draw: the whole word is in or out
    selected = (draw < mlm_probability) & ~special.bool()
    how = torch.rand(input_ids.shape, generator=generator)
    to_mask = selected & (how < mask_ratio)
    to_random = selected & (how >= mask_ratio) & (how < mask_ratio + random_ratio)
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, dtype=input_ids.dtype)
    corrupted = input_ids.clone()
    corrupted[to_mask] = mask_id
    corrupted[to_random] = random_ids[to_random]
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE))
    return Masked(corrupted, labels)


def masked_batch(tok, sentences, generator: torch.Generator, share: float, max_length: int, masked=None):
    """Tokenize ``sentences`` (padded, cut at ``max_length``) and, in each sentence that ``masked`` (a bool per
    sentence; default all) selects, replace ~``share`` of its real tokens (at least one) by the mask token, all by
    the mask token (the tuned lens's and the SAE's held-out and training inputs, not the 80/10/10 of
    ``mask_tokens``). Returns (ids, attention, real tokens (B, T) bool, the original ids, picked (B, T) bool)."""
    enc = tok(
        list(sentences),
        truncation=True,
        max_length=max_length,
        padding=True,
        return_tensors="pt",
        return_special_tokens_mask=True,
    )
    ids, attn = enc["input_ids"], enc["attention_mask"]
    real = (attn == 1) & (enc["special_tokens_mask"] == 0)
    pick = (torch.rand(ids.shape, generator=generator) < share) & real
    for b in range(ids.shape[0]):
        if masked is not None and not masked[b]:
            pick[b] = False
        elif not pick[b].any() and real[b].any():
            cand = real[b].nonzero()[:, 0]
            pick[b, cand[torch.randint(len(cand), (1,), generator=generator)]] = True
    return ids.masked_fill(pick, tok.mask_token_id), attn, real, ids, pick

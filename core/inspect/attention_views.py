"""Attention views people ask for (bertviz#111, #125, #40): several tokens at once, and words instead of pieces.

- ``selection_attention``: the attention of a set of tokens, summed or averaged: where the selected tokens look
  (``direction="from"``: their rows) or how much every token looks at them (``"to"``: their columns).
- ``word_attention``: a word-level map that merges sub-word pieces. Attention TO a word is the sum over its
  pieces (the share of a query's attention that lands anywhere in the word); attention FROM a word is the mean
  over its pieces (each piece's row is a distribution, so their mean is one too). Rows still sum to 1.
- ``word_groups``: which pieces make a word. It reads the fast tokenizer's own ``word_ids()`` and offsets, so it
  is the same for WordPiece (``##``), byte-level BPE (``Ġ``) and SentencePiece (``▁``): piece strings are never
  parsed. Chinese words are the 词 of core.base.segment (jieba): a piece belongs to the 词 its first character
  falls in, whatever word ids the tokenizer gave (BERT gives each character its own). Japanese and Korean
  characters are a word each (byte-level BPE keeps a run of them as one pre-token, and a character's bytes are
  several pieces: they are grouped back by the character they start in).
  Special tokens ([CLS], [SEP], <s>, </s>) stay words of their own.
- ``layer_map``: one layer's map (one head, or the heads' mean), per token or per word.

Pure numpy on ``core.inspect.attention.AttentionResult.attentions`` (layers, heads, seq, seq), plus one tokenizer call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.base.messages import msg
from core.base.segment import han_words, is_cjk  # is_cjk: each CJK letter a word unless in a Chinese 词
from core.base.text import display_piece
from core.inspect.attention import AttentionConfig, model_texts

HOW = ("sum", "mean")
DIRECTIONS = ("from", "to")


# ---------------------------------------------------------------------------------------------- selections
@dataclass(frozen=True)
class SelectionConfig:
    """Which tokens (or words) to look at together, and how: ``how`` sum | mean, ``direction`` from | to."""

    positions: tuple[int, ...]
    how: str = "mean"
    direction: str = "from"

    def __post_init__(self) -> None:
        if not self.positions:
            raise ValueError(msg("attention.no_token_selected"))
        if self.how not in HOW:
            raise ValueError(msg("attention.unknown_way_combine_use", how=self.how, choices=", ".join(HOW)))
        if self.direction not in DIRECTIONS:
            raise ValueError(msg("attention.unknown_direction_use_from", direction=self.direction))


def selection_attention(att: np.ndarray, sel: SelectionConfig) -> np.ndarray:
    """(layers, heads, seq, seq) -> (layers, heads, seq) float64.

    ``from``: row j = the selected queries' attention to key j (a distribution when averaged; sums to the number
    of selected tokens when summed). ``to``: entry i = how much query i attends to the selected keys together
    (summed), or to one of them on average (mean). Raises ValueError for a position outside 0..seq-1."""
    n = att.shape[-1]
    pos = sorted(set(int(p) for p in sel.positions))
    if pos[0] < 0 or pos[-1] >= n:
        bad = pos[-1] if pos[-1] >= n else pos[0]
        raise ValueError(msg("attention.selected_position_outside_text", bad=bad, last=n - 1, n=n))
    a = np.asarray(att, dtype=np.float64)
    part = a[..., pos, :] if sel.direction == "from" else a[..., :, pos]
    axis = -2 if sel.direction == "from" else -1
    return part.sum(axis) if sel.how == "sum" else part.mean(axis)


# ---------------------------------------------------------------------------------------------- words
@dataclass(frozen=True)
class WordGroups:
    """Pieces grouped into words: ``groups[w]`` holds the token positions of word ``w`` (in order)."""

    words: tuple[str, ...]  # the word as written in the text (a special token as the tokenizer writes it)
    pieces: tuple[str, ...]  # the word's pieces for display, joined with " · "
    groups: tuple[tuple[int, ...], ...]
    special: tuple[bool, ...]  # the word is a special token
    sentence_b_start: int | None  # index of the first word of sentence B, None for one sentence
    n_tokens: int

    @property
    def n_words(self) -> int:
        return len(self.groups)

    def merged(self) -> tuple[int, ...]:
        """Indices of the words made of more than one piece."""
        return tuple(i for i, g in enumerate(self.groups) if len(g) > 1)


def _segments(text: str, start: int, end: int) -> list[int]:
    """For each character of text[start:end], a segment number: every CJK character its own, runs of other
    characters one segment each."""
    seg, out, prev_cjk = -1, [], None
    for ch in text[start:end]:
        c = is_cjk(ch)
        if c or prev_cjk is not False:
            seg += 1
        out.append(seg)
        prev_cjk = c
    return out


def group_words(
    tokens: Sequence[str],
    word_ids: Sequence[int | None],
    sequence_ids: Sequence[int | None],
    offsets: Sequence[tuple[int, int]],
    texts: Sequence[str],
) -> WordGroups:
    """Words from a fast tokenizer's encoding (pure: ``tokens``, ``word_ids()``, ``sequence_ids()``, offsets, and
    the one or two texts the offsets point into). A position whose word id is None is a special token."""
    keys: list[tuple] = []
    han = [{i: k for k, (lo, hi) in enumerate(han_words(t)) for i in range(lo, hi)} for t in texts]
    last_han: dict[tuple, tuple] = {}
    for i, (w, s, (a, b)) in enumerate(zip(word_ids, sequence_ids, offsets)):
        if w is None:
            keys.append(("special", i))
            continue
        k = ("word", s or 0, w)
        text, table = (texts[k[1]], han[k[1]]) if k[1] < len(texts) else ("", {})
        while a < min(b, len(text)) and text[a].isspace():
            a += 1
        if a < b and a in table:  # a piece of a Chinese 词: grouped by the 词, across the tokenizer's word ids
            last_han[k] = ("han", k[1], table[a])
            keys.append(last_han[k])
        elif a >= b and k in last_han:  # a byte piece with no character of its own, inside a 词
            keys.append(last_han[k])
        else:
            keys.append(k)
    # split words that contain CJK characters into one word per character (by the character a piece starts in)
    spans: dict[tuple, tuple[int, int]] = {}
    for k, (a, b) in zip(keys, offsets):
        if k[0] == "word":
            lo, hi = spans.get(k, (a, b))
            spans[k] = (min(lo, a), max(hi, b))
    sub: list[tuple] = []
    last_seg: dict[tuple, int] = {}
    for k, (a, b) in zip(keys, offsets):
        if k[0] != "word":
            sub.append(k)
            continue
        text = texts[k[1]] if k[1] < len(texts) else ""
        lo, hi = spans[k]
        if any(is_cjk(c) for c in text[lo:hi]):
            segs = _segments(text, lo, hi)
            seg = segs[a - lo] if b > a and 0 <= a - lo < len(segs) else last_seg.get(k, 0)
            last_seg[k] = seg
            sub.append(k + (seg,))
        else:
            sub.append(k)
    order: dict[tuple, list[int]] = {}
    for i, k in enumerate(sub):
        order.setdefault(k, []).append(i)
    groups = sorted(order.values(), key=lambda g: g[0])
    words, pieces, special = [], [], []
    b_start = None
    for gi, g in enumerate(groups):
        k = sub[g[0]]
        labels = [display_piece(tokens[i]) for i in g]
        pieces.append(" · ".join(labels))
        if k[0] == "special":
            words.append(tokens[g[0]])
            special.append(True)
            continue
        special.append(False)
        if k[1] == 1 and b_start is None:
            b_start = gi
        text = texts[k[1]] if k[1] < len(texts) else ""
        lo = min(offsets[i][0] for i in g)
        hi = max(offsets[i][1] for i in g)
        word = text[lo:hi].strip() if hi > lo else ""
        words.append(word or "".join(labels).strip() or tokens[g[0]])
    return WordGroups(
        words=tuple(words),
        pieces=tuple(pieces),
        groups=tuple(tuple(g) for g in groups),
        special=tuple(special),
        sentence_b_start=b_start,
        n_tokens=len(tokens),
    )


def word_groups(tokenizer, config: AttentionConfig) -> WordGroups:
    """The words of ``config``'s text, encoded exactly as core.inspect.attention.compute_attention encodes it (same
    typed-special stripping, same mask token, same pair handling), so the groups index that result's tokens.

    Raises ValueError for a tokenizer without word ids (a slow, pure-Python tokenizer)."""
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(msg("attention.slow_tokenizer_does_not", tokenizer_class=type(tokenizer).__name__))
    texts, _ = model_texts(config, tokenizer)
    enc = tokenizer(*texts, return_offsets_mapping=True, truncation=False)
    ids = enc["input_ids"]
    return group_words(
        tokenizer.convert_ids_to_tokens(ids),
        enc.word_ids(),
        enc.sequence_ids(),
        [tuple(o) for o in enc["offset_mapping"]],
        texts,
    )


def word_attention(att: np.ndarray, groups: WordGroups) -> np.ndarray:
    """(layers, heads, seq, seq) -> (layers, heads, words, words) float32.

    Entry (a, b) = mean over the pieces i of word a of (sum over the pieces j of word b of att[i, j]). The groups
    cover every token once, so each row still sums to 1. Raises ValueError when the groups belong to another
    text (a different token count)."""
    n = att.shape[-1]
    if groups.n_tokens != n:
        raise ValueError(msg("attention.word_groups_mismatch", n_tokens=groups.n_tokens, n=n))
    m = groups.n_words
    frm = np.zeros((m, n), dtype=np.float64)  # mean over a word's pieces (rows)
    to = np.zeros((n, m), dtype=np.float64)  # sum over a word's pieces (columns)
    for w, g in enumerate(groups.groups):
        frm[w, list(g)] = 1.0 / len(g)
        to[list(g), w] = 1.0
    a = np.asarray(att, dtype=np.float64)
    return np.einsum("wi,lhij,jv->lhwv", frm, a, to, optimize=True).astype(np.float32)


def layer_map(att: np.ndarray, layer: int, head: int | None = None, groups: WordGroups | None = None) -> np.ndarray:
    """One map of ``layer`` from (layers, heads, seq, seq): head ``head``'s, or with None the mean of the heads,
    (seq, seq) float64; with ``groups``, per word (``word_attention``), (words, words) float32. Raises ValueError
    when the groups belong to another text."""
    a = np.asarray(att[layer], dtype=np.float64)  # (heads, seq, seq)
    a = a.mean(0) if head is None else a[head]
    return a if groups is None else word_attention(a[None, None], groups)[0, 0]


@dataclass(frozen=True, eq=False)
class WordAttention:
    """The word-level view of one AttentionResult."""

    groups: WordGroups
    attentions: np.ndarray  # (layers, heads, words, words) float32, rows sum to 1

    @property
    def words(self) -> tuple[str, ...]:
        return self.groups.words


def word_view(tokenizer, config: AttentionConfig, attentions: np.ndarray) -> WordAttention:
    """``word_groups`` + ``word_attention`` for the result computed from ``config`` (its ``attentions``)."""
    g = word_groups(tokenizer, config)
    return WordAttention(groups=g, attentions=word_attention(attentions, g))

"""What a user types, before a tokenizer reads it: typed special tokens are taken out, with a note saying so.

A tokenizer matches its special tokens anywhere in the text, so a typed "[SEP]" or "<s>" becomes a real control
token (a second segment boundary, a sequence start) instead of the characters typed. Each family's tokenizer adds
its own special tokens, so a typed one is never what the user meant. Fill-mask, Sentence pair and Attention all
clean their text here, so the same input gets the same treatment and the same note on every page.
``with_mask_token`` is the one rule for a mask the user writes: ``[MASK]`` (or ``<mask>``) on every page and for
every model becomes the tokenizer's own mask token before the tokenizer reads the text.
``check_text`` is the one empty-text and length-limit check the configs run on a typed text.
``display_piece`` is the one way a tokenizer piece is shown to a person (charts, tables, exports).
"""

from __future__ import annotations

import re
from typing import Any

from core.base.messages import msg
from core.base.settings import current

# The special tokens of the four families (BERT/ALBERT/DistilBERT write [..], RoBERTa <..>); [MASK]/<mask> are
# not among them: they are mapped to the model's own mask token (with_mask_token), which the model reads as a mask.
TYPED_SPECIALS = ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "<s>", "</s>", "<pad>", "<unk>")
# A mask as a user writes it, in any case: BERT's [MASK] (what every page's texts say) or RoBERTa's <mask>
MASK_PATTERN = re.compile(r"\[mask\]|<mask>", re.IGNORECASE)


def strip_typed_specials(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` without typed special tokens (any case; the spaces around them collapse), and those found."""
    found = tuple(s for s in TYPED_SPECIALS if s.lower() in text.lower())
    if not found:
        return text, ()
    pat = re.compile("|".join(re.escape(s) for s in found), re.IGNORECASE)
    return re.sub(r"\s{2,}", " ", pat.sub(" ", text)).strip(), found


def with_mask_token(text: str, mask_token: str | None) -> str:
    """``text`` with every mask the user wrote (``[MASK]`` or ``<mask>``, any case) as ``mask_token``, the
    tokenizer's own (BERT's [MASK], RoBERTa's and XLM-R's <mask>), so that the tokenizer reads one mask token there
    and not the pieces '[', 'M', 'AS', 'K', ']'. The one rule of every page that tokenizes a user's text for a model
    (Fill-mask, Layer lens and head ablation through Fill-mask's encoding, Attention, Attributions, the
    walkthrough); a tokenizer without a mask token (None) gets the text unchanged."""
    if not mask_token:
        return text
    return MASK_PATTERN.sub(lambda _: mask_token, text)


def removed_note(found: tuple[str, ...], what: str = "the text") -> str:
    """The note shown when typed special tokens were taken out of ``what``."""
    found = tuple(s for s in TYPED_SPECIALS if s in found)  # one order, however many texts they came from
    where = {"the text": "text.where_text", "the sentences": "text.where_sentences", "the rows": "text.where_rows"}
    return msg("text.removed_specials", found=", ".join(found), what=msg(where[what]) if what in where else what)


def check_text(text: object, *, empty_hint: str, long_hint: str, max_chars: int) -> str:
    """``text`` when it can be read: a string with something other than spaces, at most ``max_chars`` characters
    and at most the server's limit (``Settings.max_text_chars``, lower on the hosted demo).

    Raises ``ValueError`` "The text is empty. <empty_hint>" or "The text has N characters; the limit is L.
    <long_hint>"; the hints say what to type on the caller's page.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(msg("text.text_empty", empty_hint=empty_hint))

    limit = min(max_chars, current().max_text_chars)  # the server's limit (lower on the hosted demo)
    if len(text) > limit:
        raise ValueError(msg("text.text_has_characters_limit", n_text=len(text), limit=limit, long_hint=long_hint))
    return text


# Word-start markers of byte-level BPE (Ġ: a space byte) and SentencePiece (▁); "</w>" ends a word in old BPEs.
_MARKERS = ("Ġ", "▁")
WORDPIECE_JOINER = "##"  # how WordPiece marks a piece that continues the word before it
BARE_MARK = "␣"  # what a piece that stands for a space alone (a bare "Ġ" / "▁") shows


def display_piece(piece: str, tokenizer: Any = None) -> str:  # a transformers tokenizer (Any to mypy)
    """How a person reads one tokenizer piece: the text it stands for, never the markers "Ġ" or "▁".

    With ``tokenizer``, its own ``convert_tokens_to_string`` decides (byte-level BPE turns "Ġcap" into " cap" and
    its byte pieces into characters; SentencePiece "▁cap" into "cap"). Without one (a view draws a frozen result,
    which carries pieces but no tokenizer) the markers are replaced by hand, which is what those decoders do with
    a marker. Either way the leading/trailing spaces are dropped (a chart's tick label cannot show them) and a
    piece that is only a space shows as "␣". A WordPiece continuation shows as the tokenizer writes it inside its
    word, without its "##" ("##wny" in "Shawny" reads "wny"; the third walk found "8·##wny" in charts confusing):
    BPE and SentencePiece continuations carry no mark either, so every family reads the same. A lone "##" piece
    is itself text and stays. Special tokens ([CLS], <s>, [MASK]) stay as they are. The raw piece belongs in
    hover text and tables' raw columns, next to this form.
    """
    piece = str(piece)
    text = None
    if tokenizer is not None and piece not in _MARKERS:
        try:
            text = tokenizer.convert_tokens_to_string([piece])
        except Exception:  # a tokenizer without a decoder for this piece: fall back to the markers rule below
            text = None
    if not isinstance(text, str) or any(m in text for m in _MARKERS):
        text = piece.replace("</w>", "")
        for m in _MARKERS:
            text = text.replace(m, " ")
    if text.startswith(WORDPIECE_JOINER) and len(text) > len(WORDPIECE_JOINER) and piece.startswith(WORDPIECE_JOINER):
        text = text[len(WORDPIECE_JOINER) :]
    text = text.strip()
    return text if text else BARE_MARK

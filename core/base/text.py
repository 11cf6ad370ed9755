"""What a user types, before a tokenizer reads it: typed special tokens are taken out, with a note saying so.

A tokenizer matches its special tokens anywhere in the text, so a typed "[SEP]" or "<s>" becomes a real control
token (a second segment boundary, a sequence start) instead of the characters typed. Each family's tokenizer adds
its own special tokens, so a typed one is never what the user meant. Fill-mask, Sentence pair and Attention all
clean their text here, so the same input gets the same treatment and the same note on every page.
``check_text`` is the one empty-text and length-limit check the configs run on a typed text.
"""
from __future__ import annotations

import re

from core.base.settings import current

# The special tokens of the four families (BERT/ALBERT/DistilBERT write [..], RoBERTa <..>); [MASK]/<mask> are
# not among them: a page that reads masks maps them itself, the others let the model read them as masks.
TYPED_SPECIALS = ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "<s>", "</s>", "<pad>", "<unk>")


def strip_typed_specials(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` without typed special tokens (any case; the spaces around them collapse), and those found."""
    found = tuple(s for s in TYPED_SPECIALS if s.lower() in text.lower())
    if not found:
        return text, ()
    pat = re.compile("|".join(re.escape(s) for s in found), re.IGNORECASE)
    return re.sub(r"\s{2,}", " ", pat.sub(" ", text)).strip(), found


def removed_note(found: tuple[str, ...], what: str = "the text") -> str:
    """The note shown when typed special tokens were taken out of ``what``."""
    found = tuple(s for s in TYPED_SPECIALS if s in found)  # one order, however many texts they came from
    return (f"Removed {', '.join(found)} from {what}: the tokenizer adds the model's own special tokens itself, and "
            "typed ones would become real control tokens (a segment boundary, a sequence start) instead of text.")


def check_text(text: object, *, empty_hint: str, long_hint: str, max_chars: int) -> str:
    """``text`` when it can be read: a string with something other than spaces, at most ``max_chars`` characters
    and at most the server's limit (``Settings.max_text_chars``, lower on the hosted demo).

    Raises ``ValueError`` "The text is empty. <empty_hint>" or "The text has N characters; the limit is L.
    <long_hint>"; the hints say what to type on the caller's page.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"The text is empty. {empty_hint}")

    limit = min(max_chars, current().max_text_chars)  # the server's limit (lower on the hosted demo)
    if len(text) > limit:
        raise ValueError(f"The text has {len(text):,} characters; the limit is {limit:,}. {long_hint}")
    return text

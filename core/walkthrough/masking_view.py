"""BERT's MLM corruption of one sentence, as pretraining does it (the Walkthrough's masking step).

``corrupt`` and ``masking_shares`` show BERT's masking on one sentence with the very function pretraining uses
(``core.data.masking.mask_tokens``): 15% of the non-special tokens selected, of those 80% replaced by the
mask token, 10% by a random token, 10% left unchanged; a new ``torch.Generator`` seed gives a new (dynamic) mask;
whole-word masking selects every sub-token of a word together, and every token of a Chinese 词 (core.base.segment).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.base.messages import msg
from core.base.segment import has_han
from core.base.text import with_mask_token
from core.data.masking import IGNORE, mask_tokens, segment_starts, word_index, word_starts
from core.models.loading import LoadedModel
from core.registry import piece_kind
from core.walkthrough.embeddings import MAX_TEXT_TOKENS

ACTIONS = ("", "mask", "random", "keep")  # per token: not selected, [MASK], random token, left unchanged


@dataclass(frozen=True)
class MaskedView:
    """One draw of MLM corruption on one text: what was selected, what each selected token became."""

    tokens: tuple[str, ...]  # the original pieces, special tokens included
    corrupted: tuple[str, ...]  # what the model reads in pretraining
    actions: tuple[str, ...]  # per token, one of ACTIONS
    words: tuple[int, ...]  # per token: the position of the first piece of its word (whole-word groups)
    special: tuple[bool, ...]
    seed: int
    whole_word: bool
    probability: float

    @property
    def selected(self) -> tuple[int, ...]:
        """Positions whose original token the MLM loss asks for."""
        return tuple(i for i, a in enumerate(self.actions) if a)

    @property
    def candidates(self) -> int:
        """Tokens that could be selected (the non-special ones)."""
        return sum(1 for s in self.special if not s)

    def count(self, action: str) -> int:
        return sum(1 for a in self.actions if a == action)


def _prepare(lm: LoadedModel, text: str):
    import torch

    if not text or not text.strip():
        raise ValueError(msg("walkthrough.text_empty_to_mask"))
    tok = lm.tokenizer
    if tok.mask_token_id is None:
        raise ValueError(msg("walkthrough.no_mask_token", checkpoint=lm.spec.checkpoint))
    text = with_mask_token(text, tok.mask_token)  # a typed [MASK] is the model's own mask token, as on every page
    chinese = has_han(text) and getattr(tok, "is_fast", False)  # 词 need the tokens' character offsets
    enc = tok(
        text,
        truncation=True,
        max_length=min(MAX_TEXT_TOKENS, lm.max_tokens),
        return_tensors="pt",
        return_offsets_mapping=chinese,
    )
    ids = enc["input_ids"]
    special = torch.tensor(
        [tok.get_special_tokens_mask(ids[0].tolist(), already_has_special_tokens=True)], dtype=torch.bool
    )  # (1, seq)
    tokens = tok.convert_ids_to_tokens(ids[0].tolist())
    inner = [i for i in range(len(tokens)) if not special[0, i]]
    words = list(range(len(tokens)))
    if inner:
        starts = word_starts([tokens[i] for i in inner], piece_kind(tok, lm.spec.family))
        if chinese:
            starts = segment_starts(text, [tuple(enc["offset_mapping"][0, i].tolist()) for i in inner], starts)
        for i, first in zip(inner, word_index(starts)):
            words[i] = inner[first]
    return ids, special, tokens, torch.tensor([words]), len(tok)


def corrupt(lm: LoadedModel, text: str, seed: int, whole_word: bool = False, probability: float = 0.15) -> MaskedView:
    """One MLM corruption of ``text`` as BERT's pretraining draws it, from a fresh generator seeded with ``seed``.

    Raises ValueError for an empty text or a tokenizer without a mask token.
    """
    import torch

    ids, special, tokens, words, vocab = _prepare(lm, text)
    gen = torch.Generator().manual_seed(int(seed))
    m = mask_tokens(
        ids,
        special,
        mask_id=lm.tokenizer.mask_token_id,
        vocab_size=vocab,
        generator=gen,
        mlm_probability=probability,
        word_ids=words if whole_word else None,
    )
    new, labels = m.input_ids[0].tolist(), m.labels[0].tolist()
    actions = []
    for orig, now, lab in zip(ids[0].tolist(), new, labels):
        if lab == IGNORE:
            actions.append("")
        elif now == lm.tokenizer.mask_token_id:
            actions.append("mask")
        elif now != orig:
            actions.append("random")
        else:
            actions.append("keep")
    return MaskedView(
        tuple(tokens),
        tuple(lm.tokenizer.convert_ids_to_tokens(new)),
        tuple(actions),
        tuple(int(x) for x in words[0].tolist()),
        tuple(bool(x) for x in special[0].tolist()),
        int(seed),
        whole_word,
        probability,
    )


@dataclass(frozen=True)
class MaskingShares:
    """Shares over many draws on one text: how often a token was selected, and what the selected became."""

    draws: int
    selected: float  # of the non-special tokens
    mask: float  # of the selected
    random: float
    keep: float


def masking_shares(
    lm: LoadedModel, text: str, draws: int = 1000, seed: int = 0, whole_word: bool = False, probability: float = 0.15
) -> MaskingShares:
    """Run the corruption ``draws`` times on ``text`` (one batch) and count: the 15% and the 80/10/10, measured.

    A random replacement that happens to draw the original token counts as unchanged (as the model sees it).
    Raises ValueError for an empty text, a tokenizer without a mask token, or draws outside 1..20000.
    """
    import torch

    if not 1 <= draws <= 20_000:
        raise ValueError(msg("walkthrough.draws_must_between_got", draws=draws))
    ids, special, _, words, vocab = _prepare(lm, text)
    batch = ids.expand(draws, -1)  # (draws, seq)
    gen = torch.Generator().manual_seed(int(seed))
    m = mask_tokens(
        batch,
        special.expand(draws, -1),
        mask_id=lm.tokenizer.mask_token_id,
        vocab_size=vocab,
        generator=gen,
        mlm_probability=probability,
        word_ids=words.expand(draws, -1) if whole_word else None,
    )
    sel = m.labels != IGNORE
    n_sel = int(sel.sum())
    n_cand = int((~special).sum()) * draws
    masked = int((sel & (m.input_ids == lm.tokenizer.mask_token_id)).sum())
    changed = int((sel & (m.input_ids != batch) & (m.input_ids != lm.tokenizer.mask_token_id)).sum())
    d = max(n_sel, 1)
    return MaskingShares(draws, n_sel / max(n_cand, 1), masked / d, changed / d, (n_sel - masked - changed) / d)

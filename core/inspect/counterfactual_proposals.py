"""Where counterfactual edits come from, and how fluent a text is: the pieces core.inspect.counterfactual searches with.

- ``mlm_proposals``: the words a masked LM proposes for one word of a text: the word's span is replaced by one mask
  token and the MLM's top whole-word pieces there are the candidates (BAE, BERT-Attack and CLARE propose edits the
  same way, which is why their edits read fluently). Special tokens are never proposed.
- ``hotflip_proposals``: the reference (LIT's HotFlip): a first-order estimate from the classifier's own gradient,
  (e_new - e_old) . grad, over its vocabulary's whole-word pieces, for words that are one piece.
- ``pseudo_log_likelihood``: fluency under an MLM (Salazar et al. 2020): every token masked in turn, the log
  probability of the token that was there, summed; one batched forward per text.

Edits are made on the text, not on token ids: a word's characters are replaced by the candidate's text. So the MLM
that proposes and the model that is explained may tokenize differently (a classifier and its family's bundled MLM),
and Chinese words are jieba's 词 (core.base.segment).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from core.base.segment import has_han
from core.base.text import display_piece
from core.inspect.attribution_inputs import TOKEN_BUDGET, target_logits
from core.models.spec import LoadedModel

MARKERS = ("Ġ", "▁")  # a byte-level BPE or SentencePiece piece that starts a word
JOINER = "##"  # a WordPiece continuation


def match_case(old: str, new: str) -> str:
    """``new`` written in the case of ``old``: "Paris" -> "London", "PARIS" -> "LONDON" (an uncased MLM proposes
    lowercase words)."""
    if old.isupper() and len(old) > 1:
        return new.upper()
    if old[:1].isupper():
        return new[:1].upper() + new[1:]
    return new


def word_pieces(tokenizer) -> dict[int, str]:
    """The vocabulary's pieces that can stand as a word, by id: not special, not a WordPiece continuation, letters,
    digits or Han only once read (core.base.text.display_piece). Kept on the tokenizer object (computed once)."""
    cached = getattr(tokenizer, "_encoderlab_word_pieces", None)
    if cached is not None:
        return cached
    specials = set(tokenizer.all_special_ids)
    vocab = tokenizer.get_vocab()
    marked = any(p[:1] in MARKERS for p in list(vocab)[:2000])  # BPE / SentencePiece: words start with a marker
    out = {}
    for piece, i in vocab.items():
        if i in specials or piece.startswith(JOINER):
            continue
        text = display_piece(piece, None)
        if not text or not all(ch.isalnum() for ch in text):
            continue
        if marked and piece[:1] not in MARKERS and not has_han(text):
            continue  # a continuation piece of a BPE / SentencePiece vocabulary (Han pieces stand alone in a 词 run)
        out[int(i)] = text
    try:
        tokenizer._encoderlab_word_pieces = out
    except AttributeError:  # a tokenizer object that takes no new attributes: computed again next time
        pass
    return out


def encode_rows(lm: LoadedModel, texts: list[tuple[str, ...]]) -> dict[str, Any]:
    """A padded batch of one or two segments per row, truncated to the model's limit, on its device."""
    tok = lm.tokenizer
    parts = list(zip(*texts))
    enc = tok(*parts, padding=True, truncation=True, max_length=lm.max_tokens, return_tensors="pt")
    return _model_inputs(lm, enc)


def _model_inputs(lm: LoadedModel, enc) -> dict[str, Any]:
    """What the model reads of an encoding (the ids and the tokenizer's model inputs), on its device."""
    names = set(getattr(lm.tokenizer, "model_input_names", ["input_ids", "attention_mask"])) | {"input_ids"}
    return {k: v.to(lm.device) for k, v in enc.items() if k in names}


def mlm_proposals(
    mlm: LoadedModel, texts: list[tuple[str, ...]], spans: list[tuple[int, int, int]], k: int
) -> list[list[str]]:
    """For each (texts, (part, start, end)) pair: the MLM's top ``k`` whole words at that span, most likely first, the
    word that is there left out. One batched forward."""
    import torch  # lazy: torch loads in seconds; the page's imports reach this module

    tok = mlm.tokenizer
    masked, nth = [], []
    for row, (part, start, end) in zip(texts, spans):
        parts = list(row)
        parts[part] = parts[part][:start] + tok.mask_token + parts[part][end:]
        masked.append(tuple(parts))
        # which mask of the row is this word's: a text may hold masks already (the explained [MASK], before or after)
        nth.append(sum(parts[q].count(tok.mask_token) for q in range(part)) + parts[part][:start].count(tok.mask_token))
    words = word_pieces(tok)
    out: list[list[str]] = []
    with torch.no_grad():
        for begin in range(0, len(masked), 32):
            batch = encode_rows(mlm, masked[begin : begin + 32])
            at = [
                int((row == tok.mask_token_id).nonzero().flatten()[n])
                for row, n in zip(batch["input_ids"], nth[begin : begin + 32])
            ]
            logits = target_logits(mlm.model, "mask", batch, at).float().cpu()
            # as wide as the model's output, which may exceed the tokenizer (a padded or resized vocabulary)
            allowed = torch.zeros(logits.shape[1], dtype=torch.bool)
            allowed[[i for i in words if i < logits.shape[1]]] = True
            logits = logits.masked_fill(~allowed, float("-inf"))
            top = torch.topk(logits, min(k + 4, logits.shape[1]), dim=1).indices
            for r, ids in enumerate(top.tolist()):
                row, (part, start, end) = masked[begin + r], spans[begin + r]
                old = texts[begin + r][part][start:end]
                cands = []
                for i in ids:
                    word = words.get(int(i))
                    if word and word.lower() != old.lower() and match_case(old, word) not in cands:
                        cands.append(match_case(old, word))
                out.append(cands[:k])
    return out


def hotflip_proposals(
    lm: LoadedModel, texts: tuple[str, ...], spans: list[tuple[int, int, int]], label: int, target: str, k: int
) -> list[list[str]]:
    """LIT's HotFlip, the reference: for each word that is one piece of ``lm``'s tokenizer, the ``k`` whole-word
    pieces whose swap most lowers the log probability of ``label`` to first order ((e_new - e_old) . grad at that
    token's embedding). A word of several pieces gets no proposal (HotFlip flips one token)."""
    import torch  # lazy: torch loads in seconds; the page's imports reach this module

    tok = lm.tokenizer
    enc = tok(*texts, truncation=True, max_length=lm.max_tokens, return_offsets_mapping=True, return_tensors="pt")
    offsets = enc.pop("offset_mapping")[0].tolist()
    seq_ids = enc.sequence_ids(0)
    extra = _model_inputs(lm, enc)
    ids = extra.pop("input_ids")
    emb = lm.model.get_input_embeddings()
    x = emb(ids).detach().requires_grad_(True)
    mask_at = int((ids[0] == tok.mask_token_id).int().argmax()) if target == "mask" else None  # the first mask
    with torch.enable_grad():
        logits = target_logits(lm.model, target, {"inputs_embeds": x, **extra}, mask_at)
        # the gradient at the input only: backward() would leave a .grad on every weight of the shared model
        (grad,) = torch.autograd.grad(torch.log_softmax(logits.float(), -1)[0, label], x)
    grad = grad[0]  # (seq, E)
    words = word_pieces(tok)
    table = emb.weight.detach()
    cand_ids = torch.tensor(list(words), device=table.device)
    cand_table = table[cand_ids]  # (words, E): gathered once, not per span
    out: list[list[str]] = []
    for part, start, end in spans:
        at = [p for p, (s, e) in enumerate(offsets) if seq_ids[p] == part and s < end and e > start and e > s]
        if len(at) != 1:
            out.append([])
            continue
        p = at[0]
        gain = (cand_table - table[ids[0, p]]) @ grad[p]  # the first-order change of the log probability
        order = torch.argsort(gain)[: k + 4].tolist()
        old = texts[part][start:end]
        cands = [
            match_case(old, words[int(cand_ids[i])]) for i in order if words[int(cand_ids[i])].lower() != old.lower()
        ]
        cands = list(dict.fromkeys(cands))[:k]
        out.append(cands)
    return out


def pseudo_log_likelihood(mlm: LoadedModel | None, texts: list[tuple[str, ...]]) -> np.ndarray:
    """Each text's pseudo-log-likelihood under ``mlm`` (natural log, summed over its non-special tokens); NaN for
    every text without an MLM (a classifier searched with HotFlip whose family has no bundled MLM)."""
    if mlm is None:
        return np.full(len(texts), np.nan)
    import torch  # lazy: torch loads in seconds; the page's imports reach this module

    tok = mlm.tokenizer
    specials = set(tok.all_special_ids)
    out = []
    with torch.no_grad():
        for row in texts:
            batch = encode_rows(mlm, [row])
            ids = batch["input_ids"][0]
            positions = [p for p, i in enumerate(ids.tolist()) if i not in specials]
            if not positions:
                out.append(0.0)
                continue
            total = 0.0
            per_call = max(1, TOKEN_BUDGET // len(ids))  # one masked copy per token: in batches of bounded memory
            for begin in range(0, len(positions), per_call):
                here = positions[begin : begin + per_call]
                rows = ids.repeat(len(here), 1)
                rows[torch.arange(len(here)), torch.tensor(here)] = tok.mask_token_id
                many = {"input_ids": rows, **{k: v.expand(len(here), -1) for k, v in batch.items() if k != "input_ids"}}
                logits = target_logits(mlm.model, "mask", many, here).float()
                total += float(torch.log_softmax(logits, -1)[torch.arange(len(here)), ids[here]].sum())
            out.append(total)
    return np.array(out)

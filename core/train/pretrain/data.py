"""From documents to training instances and batches.

- ``pair`` instances (BERT's NSP, ALBERT's SOP): [CLS] A [SEP] B [SEP], built like BERT's
  ``create_instances_from_document``: consecutive sentences fill a chunk up to the length budget, A is a random
  prefix of the chunk. NSP: half the time B is the rest of the chunk (label 0), half the time it is taken from
  another document (label 1). SOP: half the time A, B in order (label 0), half swapped (label 1).
- ``single`` instances (RoBERTa's DOC-SENTENCES, DistilBERT): consecutive sentences of one document packed up to
  the length budget.

Every instance keeps the per-token word index (for whole-word masking). Randomness comes from one
``random.Random(seed)``, so the instance list is a pure function of (documents, tokenizer, settings, seed).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from core.base.messages import msg
from core.base.segment import has_han
from core.data.masking import Masked, mask_tokens, segment_starts, word_index, word_starts
from core.registry import FAMILIES
from core.train import common as training


@dataclass(frozen=True)
class Instance:
    ids: tuple[int, ...]
    types: tuple[int, ...]
    words: tuple[int, ...]  # position of each token's word start (specials point to themselves)
    pair_label: int = -1  # NSP: 1 = B is random; SOP: 1 = swapped; -1 = no pair objective


@dataclass(frozen=True)
class Sentence:
    ids: tuple[int, ...]
    starts: tuple[bool, ...]


def tokenize_documents(docs: list[list[str]], tokenizer, family: str) -> list[list[Sentence]]:
    """Tokenize every sentence once (no special tokens) and record where words start (the family's piece kind;
    in Chinese, where the 词 of core.base.segment start, from the tokens' character offsets)."""
    kind = FAMILIES[family].piece_kind
    flat = [s for d in docs for s in d]
    chinese = getattr(tokenizer, "is_fast", False) and any(has_han(s) for s in flat)
    batch = tokenizer(flat, add_special_tokens=False, return_offsets_mapping=chinese)
    enc = batch["input_ids"]
    out, k = [], 0
    for d in docs:
        sents = []
        for text in d:
            ids = enc[k]
            starts = word_starts(tokenizer.convert_ids_to_tokens(ids), kind)
            if chinese and ids:
                starts = segment_starts(text, [tuple(o) for o in batch["offset_mapping"][k]], starts)
            k += 1
            if ids:
                sents.append(Sentence(tuple(ids), tuple(starts)))
        if sents:
            out.append(sents)
    return out


def _assemble(
    tokenizer,
    a: list[Sentence],
    b: list[Sentence] | None,
    label: int,
    max_len: int,
    rng: random.Random,
    use_types: bool,
) -> Instance:
    ta = [(i, s) for sent in a for i, s in zip(sent.ids, sent.starts)]
    tb = [(i, s) for sent in (b or []) for i, s in zip(sent.ids, sent.starts)]
    budget = max_len - (3 if b is not None else 2)
    while len(ta) + len(tb) > budget:  # truncate the longer side, from the front or back at random (as BERT)
        side = ta if len(ta) > len(tb) else tb
        side.pop(0 if rng.random() < 0.5 else -1)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    ids, starts, types = [cls], [True], [0]
    ids += [i for i, _ in ta] + [sep]
    starts += [s for _, s in ta] + [True]
    types += [0] * (len(ta) + 1)
    if b is not None:
        ids += [i for i, _ in tb] + [sep]
        starts += [s for _, s in tb] + [True]
        types += [1 if use_types else 0] * (len(tb) + 1)
    if ta:  # a truncated-away word start leaves a continuation first: it becomes a start
        starts[1] = True
    if tb:
        starts[len(ta) + 2] = True
    return Instance(tuple(ids), tuple(types), tuple(word_index(starts)), label)


def make_instances(
    docs: list[list[Sentence]],
    tokenizer,
    *,
    pair: str | None,
    max_len: int,
    seed: int,
    short_seq_prob: float = 0.1,
    use_types: bool = True,
) -> list[Instance]:
    """Build instances for ``pair`` in (None, "nsp", "sop"). Deterministic for a seed."""
    rng = random.Random(seed)
    out: list[Instance] = []
    for di, doc in enumerate(docs):
        budget = max_len - (3 if pair else 2)
        target = rng.randint(min(8, budget), budget) if rng.random() < short_seq_prob else budget
        chunk: list[Sentence] = []
        length, i = 0, 0
        while i < len(doc):
            chunk.append(doc[i])
            length += len(doc[i].ids)
            if i == len(doc) - 1 or length >= target:
                if pair is None:
                    out.append(_assemble(tokenizer, chunk, None, -1, max_len, rng, use_types))
                elif pair == "sop" and len(chunk) >= 2:
                    a_end = rng.randint(1, len(chunk) - 1)
                    a, b = chunk[:a_end], chunk[a_end:]
                    swap = rng.random() < 0.5
                    out.append(
                        _assemble(tokenizer, b if swap else a, a if swap else b, int(swap), max_len, rng, use_types)
                    )
                elif pair == "nsp":
                    a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                    a = chunk[:a_end]
                    if len(chunk) == 1 or rng.random() < 0.5:
                        other = rng.randrange(len(docs) - 1) if len(docs) > 1 else 0
                        other += other >= di and len(docs) > 1
                        odoc = docs[other]
                        start = rng.randrange(len(odoc))
                        b, blen = [], 0
                        for s in odoc[start:]:
                            b.append(s)
                            blen += len(s.ids)
                            if blen >= target - sum(len(x.ids) for x in a):
                                break
                        i -= len(chunk) - a_end  # put the unused sentences back (as BERT does)
                        out.append(_assemble(tokenizer, a, b, 1, max_len, rng, use_types))
                    else:
                        out.append(_assemble(tokenizer, a, chunk[a_end:], 0, max_len, rng, use_types))
                chunk, length = [], 0
                target = rng.randint(min(8, budget), budget) if rng.random() < short_seq_prob else budget
            i += 1
    return out


@dataclass(frozen=True)
class Batch:
    input_ids: torch.Tensor  # (batch, seq) after masking
    attention_mask: torch.Tensor  # (batch, seq)
    token_type_ids: torch.Tensor  # (batch, seq)
    labels: torch.Tensor  # (batch, seq), -100 where not selected
    pair_labels: torch.Tensor  # (batch,), -1 when there is no pair objective
    original_ids: torch.Tensor  # (batch, seq) before masking


def pad(instances: list[Instance], tokenizer) -> tuple[torch.Tensor, ...]:
    """Pad to the longest instance through the tokenizer (core.train.common.pad, on its padding side): ids, attention
    mask, token types, word index (padding points to itself), pair labels."""
    b = training.pad(
        tokenizer,
        [
            {"input_ids": x.ids, "token_type_ids": x.types, "words": x.words, "pair_labels": x.pair_label}
            for x in instances
        ],
        fill={"words": training.POSITION},
    )
    return b["input_ids"], b["attention_mask"], b["token_type_ids"], b["words"], b["pair_labels"]


def special_mask(ids: torch.Tensor, attention: torch.Tensor, tokenizer) -> torch.Tensor:
    """True at positions never selected for MLM: [CLS], [SEP], padding (and any other special id)."""
    special = attention == 0
    for sid in tokenizer.all_special_ids:
        special |= ids == sid
    return special


def collate(
    instances: list[Instance],
    tokenizer,
    *,
    generator: torch.Generator | None,
    mlm_probability: float,
    whole_word: bool,
    vocab_size: int,
    masked: Masked | None = None,
) -> Batch:
    """Pad and mask a list of instances. ``masked`` reuses a fixed (static) mask; else a fresh one is drawn."""
    ids, att, types, words, pairs = pad(instances, tokenizer)
    if masked is None:
        if generator is None:
            raise ValueError(msg("pretrain.collate_needs_generator_dynamic"))
        masked = mask_tokens(
            ids,
            special_mask(ids, att, tokenizer),
            mask_id=tokenizer.mask_token_id,
            vocab_size=vocab_size,
            generator=generator,
            mlm_probability=mlm_probability,
            word_ids=words if whole_word else None,
        )
    return Batch(masked.input_ids, att, types, masked.labels, pairs, ids)

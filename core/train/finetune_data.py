"""Fine-tuning data plumbing: texts (or pre-split words) tokenized once, unpadded, collated into batches padded to
their own longest row, from length-grouped batches of indices.

``SequenceTask`` and ``TokenTask`` are what each task adds to core.train.finetune's one loop: the tokenizer, the
encoding, the collator, the scored units of a held-out row and the early-stopping score.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from core.base.messages import msg
from core.data.datasets_local import DataError, LabelledData, Split
from core.data.token_data import TokenData, align_batch, words_tokenizer

L = TypeVar("L")  # one row's label: a class id (sequence task), or a tag id per piece (token task)


@dataclass
class Encoded(Generic[L]):
    ids: list[list[int]]
    extra: dict[str, list[list[int]]]  # token_type_ids where the family has them
    labels: list[L]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> int:  # the DataLoader hands indices to the collate function
        return i


def encode(tokenizer, split: Split, max_length: int) -> Encoded[int]:
    enc = tokenizer(
        list(split.texts),
        list(split.texts_b) if split.texts_b is not None else None,
        truncation=True,
        max_length=max_length,
    )
    extra = {k: enc[k] for k in ("token_type_ids",) if k in enc and k in tokenizer.model_input_names}
    return Encoded(enc["input_ids"], extra, list(split.labels))


@dataclass
class EncodedWords(Encoded[list[int]]):
    """Token classification: ``labels`` per piece (the word's tag id on its first piece, -100 elsewhere)."""

    n_words: list[int] = field(default_factory=list)  # words that fit in max_length, per sentence


def encode_words(tokenizer, split, label2id: dict[str, int], max_length: int) -> EncodedWords:
    rows = align_batch(tokenizer, split.words, split.tags, label2id, max_length)
    extra = {"token_type_ids": [r["token_type_ids"] for r in rows]} if rows and "token_type_ids" in rows[0] else {}
    return EncodedWords(
        [r["input_ids"] for r in rows], extra, [r["labels"] for r in rows], [r["n_words"] for r in rows]
    )


E = TypeVar("E", bound="Encoded[Any]")


class Task(Protocol[E]):
    """What a task adds to core.train.finetune's one loop; its methods take the encoding its own ``encode`` made."""

    name: str
    head: str

    def tokenizer(self, tokenizer: Any) -> Any: ...

    def encode(self, tokenizer: Any, split: Any, max_length: int) -> E: ...

    def collator(self, enc: E, tokenizer: Any) -> Callable[[list[int]], dict[str, Any]]: ...

    def units(self, probs_row: Any, labels_row: Any) -> Any: ...

    def targets(self, enc: E) -> np.ndarray: ...

    def score(self, probs: np.ndarray, enc: E) -> tuple[float, dict]: ...


class SequenceTask:
    """What sequence classification adds to the shared loop: one label per row, a (batch, classes) logit."""

    name, head = "sequence", "seqcls"

    def __init__(self, data):
        if not isinstance(data, LabelledData):
            raise DataError(msg("finetune.sequence_classification_needs_labelled"))
        self.data = data

    def tokenizer(self, tokenizer):
        return tokenizer

    def encode(self, tokenizer, split, max_length: int) -> Encoded[int]:
        return encode(tokenizer, split, max_length)

    def collator(self, enc: Encoded[int], tokenizer) -> Callable[[list[int]], dict[str, Any]]:
        import torch  # lazy: torch and transformers load in seconds; only a run's collation needs them
        from transformers import DataCollatorWithPadding  # lazy: as torch

        # transformers' collator pads input_ids/attention_mask/token_type_ids through tokenizer.pad to the batch's
        # longest row (dynamic padding); labels and our row indices pass through as (batch,) tensors.
        pad = DataCollatorWithPadding(tokenizer, return_tensors="pt")

        def collate(indices: list[int]) -> dict[str, Any]:
            feats = [
                {"input_ids": enc.ids[i], **{k: v[i] for k, v in enc.extra.items()}, "labels": enc.labels[i]}
                for i in indices
            ]
            return {**pad(feats), "idx": torch.tensor(indices)}

        return collate

    def units(self, probs_row, labels_row):
        """The scored units of one evaluated row: its class probabilities, shape (1, classes)."""
        return probs_row[None]

    def targets(self, enc: Encoded[int]) -> np.ndarray:
        return np.asarray(enc.labels)

    def score(self, probs: np.ndarray, enc: Encoded[int]) -> tuple[float, dict]:
        """The early-stopping score (held-out accuracy) and extra eval fields."""
        return float((probs.argmax(-1) == self.targets(enc)).mean()), {}


class TokenTask:
    """Token classification: labels per piece (-100 off first pieces), a (batch, pieces, tags) logit, scores per
    word; the early-stopping score is the entity F1 (token accuracy is mostly the O tag)."""

    name, head = "token", "tokcls"

    def __init__(self, data):
        if not isinstance(data, TokenData):
            raise DataError(msg("finetune.token_classification_needs_word"))
        self.data = data

    def tokenizer(self, tokenizer):
        return words_tokenizer(tokenizer)

    def encode(self, tokenizer, split, max_length: int) -> EncodedWords:
        return encode_words(tokenizer, split, self.data.label2id, max_length)

    def collator(self, enc: EncodedWords, tokenizer) -> Callable[[list[int]], dict[str, Any]]:
        import torch  # lazy: as in SequenceTask.collator
        from transformers import DataCollatorForTokenClassification  # lazy: as torch

        # transformers' collator pads input_ids/attention_mask (tokenizer.pad) and the labels with -100, to the
        # batch's longest row: the same dynamic padding as the sequence collator. We add the row indices.
        pad = DataCollatorForTokenClassification(tokenizer, label_pad_token_id=-100, return_tensors="pt")

        def collate(indices: list[int]) -> dict[str, Any]:
            feats = [
                {"input_ids": enc.ids[i], "labels": enc.labels[i], **{k: v[i] for k, v in enc.extra.items()}}
                for i in indices
            ]
            return {**pad(feats), "idx": torch.tensor(indices)}

        return collate

    def units(self, probs_row, labels_row):
        return probs_row[labels_row != -100]  # (words, tags): the first piece of every word

    def targets(self, enc: EncodedWords) -> np.ndarray:
        return np.asarray([y for row in enc.labels for y in row if y != -100], dtype=np.int64)

    def tag_lists(self, flat_ids: np.ndarray, enc: EncodedWords) -> list[list[str]]:
        names, out, i = self.data.label_names, [], 0
        for n in enc.n_words:
            out.append([names[j] for j in flat_ids[i : i + n]])
            i += n
        return out

    def score(self, probs: np.ndarray, enc: EncodedWords) -> tuple[float, dict]:
        from seqeval.metrics import f1_score  # lazy: only the token task's evaluation needs seqeval

        gold = self.tag_lists(self.targets(enc), enc)
        pred = self.tag_lists(probs.argmax(-1), enc)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tags not in IOB form: noted when the data was read
            f1 = float(f1_score(gold, pred, zero_division=0))
        return f1, {"eval_f1": f1}


def task_for(cfg, data) -> Task[Any]:
    return TokenTask(data) if cfg.task == "token" else SequenceTask(data)


class LengthGroupedBatches:
    """Batches of indices: shuffle, cut into mega-batches of 50 batches, sort each by length, then shuffle the
    batches. Rows of similar length share a batch, so dynamic padding adds few pad tokens (HF's
    LengthGroupedSampler idea). ``shuffle=False`` gives sorted batches (evaluation)."""

    def __init__(self, lengths: list[int], batch_size: int, seed: int, shuffle: bool = True, group: bool = True):
        self.lengths, self.batch_size, self.seed, self.shuffle, self.group = lengths, batch_size, seed, shuffle, group
        self.epoch = 0
        self.drop_last = False

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)

    def __iter__(self):
        n, bs = len(self.lengths), self.batch_size
        rng = random.Random(self.seed + self.epoch)
        idx = list(range(n))
        if not self.shuffle:
            if self.group:
                idx.sort(key=lambda i: -self.lengths[i])
            yield from (idx[i : i + bs] for i in range(0, n, bs))
            return
        rng.shuffle(idx)
        if self.group:
            mega = bs * 50
            idx = [i for m in range(0, n, mega) for i in sorted(idx[m : m + mega], key=lambda i: -self.lengths[i])]
        batches = [idx[i : i + bs] for i in range(0, n, bs)]
        if self.group:
            rng.shuffle(batches)
        yield from batches


def padding_saved(lengths: list[int], batch_size: int, max_length: int, seed: int = 0, group: bool = True) -> float:
    """Share of padded tokens avoided by dynamic padding (+ length grouping) against padding to max_length."""
    fixed = len(lengths) * max_length
    s = LengthGroupedBatches(lengths, batch_size, seed, shuffle=True, group=group)
    dynamic = sum(len(b) * max(lengths[i] for i in b) for b in s)
    return 1.0 - dynamic / fixed

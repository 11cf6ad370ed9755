"""The data map of a fine-tune (Dataset Cartography, Swayamdipta et al. 2020): for every training example, how sure
the model was of its gold label while it learned, and how much that changed from epoch to epoch.

The paper reads the training dynamics off the training run itself: in every epoch, the probability the model gives
each example's gold label in the forward pass that trains on it (dropout on, the weights of that moment). From
those, per example over the epochs so far:

- confidence: the mean of the gold label's probability;
- variability: its standard deviation (the population's, as the paper's ``np.std``);
- correctness: the share of epochs in which the model's top class was the gold label.

Plotted as confidence against variability, the examples fall into three regions the paper names: easy-to-learn
(high confidence, low variability), ambiguous (high variability) and hard-to-learn (low confidence, low
variability), where mislabelled examples gather. ``Recorder`` collects the probabilities inside
core.train.finetune's loop at the cost of a softmax on logits it already has; ``DataMap`` is the frozen result with
the region rules and the CSV export.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

REGIONS = ("easy", "ambiguous", "hard")  # region keys; the CSV writes REGION_NAMES, pages their own words
REGION_NAMES = {"easy": "easy-to-learn", "ambiguous": "ambiguous", "hard": "hard-to-learn"}
# The paper selects the third of the examples with the highest variability as its ambiguous set; the rest split at
# a confidence of one half: the gold label more likely than not on average (learned) or not (hard to learn).
AMBIGUOUS_SHARE = 1 / 3
CONFIDENCE_SPLIT = 0.5
ARRAYS = ("map_probs", "map_correct")  # what a checkpoint holds of the recorder (core.train.finetune)


@dataclass(frozen=True)
class DataMap:
    """Training dynamics of ``n`` examples over ``epochs`` finished epochs. Fields hold plain numpy arrays."""

    confidence: np.ndarray  # (n,) mean of the gold label's probability over the epochs
    variability: np.ndarray  # (n,) its standard deviation over the epochs
    correctness: np.ndarray  # (n,) share of the epochs whose top class was the gold label
    labels: np.ndarray  # (n,) gold label ids
    epochs: int
    # (epochs, n): the gold label's probability in each epoch's training forward; None in the live map a job's
    # progress carries (core.train.finetune), which needs only the three measures
    gold_probs: np.ndarray | None = None

    @classmethod
    def of(cls, gold_probs: np.ndarray, correct: np.ndarray, labels: np.ndarray) -> DataMap:
        """The map of (epochs, n) gold-label probabilities and (epochs, n) top-class-was-gold flags."""
        gold_probs = np.asarray(gold_probs, dtype=np.float32)
        return cls(
            confidence=gold_probs.mean(0),
            variability=gold_probs.std(0),
            correctness=np.asarray(correct, dtype=np.float32).mean(0),
            labels=np.asarray(labels),
            epochs=int(gold_probs.shape[0]),
            gold_probs=gold_probs,
        )

    def __len__(self) -> int:
        return len(self.confidence)

    @property
    def ambiguous_cut(self) -> float:
        """The variability from which an example is ambiguous: the top AMBIGUOUS_SHARE of the map (never 0: after
        one epoch every variability is 0 and no example is ambiguous)."""
        v = self.variability
        cut = float(np.quantile(v, 1 - AMBIGUOUS_SHARE)) if len(v) else 0.0
        return max(cut, float(np.finfo(np.float32).tiny))

    def regions(self) -> np.ndarray:
        """Each example's region key (REGIONS): ambiguous from ``ambiguous_cut`` on, else easy at a confidence of at
        least CONFIDENCE_SPLIT, else hard."""
        easy_or_hard = np.where(self.confidence >= CONFIDENCE_SPLIT, "easy", "hard")
        return np.where(self.variability >= self.ambiguous_cut, "ambiguous", easy_or_hard)

    def region_counts(self) -> dict[str, int]:
        regions = self.regions()
        return {r: int((regions == r).sum()) for r in REGIONS}

    def lowest_confidence(self, share: float) -> np.ndarray:
        """Indices of the ``share`` of examples (at least one) with the lowest confidence, lowest first: where
        mislabelled examples are looked for (ties broken by index, so the order is reproducible)."""
        k = max(1, int(round(share * len(self))))
        return np.argsort(self.confidence, kind="stable")[:k]

    def to_csv(self, texts: Sequence[str], label_names: Sequence[str]) -> str:
        """One row per training example: its index, text, gold label, confidence, variability, correctness, region
        and the gold label's probability in every epoch."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        per_epoch = self.gold_probs if self.gold_probs is not None else np.zeros((0, len(self)), np.float32)
        epochs = [f"p_gold_epoch{e + 1}" for e in range(len(per_epoch))]
        w.writerow(["index", "text", "label", "confidence", "variability", "correctness", "region", *epochs])
        conf, var, corr, regions = self.confidence, self.variability, self.correctness, self.regions()
        for i in range(len(self)):
            w.writerow(
                [
                    i,
                    texts[i],
                    label_names[int(self.labels[i])],
                    f"{conf[i]:.6f}",
                    f"{var[i]:.6f}",
                    f"{corr[i]:.6f}",
                    REGION_NAMES[str(regions[i])],
                    *(f"{p:.6f}" for p in per_epoch[:, i]),
                ]
            )
        return buf.getvalue()

    def to_metrics(self) -> dict[str, Any]:
        """The live map as a job's metrics entry (core.runtime.jobs: pickled to the app's process): the three
        measures and the labels as small numpy arrays, not the per-epoch probabilities (a job keeps every entry,
        and a map's grows with the epochs)."""
        return dict(
            confidence=self.confidence.astype(np.float32),
            variability=self.variability.astype(np.float32),
            correctness=self.correctness.astype(np.float32),
            labels=self.labels.astype(np.int32),
            epochs=self.epochs,
        )

    @classmethod
    def from_metrics(cls, entry: dict[str, Any]) -> DataMap:
        """The map ``to_metrics`` wrote (without the per-epoch probabilities)."""
        arrays = {k: np.asarray(entry[k]) for k in ("confidence", "variability", "correctness", "labels")}
        return cls(**arrays, epochs=int(entry["epochs"]))


class Recorder:
    """Collects the gold label's probability of every training example, per epoch, inside the training loop.

    ``record`` takes a batch's logits, gold labels and row indices (the rows' places in the training split) and
    writes into buffers on the device (no synchronisation with the host, so no step waits for it); ``end_epoch``
    merges the processes' buffers (one gather an epoch under ``accelerate launch``) into the finished epochs. The
    epoch in progress and the finished ones go into a checkpoint (``arrays``) and come back (``restore``), so a
    resumed run's map equals an uninterrupted one's."""

    def __init__(self, labels: Sequence[int], device: Any):
        import torch  # lazy: torch loads in seconds; importing this module (the page's DataMap) does not need it

        self.labels = np.asarray(labels, dtype=np.int64)
        n = len(self.labels)
        self.prob = torch.zeros(n, dtype=torch.float32, device=device)
        self.hit = torch.zeros(n, dtype=torch.bool, device=device)
        self.seen = torch.zeros(n, dtype=torch.bool, device=device)
        self.probs: list[np.ndarray] = []  # finished epochs: (n,) each
        self.correct: list[np.ndarray] = []

    def record(self, idx, logits, labels) -> None:
        """One training batch: ``idx`` (b,) row indices, ``logits`` (b, classes) from its training forward, ``labels``
        (b,) gold label ids. A row seen twice in one epoch (accelerate's even batches repeat rows) keeps the last."""
        import torch  # lazy: as in __init__

        with torch.no_grad():
            logits = logits.detach().float()
            gold = torch.softmax(logits, -1).gather(1, labels[:, None])[:, 0]
            self.prob[idx] = gold
            self.hit[idx] = logits.argmax(-1) == labels
            self.seen[idx] = True

    def _merged(self, acc) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(prob, hit, seen) of the epoch in progress over every process: each row from the first process that
        saw it."""
        import torch  # lazy: as in __init__

        rows = torch.stack([self.prob, self.hit.float(), self.seen.float()])  # (3, n)
        if acc is not None and acc.num_processes > 1:
            rows = acc.gather(rows[None]).reshape(acc.num_processes, 3, -1)  # (processes, 3, n)
        else:
            rows = rows[None]
        rows = rows.cpu().numpy()
        seen = rows[:, 2] > 0
        first = seen.argmax(0)  # the first process that saw each row (0 where none did)
        cols = np.arange(rows.shape[2])
        return rows[first, 0, cols], rows[first, 1, cols] > 0, seen.any(0)

    def end_epoch(self, acc) -> DataMap:
        """Close the epoch (every process calls it): its probabilities join the finished epochs; the map so far."""
        prob, hit, _ = self._merged(acc)
        self.probs.append(prob.astype(np.float32))
        self.correct.append(hit)
        self.seen.zero_()
        return DataMap.of(np.stack(self.probs), np.stack(self.correct), self.labels)

    def result(self) -> DataMap | None:
        """The map of the finished epochs; None before the first (a run stopped within its first epoch)."""
        if not self.probs:
            return None
        return DataMap.of(np.stack(self.probs), np.stack(self.correct), self.labels)

    def arrays(self, acc) -> dict[str, np.ndarray]:
        """For a checkpoint (every process calls it): the finished epochs and the one in progress, (epochs + 1, n),
        NaN where the epoch in progress has not reached a row yet."""
        prob, hit, seen = self._merged(acc)
        probs = np.stack([*self.probs, np.where(seen, prob, np.nan).astype(np.float32)])
        correct = np.stack([*(c.astype(np.float32) for c in self.correct), np.where(seen, hit, np.nan)])
        return dict(zip(ARRAYS, (probs, correct.astype(np.float32))))

    def restore(self, arrays: dict[str, np.ndarray | None]) -> bool:
        """Continue from what ``arrays`` wrote (every process gets the epoch in progress so far); False when they
        hold no map (a checkpoint of a run that recorded none)."""
        import torch  # lazy: as in __init__

        probs, correct = (arrays.get(k) for k in ARRAYS)
        if probs is None or correct is None or probs.shape[1:] != self.labels.shape:
            return False
        self.probs = [p.astype(np.float32) for p in probs[:-1]]
        self.correct = [c > 0 for c in correct[:-1]]
        seen = ~np.isnan(probs[-1])
        device = self.prob.device
        self.prob = torch.from_numpy(np.nan_to_num(probs[-1]).astype(np.float32)).to(device)
        self.hit = torch.from_numpy(np.nan_to_num(correct[-1]) > 0).to(device)
        self.seen = torch.from_numpy(seen).to(device)
        return True

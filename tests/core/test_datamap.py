"""core/train/datamap (Dataset Cartography's data map, recorded inside core/train/finetune's loop): the recorder's
arithmetic, the regions and the CSV; a cancelled and resumed run draws the same map as an uninterrupted one; and on
real data, labels flipped on purpose land among the least confident examples."""

from __future__ import annotations

import csv
import dataclasses
import io
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from core.data.datasets_local import LabelledData, Split, load_bundled
from core.data.token_data import load_bundled_tokens
from core.runtime.job_outcome import JobCancelled
from core.train.datamap import AMBIGUOUS_SHARE, DataMap, Recorder
from core.train.finetune import train
from core.train.finetune_config import FinetuneConfig

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------- arithmetic
def _logits_for(gold_probs: list[float], labels: list[int], classes: int = 2) -> torch.Tensor:
    """Logits whose softmax gives each row's gold label ``gold_probs[i]`` (the rest spread evenly)."""
    rows = []
    for p, y in zip(gold_probs, labels):
        probs = np.full(classes, (1 - p) / (classes - 1))
        probs[y] = p
        rows.append(np.log(probs))
    return torch.tensor(np.array(rows), dtype=torch.float32)


def test_recorder_measures_confidence_variability_and_correctness():
    labels = [0, 1, 2, 1]
    # per epoch, the gold label's probability of rows 0..3; batches arrive in another order every epoch
    epochs = [[0.9, 0.2, 0.5, 0.1], [0.7, 0.6, 0.45, 0.2], [0.95, 0.1, 0.8, 0.3]]
    orders = [[0, 1, 2, 3], [3, 1, 0, 2], [2, 0, 3, 1]]
    rec = Recorder(labels, "cpu")
    maps = []
    for probs, order in zip(epochs, orders):
        for batch in (order[:2], order[2:]):
            idx = torch.tensor(batch)
            y = torch.tensor([labels[i] for i in batch])
            rec.record(idx, _logits_for([probs[i] for i in batch], y.tolist(), classes=3), y)
        maps.append(rec.end_epoch(None))
    p = np.array(epochs)
    dm = maps[-1]
    assert dm.epochs == 3 and len(dm) == 4 and maps[0].epochs == 1
    assert np.allclose(dm.gold_probs, p, atol=1e-6)
    assert np.allclose(dm.confidence, p.mean(0), atol=1e-6)
    assert np.allclose(dm.variability, p.std(0), atol=1e-6)  # the population's std, as the paper's np.std
    # top class is gold when its probability beats the others' (1 - p) / 2: p > 1/3
    assert np.allclose(dm.correctness, (p > 1 / 3).mean(0))
    assert np.allclose(dm.correctness, [1, 1 / 3, 1, 0])
    assert np.allclose(maps[0].variability, 0) and maps[0].region_counts()["ambiguous"] == 0  # one epoch: none
    # the live map a job carries has the three measures, not the per-epoch probabilities
    live = DataMap.from_metrics(dm.to_metrics())
    assert live.gold_probs is None and live.epochs == 3
    assert np.allclose(live.confidence, dm.confidence) and np.array_equal(live.labels, dm.labels)


def test_regions_lowest_confidence_and_csv():
    conf = np.array([0.95, 0.9, 0.1, 0.2, 0.5, 0.6])
    var = np.array([0.01, 0.02, 0.03, 0.01, 0.3, 0.25])
    dm = DataMap(conf, var, np.array([1, 1, 0, 0, 0.5, 0.5]), np.array([0, 1, 0, 1, 0, 1]), 2)
    # the top third by variability is ambiguous; the rest split at a confidence of one half
    assert round(AMBIGUOUS_SHARE * len(dm)) == 2
    assert dm.regions().tolist() == ["easy", "easy", "hard", "hard", "ambiguous", "ambiguous"]
    assert dm.region_counts() == {"easy": 2, "ambiguous": 2, "hard": 2}
    assert dm.lowest_confidence(0.34).tolist() == [2, 3]
    rows = list(csv.DictReader(io.StringIO(dm.to_csv(["a", "b, with a comma", "c", "d", "e", "f"], ["neg", "pos"]))))
    assert [r["region"] for r in rows] == ["easy-to-learn"] * 2 + ["hard-to-learn"] * 2 + ["ambiguous"] * 2
    assert rows[1]["text"] == "b, with a comma" and rows[1]["label"] == "pos" and float(rows[2]["confidence"]) == 0.1


# ---------------------------------------------------------------------------------------------- resume
def _toy(n: int, seed: int) -> LabelledData:
    rng = random.Random(seed)
    words = (["bad", "awful", "poor", "dull"], ["good", "great", "fine", "nice"])

    def split(k: int) -> Split:
        ys = [rng.randint(0, 1) for _ in range(k)]
        return Split(tuple(f"it was {rng.choice(words[y])}" for y in ys), tuple(ys))

    return LabelledData("toy", split(n), split(8), ("neg", "pos"), "generated in the test", "n/a")


def test_a_resumed_run_draws_the_map_of_an_uninterrupted_one(tiny_models, tmp_path):
    """Cancelled inside its second epoch (the epoch in progress half recorded), then resumed: the same map, and the
    job's progress carried the map after every finished epoch."""
    cfg = FinetuneConfig(
        "bert", str(tiny_models["bert"]), epochs=3, lr=1e-3, batch_size=16, max_length=16, patience=0, seed=3
    )
    data = _toy(64, 0)  # 4 steps an epoch
    live: list[DataMap] = []
    full = train(cfg, data, tmp_path / "full", on_step=lambda i: i.data_map is not None and live.append(i.data_map))
    assert [m.epochs for m in live] == [1, 2, 3]
    assert full.data_map is not None and full.data_map.epochs == 3 and len(full.data_map) == 64
    assert np.allclose(live[-1].confidence, full.data_map.confidence)
    assert np.array_equal(full.data_map.labels, np.array(data.train.labels))

    def stop_at_6(info):
        if info.kind == "train" and info.step == 6:
            raise JobCancelled()

    with pytest.raises(JobCancelled):
        train(cfg, data, tmp_path / "run", on_step=stop_at_6)
    resumed = train(cfg, data, tmp_path / "run", resume=True)
    assert resumed.data_map is not None
    assert np.allclose(resumed.data_map.gold_probs, full.data_map.gold_probs, atol=1e-6)
    assert np.array_equal(resumed.data_map.correctness, full.data_map.correctness)
    # a run with the map off, and a token run (one step an epoch), carry none
    off = train(dataclasses.replace(cfg, data_map=False, epochs=1), data, tmp_path / "off")
    tokens = load_bundled_tokens().subset(16, 4)
    tok = train(dataclasses.replace(cfg, task="token", epochs=1), tokens, tmp_path / "tok")
    assert off.data_map is None and tok.data_map is None and tok.token_metrics is not None


# ---------------------------------------------------------------------------------------------- flipped labels
FLIPPED = 20


@pytest.mark.timeout(300)  # about 15 s of real training on one idle core
def test_flipped_labels_land_among_the_least_confident(tmp_path):
    """Dataset Cartography's use: mislabelled examples are hard to learn. 20 WordNet glosses get a wrong label on
    purpose (seeded); after a short real fine-tune of a bundled mini, at least 14 of them are among the 10% of the
    600 training examples with the lowest confidence (20 with these seeds; 18 to 20 over seven seeds)."""
    data = load_bundled("wordnet").subset(None, 32)
    rng = random.Random(0)
    flipped = rng.sample(range(len(data.train)), FLIPPED)
    labels = list(data.train.labels)
    for i in flipped:
        labels[i] = (labels[i] + rng.randrange(1, data.num_labels)) % data.num_labels  # another class
    noisy = dataclasses.replace(data, train=dataclasses.replace(data.train, labels=tuple(labels)))
    cfg = FinetuneConfig(
        "distilbert",
        str(ROOT / "assets/models/distilbert-mini"),
        epochs=3,
        lr=1e-3,
        batch_size=32,
        max_length=32,
        freeze_embeddings=True,  # the optimizer's work on a 30k-row table would be most of each step
        freeze_layers=1,  # and a shorter backward: 15 CPU-seconds on one thread, the map as clear
        patience=0,
        seed=0,
        device="cpu",
    )
    r = train(cfg, noisy, tmp_path / "run")
    dm = r.data_map
    assert dm is not None and dm.epochs == 3 and len(dm) == 600
    found = len(set(dm.lowest_confidence(0.10).tolist()) & set(flipped))
    print(f"\nflipped labels among the 10% least confident: {found}/{FLIPPED} ({r.steps} steps)")
    assert found >= 14, found
    # and they sit in the hard-to-learn corner far more often than the clean examples do
    hard = dm.regions() == "hard"
    assert hard[flipped].mean() > 2 * np.delete(hard, flipped).mean()

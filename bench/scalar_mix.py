"""Last layer against a learned mix of all layers: the articles' "the last layer's hidden states are not necessarily
the best; try a weighted average of the middle layers", measured.

On the bundled tasks (core.data.datasets_local: the WordNet gloss topics, 6 classes, and the drug reviews, 3 classes) a
bundled mini (encoderlab/bert-mini by default) is fine-tuned with pooling "cls" (the family's own head on the last
layer's [CLS]), "mean" (mean of the last layer's tokens + a linear head) and "scalar_mix" (ELMo's softmax-weighted
sum of every depth, embeddings included, times gamma, then the mean + a linear head), for the same seeds and the same
steps. It prints held-out accuracy mean ± std (sample std over the seeds) per pooling, the majority baseline, and
the scalar mix's learned layer weights (mean over seeds).

Every run stops inside its first epoch (STEPS < train rows / batch), so core.train.finetune evaluates on the held-out
split exactly once, at the end: no run is picked by its held-out score.

Run: .venv/bin/python bench/scalar_mix.py  [BENCH_STEPS=30] [BENCH_SEEDS=3] [BENCH_LEN=64] [BENCH_BATCH=16]
     [BENCH_LR=1e-4] [BENCH_DATASETS=wordnet,drugreview] [BENCH_MODEL=encoderlab/bert-mini] [BENCH_THREADS=1]
     [BENCH_DEVICE=cpu] [--quick]
``--quick``: 2 steps, seed 0 only, the WordNet topics only (seconds; tests/test_bench_quick.py runs it). Each
dataset ends with each pooling's accuracy as a ratio to ``cls`` (the baseline).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from core.data.datasets_local import load_bundled  # noqa: E402
from core.train.finetune import train  # noqa: E402
from core.train.finetune_config import FinetuneConfig

STEPS = int(os.environ.get("BENCH_STEPS", "30"))
SEEDS = int(os.environ.get("BENCH_SEEDS", "3"))
MAX_LEN = int(os.environ.get("BENCH_LEN", "64"))
BATCH = int(os.environ.get("BENCH_BATCH", "16"))
LR = float(os.environ.get("BENCH_LR", "1e-4"))
DATASETS = [d for d in os.environ.get("BENCH_DATASETS", "wordnet,drugreview").split(",") if d]
MODEL = os.environ.get("BENCH_MODEL", "encoderlab/bert-mini")
THREADS = int(os.environ.get("BENCH_THREADS", "1"))
DEVICE = os.environ.get("BENCH_DEVICE", "cpu")
POOLINGS = ("cls", "mean", "scalar_mix")


def mean_std(xs: list[float]) -> tuple[float, float]:
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def main() -> None:
    global STEPS, SEEDS, DATASETS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 steps, 1 seed, WordNet topics only: seconds")
    if ap.parse_args().quick:
        STEPS, SEEDS, DATASETS = 2, 1, ["wordnet"]
    if DEVICE == "cpu":
        torch.set_num_threads(THREADS)  # a shared small machine: more threads than free cores only spin
    family = MODEL.split("/")[-1].split("-")[0]
    print(
        f"model {MODEL}, {STEPS} steps x batch {BATCH}, max length {MAX_LEN}, lr {LR:g} (scalar mix: x100), "
        f"seeds 0..{SEEDS - 1}, device {DEVICE}, torch threads {torch.get_num_threads()}"
    )
    t_all = time.perf_counter()
    for name in DATASETS:
        data = load_bundled(name)
        per_epoch = len(data.train) // BATCH
        if STEPS >= per_epoch:
            sys.exit(
                f"BENCH_STEPS={STEPS} would pass an epoch end ({per_epoch} steps) and evaluate twice; keep "
                f"it below {per_epoch} so each run is scored once."
            )
        print(
            f"\n{name}: {len(data.train)} train / {len(data.test)} held-out, {data.num_labels} classes, "
            f"majority baseline {data.majority_rate():.3f}"
        )
        print(f"{'pooling':<12}{'accuracy':>18}{'macro-F1':>18}  per seed{'':<16}s/run")
        weights: list[tuple[float, ...]] = []
        mean_acc: dict[str, float] = {}
        for pooling in POOLINGS:
            accs, f1s, secs = [], [], []
            for seed in range(SEEDS):
                out = tempfile.mkdtemp(prefix="bench-mix-")
                try:
                    cfg = FinetuneConfig(
                        family=family,
                        checkpoint=MODEL,
                        epochs=1,
                        max_steps=STEPS,
                        lr=LR,
                        batch_size=BATCH,
                        max_length=MAX_LEN,
                        seed=seed,
                        pooling=pooling,
                        patience=0,
                        device=DEVICE,
                    )
                    t0 = time.perf_counter()
                    res = train(cfg, data, out)
                    secs.append(time.perf_counter() - t0)
                finally:
                    shutil.rmtree(out, ignore_errors=True)
                assert len(res.evals) == 1, res.evals  # scored once, at the end
                accs.append(res.accuracy)
                f1s.append(res.macro_f1)
                if res.layer_weights is not None:
                    weights.append(res.layer_weights)
            (ma, sa), (mf, sf) = mean_std(accs), mean_std(f1s)
            mean_acc[pooling] = ma
            print(
                f"{pooling:<12}{ma:>11.3f} ± {sa:.3f}{mf:>11.3f} ± {sf:.3f}  "
                f"{' '.join(f'{a:.3f}' for a in accs):<24}{statistics.fmean(secs):6.0f}"
            )
        print(
            "accuracy against cls (baseline): "
            + ", ".join(
                f"{p} {mean_acc[p] / mean_acc['cls']:.2f}x" if mean_acc["cls"] > 0 else f"{p} -" for p in POOLINGS
            )
        )
        if weights:
            mean_w = [statistics.fmean(w[i] for w in weights) for i in range(len(weights[0]))]
            sd_w = [statistics.stdev(w[i] for w in weights) if len(weights) > 1 else 0.0 for i in range(len(mean_w))]
            labels = ["emb"] + [f"L{i}" for i in range(1, len(mean_w))]
            print(f"scalar-mix layer weights (mean ± std over seeds; an even mix is {1 / len(mean_w):.3f}):")
            print("  " + "  ".join(f"{lab} {m:.3f}±{s:.3f}" for lab, m, s in zip(labels, mean_w, sd_w)))
    print(f"\ntotal {time.perf_counter() - t_all:,.0f} s")


if __name__ == "__main__":
    main()

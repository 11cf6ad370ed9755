"""Layer probes (core/represent/probes.py): what training a probe at every depth costs, on bert-mini with 2,000 sentences.

For each probe task, on the bundled corpus's train split with BENCH_PER_TASK items (default 2,000): the time to
read every depth's vectors (core.represent.token_vectors, the forward the probes need) and the time to fit the linear probes
(one standardised L2 logistic regression per depth, 7 depths on bert-mini; the word task fits a second set for its
control task). The named baseline from the same run is a bare encoder forward over the same sentences in the same
length-sorted batches with no hidden states kept: the ratio says how much the probes cost beyond reading the text
once. It prints each task's best depth and held-out accuracy too, so a run that learned nothing shows.

Run: .venv/bin/python bench/probes.py  [BENCH_PER_TASK=2000] [BENCH_TASKS=length,bigram_shift,...]
     [BENCH_THREADS=1] [BENCH_DEVICE=cpu] [--quick]
``--quick``: every task with 40 items instead of 2,000 (seconds; tests/test_bench_quick.py runs it).

Torch threads default to 1 on CPU (a shared 2-core machine: more threads than free cores spin-wait).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from core.base.paths import zoo_dir  # noqa: E402
from core.models.loading import ModelSpec, load  # noqa: E402
from core.represent import probe_tasks as PT  # noqa: E402
from core.represent import probes as P  # noqa: E402
from core.represent.token_vectors import num_depths  # noqa: E402

PER_TASK = int(os.environ.get("BENCH_PER_TASK", "2000"))
TASKS = tuple(t for t in os.environ.get("BENCH_TASKS", ",".join(PT.TASKS)).split(",") if t)
THREADS = int(os.environ.get("BENCH_THREADS", "1"))
DEVICE = os.environ.get("BENCH_DEVICE", "cpu")


def bare_forward(lm, sentences, max_length: int, batch_tokens: int = 8192) -> float:
    """Seconds for the encoder's forward over ``sentences`` (tokenized once, length-sorted, batches of about
    ``batch_tokens`` padded tokens, as core.represent.token_vectors batches them), keeping no hidden states."""
    enc = lm.tokenizer(list(sentences), truncation=True, max_length=max_length)
    order = sorted(range(len(sentences)), key=lambda i: len(enc["input_ids"][i]))
    t0 = time.perf_counter()
    i = 0
    with torch.inference_mode():
        while i < len(order):
            width = len(enc["input_ids"][order[min(len(order) - 1, i)]])
            take = max(1, batch_tokens // max(width, 1))
            rows = order[i : i + take]
            width = max(len(enc["input_ids"][r]) for r in rows)
            batch = lm.tokenizer.pad(
                {k: [enc[k][r] for r in rows] for k in enc.keys()},
                padding="max_length",
                max_length=width,
                return_tensors="pt",
            )
            lm.model(**{k: v.to(lm.device) for k, v in batch.items()})
            i += take
    return time.perf_counter() - t0


def main() -> None:
    global PER_TASK
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="40 items per task: seconds")
    if ap.parse_args().quick:
        PER_TASK = 40
    if DEVICE == "cpu":
        torch.set_num_threads(THREADS)
    lm = load(ModelSpec("bert", str(zoo_dir() / "bert-mini"), DEVICE), "base")
    cfg = P.ProbeConfig(tasks=TASKS, per_task=PER_TASK)
    pool = cfg.sentences()
    t = time.perf_counter()
    tasks = P.build_tasks(cfg, pool)
    build_s = time.perf_counter() - t
    depths = num_depths(lm)
    print(
        f"bert-mini, {depths} depths (embeddings included), {PER_TASK:,} items per task from {len(pool):,} "
        f"corpus sentences, device {DEVICE}, torch threads {torch.get_num_threads()}; tasks built in {build_s:.1f} s"
    )
    print(
        f"{'task':<24}{'items':>7}{'forward s':>11}{'vectors s':>11}{'probes s':>10}{'total/forward':>15}"
        f"   best depth (held-out acc, majority)"
    )
    tot_fwd = tot_vec = tot_fit = 0.0
    for task in tasks:
        fwd = bare_forward(lm, task.sentences, cfg.max_length)
        t = time.perf_counter()
        feats, keep = P.task_features(lm, task, cfg.max_length, None)
        vec = time.perf_counter() - t
        labels, held = task.labels[keep], task.heldout[keep]
        t = time.perf_counter()
        acc = P.fit_probes(feats, labels, held, cfg.reg)
        if task.control is not None:
            P.fit_probes(feats, task.control[keep], held, cfg.reg)
        fit = time.perf_counter() - t
        best = int(np.argmax(acc))
        tot_fwd, tot_vec, tot_fit = tot_fwd + fwd, tot_vec + vec, tot_fit + fit
        print(
            f"{PT.TASK_NAMES[task.name]:<24}{len(task):>7,}{fwd:>11.1f}{vec:>11.1f}{fit:>10.1f}"
            f"{(vec + fit) / fwd:>14.2f}x   {best} ({acc[best]:.3f}, {P.majority_rate(labels, held):.3f})"
        )
    print(
        f"{'all tasks':<24}{'':>7}{tot_fwd:>11.1f}{tot_vec:>11.1f}{tot_fit:>10.1f}"
        f"{(tot_vec + tot_fit) / tot_fwd:>14.2f}x"
    )
    print(
        f"\nProbe training for every depth, {len(tasks)} tasks x {PER_TASK:,} items: {build_s + tot_vec + tot_fit:.1f} s "
        f"in all ({tot_vec:.1f} s reading vectors, {tot_fit:.1f} s fitting probes), "
        f"{(build_s + tot_vec + tot_fit) / tot_fwd:.2f}x a bare forward over the same sentences."
    )


if __name__ == "__main__":
    main()

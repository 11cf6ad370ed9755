"""Pretraining step time: bf16 autocast on the CPU against fp32, through the real loop (core.train.pretrain.train).

    .venv/bin/python bench/pretrain.py [--steps 40] [--rounds 2] [--threads 2] [--family bert] [--quick]

Baseline: the same run at fp32. Each run continues the bundled mini of ``--family`` on the first 300 documents of
the corpus (batch 16 x 64 tokens, its recipe's pair head, static masking off), with no evaluation or checkpoint
in the timed steps; the median of the step times after the first 10 (warm-up) is the run's number. The precisions
alternate round by round, so load on a shared machine falls on both. bf16 only pays where the CPU has bf16
instructions (AVX512-BF16 or AMX: core.train.common.cpu_bf16_native, printed); `make models` uses it exactly there.
``--quick``: 1 round of 12 steps (the median then covers the last 2) of batch 4 x 32 tokens on 1 thread, on 40
documents (seconds;
tests/test_bench_quick.py runs it). The family defaults to the first one with a bundled mini (core.registry);
a family without one is refused with a message.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from core.base.paths import ASSETS  # noqa: E402
from core.registry import FAMILIES, bundled_families, family  # noqa: E402
from core.train.common import cpu_bf16_native  # noqa: E402
from core.train.pretrain.train import PretrainConfig, pretrain  # noqa: E402


def one_run(
    family: str, precision: str, steps: int, threads: int, documents: int = 300, batch: int = 16, max_len: int = 64
) -> float:
    folder = ASSETS / "models" / FAMILIES[family].bundled
    stamps: list[float] = []
    with tempfile.TemporaryDirectory() as out:
        cfg = PretrainConfig(
            family=family,
            out=out,
            init=str(folder),
            size="mini",
            steps=steps,
            batch_size=batch,
            max_len=max_len,
            lr=1e-4,
            masking="dynamic",
            eval_every=0,
            checkpoint_every=0,
            threads=threads,
            precision=precision,
            max_documents=documents,
            resume=False,
        )
        pretrain(cfg, on_step=lambda e: stamps.append(time.perf_counter()))
    gaps = [b - a for a, b in zip(stamps, stamps[1:])][9:]
    return statistics.median(gaps)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--family", default=bundled_families()[0].key, help="a family with a bundled mini")
    ap.add_argument("--quick", action="store_true", help="1 round of 12 steps on 40 documents: seconds")
    a = ap.parse_args()
    documents, batch, max_len = 300, 16, 64
    if a.quick:
        a.steps, a.rounds, a.threads, documents, batch, max_len = 12, 1, 1, 40, 4, 32
    if not family(a.family).bundled:
        print(
            f"bench/pretrain.py skipped: EncoderLab bundles no {family(a.family).label} model to continue "
            f"(families with one: {', '.join(f.key for f in bundled_families())})"
        )
        return 0
    print(
        f"CPU bf16 instructions: {cpu_bf16_native()}; {a.family} mini, batch {batch} x {max_len}, {a.threads} thread(s), "
        f"{a.steps} steps per run, {a.rounds} round(s)"
    )
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for r in range(a.rounds):
        for p in ("fp32", "bf16") if r % 2 == 0 else ("bf16", "fp32"):
            times[p].append(one_run(a.family, p, a.steps, a.threads, documents, batch, max_len))
            print(f"  round {r + 1} {p}: {times[p][-1] * 1000:.0f} ms/step", flush=True)
    fp32, bf16 = min(times["fp32"]), min(times["bf16"])
    print(
        f"step time, fastest round: fp32 {fp32 * 1000:.0f} ms, bf16 {bf16 * 1000:.0f} ms; "
        f"bf16 is {fp32 / bf16:.2f}x faster (baseline: fp32)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Walkthrough step 6's claim, measured: the pair of runs it starts (the articles' learning rate and ten times it,
core.walkthrough.checks.lr_pair_plan) over several seeds, with the held-out accuracy of each.

    python -m core.walkthrough.lr_measure --family distilbert --steps 30 --seeds 0,1,2

Recorded on CPU (DistilBERT-mini, WordNet glosses, batch 16, held-out 120 rows, majority 14.2%), mean of seeds 0-2:
30 steps (the step's default): lr 5e-5 16.1% (19.2, 14.2, 15.0), lr 5e-4 73.6% (70.0, 79.2, 71.7);
120 steps: lr 5e-5 70.0% (70.0, 73.3, 66.7), lr 5e-4 87.8% (85.8, 90.0, 87.5).
So on the bundled minis ten times the articles' rate wins, and the step teaches that (checks.lr_verdict "stuck").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from collections.abc import Sequence

from core.registry import bundled_families, bundled_id
from core.train.finetune import train
from core.walkthrough.checks import lr_pair_plan, lr_verdict


def measure(family: str, lr: float, steps: int, seeds: Sequence[int], device: str = "cpu") -> list[dict]:
    """One row per seed: both runs' held-out accuracy and the verdict the step would show."""
    plan = lr_pair_plan(family, bundled_id(family), lr, steps, device)
    rows = []
    for seed in seeds:
        reports = {}
        for kind, cfg in plan.runs:
            with tempfile.TemporaryDirectory() as out:
                reports[kind] = train(dataclasses.replace(cfg, seed=seed), plan.data, out)
        good, high = reports["good"], reports["high"]  # train raises rather than return None: both ran
        v = lr_verdict(good, high)
        rows.append(
            dict(
                seed=seed,
                good=round(good.accuracy, 3),
                high=round(high.accuracy, 3),
                majority=round(good.majority_rate, 3),
                jitter_good=round(v.jitter_good, 4),
                jitter_high=round(v.jitter_high, 4),
                verdict=v.kind,
            )
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--family",
        required=True,
        choices=[f.key for f in bundled_families()],
        help="a family with a bundled model (the recorded numbers above: distilbert)",
    )
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    for row in measure(args.family, args.lr, args.steps, [int(s) for s in args.seeds.split(",")], args.device):
        print(json.dumps(row))


if __name__ == "__main__":
    main()

"""The bundled minis against an earlier version of themselves (issue #16): the everyday-English probe and the
held-out metrics, measured the same way on both.

    .venv/bin/python bench/zoo.py [--baseline REV] [--only bert-mini ...]

Baseline: the bundled models at git revision REV (default: the last commit before the newest one that changed a
bundled model's weights), taken out with `git archive` into a temporary folder. Both versions go through
core.train.pretrain.zoo.measure: each model on its own tokenization, its held-out instances built with its own run's
settings and one fixed seed, the probe through Fill-mask. Prints each number for both and the ratio new / old;
the held-out split heldout.txt is the same file for both (the first three sources'), so "held-out must not fall"
reads off the ratio directly. The probe's reference (the offline MiniLM with a fresh MLM head) is printed too.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def default_baseline() -> str:
    """The commit before the newest change to a bundled model's weights."""
    out = subprocess.run(["git", "log", "-2", "--format=%H", "--", "assets/models/*/model.safetensors"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    if len(out) < 2:
        raise SystemExit("No earlier version of the bundled weights in this checkout's history: pass --baseline.")
    return out[0] + "~1"


def extract(rev: str, dest: Path) -> Path:
    raw = subprocess.run(["git", "archive", "--format=tar", rev, "assets/models"], cwd=ROOT, capture_output=True,
                         check=True).stdout
    with tarfile.open(fileobj=BytesIO(raw)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "assets" / "models"


def main() -> int:
    import torch

    from core.train.pretrain.zoo import RECIPES, measure, probe_reference

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default=None, help="git revision of the baseline models")
    ap.add_argument("--only", nargs="*", default=list(RECIPES), choices=list(RECIPES))
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    rev = a.baseline or default_baseline()
    ref = probe_reference()
    print(f"baseline: the bundled models at {rev}; new: assets/models in this checkout")
    print(f"probe reference: {ref['label']}: top-1 {ref['top1']:.1%}, top-5 {ref['top5']:.1%}")
    with tempfile.TemporaryDirectory() as tmp:
        old_root = extract(rev, Path(tmp))
        for name in a.only:
            family = RECIPES[name]["family"]
            t = time.perf_counter()
            rows = []
            for label, root in (("old", old_root), ("new", ROOT / "assets" / "models")):
                m = measure(root / name, family)
                h, e, p = m["heldout"], m["heldout_everyday"], m["probe"]
                rows.append({"probe top-1": p.top1, "probe top-5": p.topk, "held-out top-1": h["mlm_top1"],
                             "held-out top-5": h["mlm_top5"],
                             "everyday held-out top-5": e["mlm_top5"] if e else float("nan"),
                             **({"pair accuracy": h["pair_acc"], "pair majority": h["pair_majority"]}
                                if "pair_acc" in h else {})})
            print(f"\n{name} ({time.perf_counter() - t:.0f} s)")
            for k in rows[0]:
                o, n = rows[0][k], rows[1][k]
                ratio = f"{n / o:.2f}x" if o == o and o > 0 else "-"
                print(f"  {k:24s} old {o:7.1%}   new {n:7.1%}   new/old {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Speed of each family's base architecture on this device; prints DistilBERT/ALBERT speedups against BERT-base.

Usage: .venv/bin/python bench/speed.py [--seq-len 128 --batch 8 --repeats 5] [--quick]
``--quick``: the same timing (core.compare.speed, every family with a bundled mini and a base-size config) at
batch 1 x 16 tokens, 2 repeats (seconds; tests/test_bench_quick.py runs it). Other options pass through to
``python -m core.compare.speed``.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.compare.speed import main  # noqa: E402

QUICK = ["--seq-len", "16", "--batch", "1", "--repeats", "2"]

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=False)
    ap.add_argument("--quick", action="store_true", help="batch 1 x 16 tokens, 2 repeats: seconds")
    args, rest = ap.parse_known_args()
    main((QUICK if args.quick else []) + rest)

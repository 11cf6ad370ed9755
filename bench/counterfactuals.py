"""Counterfactuals by the masked LM against HotFlip, LIT's reference (one run, ratios against the named baseline).

Baseline: HotFlip (core.inspect.counterfactual with proposer "hotflip": each word swapped for the vocabulary entry
whose first-order effect on the answer's log probability, from the classifier's own gradient, is the most negative),
run through the same beam search, budget and word order as the MLM's proposals. Measured on the same sentences:
flips found within the budget, and fluency per flip (the pseudo-log-likelihood change against the original under
the same MLM, the family's bundled one, for both).

Classifier: the bundled bert-mini fine-tuned here on the bundled WordNet glosses (six topics, 3 epochs), then the
first held-out glosses it gets right, at most 16 words each. ``--quick``: a tiny random BERT fine-tuned for a few
steps and 2 sentences (seconds; tests/test_bench_quick.py runs it): the numbers mean nothing there, the run checks the
script.

Run: .venv/bin/python bench/counterfactuals.py  [--quick] [--sentences N] [--budget B] [BENCH_THREADS=n]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from core.data.datasets_local import load_bundled  # noqa: E402
from core.inspect.counterfactual import CounterfactualConfig, answer_probs, counterfactuals  # noqa: E402
from core.models.loading import ModelSpec, load  # noqa: E402
from core.models.tiny import make_tiny  # noqa: E402
from core.registry import bundled_id  # noqa: E402
from core.train.finetune import train  # noqa: E402
from core.train.finetune_config import FinetuneConfig  # noqa: E402

THREADS = int(os.environ.get("BENCH_THREADS", "2"))


def classifier(quick: bool, folder: Path):
    """A fine-tuned BERT classifier on the WordNet glosses, its data, and the MLM of its family."""
    data = load_bundled("wordnet")
    if quick:
        checkpoint = str(make_tiny("bert", folder / "tiny", seed=0))
        mlm = load(ModelSpec("bert", checkpoint, "cpu"), task="mlm")
        cfg = FinetuneConfig("bert", checkpoint, epochs=1, max_steps=4, batch_size=8, device="cpu")
    else:
        checkpoint = bundled_id("bert")
        mlm = load(ModelSpec("bert", checkpoint, "cpu"), task="mlm")
        cfg = FinetuneConfig("bert", checkpoint, epochs=3, lr=1e-4, batch_size=16, max_length=64, device="cpu")
    t0 = time.perf_counter()
    result = train(cfg, data, folder / "run")
    print(
        f"fine-tuned {checkpoint} on WordNet topics: held-out accuracy {result.accuracy:.1%} ({time.perf_counter() - t0:.0f} s)"
    )
    lm = load(ModelSpec("bert", result.model_dir, "cpu"), task="seqcls")
    return lm, data, mlm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tiny random BERT, a few steps, 2 sentences (seconds)")
    ap.add_argument("--sentences", type=int, default=30)
    ap.add_argument("--budget", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(THREADS)
    n = 2 if args.quick else args.sentences
    with tempfile.TemporaryDirectory() as tmp:
        lm, data, mlm = classifier(args.quick, Path(tmp))
        texts = [x for x in data.test.texts if len(x.split()) <= 16]
        labels = [y for x, y in zip(data.test.texts, data.test.labels) if len(x.split()) <= 16]
        probs = answer_probs(lm, "class", [(x,) for x in texts])
        right = [x for x, y, p in zip(texts, labels, probs) if int(p.argmax()) == y] if not args.quick else texts
        picked = right[:n]
        print(f"{len(picked)} held-out glosses (at most 16 words, classified right), budget {args.budget} edits")
        found: dict[str, list] = {"mlm": [], "hotflip": []}
        seconds = {"mlm": 0.0, "hotflip": 0.0}
        for text in picked:
            for proposer in found:
                cfg = CounterfactualConfig(target="class", text=text, budget=args.budget, proposer=proposer)
                r = counterfactuals(lm, cfg, mlm)
                seconds[proposer] += r.seconds
                flips = [c for c in r.found if c.flipped]
                found[proposer].append(flips[0] if flips else None)
    print("\nproposer             flips found   edits per flip   fluency per flip (ΔPLL)   s per sentence")
    for proposer, label in (("hotflip", "HotFlip (baseline)"), ("mlm", "masked LM (ours)")):
        flips = [c for c in found[proposer] if c is not None]
        edits = np.mean([len(c.edits) for c in flips]) if flips else math.nan
        fluency = np.mean([c.fluency_change for c in flips]) if flips else math.nan
        print(
            f"{label:<20} {len(flips):>3}/{len(picked):<8} {edits:>12.2f} {fluency:>22.2f} "
            f"{seconds[proposer] / max(len(picked), 1):>18.2f}"
        )
    ours = sum(c is not None for c in found["mlm"])
    base = sum(c is not None for c in found["hotflip"])
    print(f"flips found MLM/HotFlip = {ours / max(base, 1):.2f}x")
    both = [(a, b) for a, b in zip(found["mlm"], found["hotflip"]) if a is not None and b is not None]
    if both:
        gap = np.mean([a.fluency_change - b.fluency_change for a, b in both])
        print(f"on the {len(both)} sentences both flipped, the MLM's flip reads {gap:+.2f} PLL more fluently")
        for a, b in both[:3]:
            print(f"  MLM:     {a.texts[0]}")
            print(f"  HotFlip: {b.texts[0]}")


if __name__ == "__main__":
    main()

"""What faithfulness costs beside an attribution (one run, ratios against named baselines).

Baseline: the attribution run it sits beside (core.inspect.attribution.attribute with faithfulness off: Integrated
Gradients with 50 steps, Saliency, Input x Gradient and Occlusion, the page's default methods). Against it: the
faithfulness metrics of those four maps (core.inspect.faithfulness.measure: comprehensiveness and sufficiency at
1, 5, 10, 20 and 50%, each method's ranking reversed and 5 random rankings), which batch every ranking's rows of one
level into one forward. Second baseline: the same rows one forward each (what a loop over rows, as in a notebook,
costs). The issue's bound: at most one batched forward per level.

Model: bert-base-uncased's config with random weights (speed does not depend on the weights), a 32-token text with
one [MASK]. Also, not in --quick: the worked example on the bundled bert-mini ("The capital of France is [MASK].",
trained weights), its AOPCs per method against random and reversed.

``--planted``: only the issue's planted-trigger results (the classifier the tests train: faithfulness over 12 of its
sentences, and whether one MLM edit of the trigger flips each).

Run: .venv/bin/python bench/faithfulness.py  [--quick | --planted] [BENCH_DEVICE=cuda] [BENCH_THREADS=n]
``--quick``: a tiny random BERT (core.models.tiny) instead of bert-base size, and no bert-mini part (seconds;
tests/test_bench_quick.py runs it). Torch threads default to 1 on CPU (bench/fill_mask.py says why).
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

from core.inspect import faithfulness as F  # noqa: E402
from core.inspect.attribution import attribute  # noqa: E402
from core.inspect.attribution_inputs import AttributionConfig, prepare  # noqa: E402
from core.models.loading import ModelSpec, load  # noqa: E402
from core.models.tiny import random_mlm  # noqa: E402
from core.registry import bundled_id  # noqa: E402

DEVICE = os.environ.get("BENCH_DEVICE", "cpu")
THREADS = int(os.environ.get("BENCH_THREADS", "1"))
METHODS = ("lig", "saliency", "ixg", "occlusion")
TEXT = (
    "the old cat climbed the narrow stairs every evening to light the [MASK] lamp while the storm kept pounding the "
    "rocks below the tower until the pale dawn came again"
)


def rows_of(prep, f_scores: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Every distinct row ``measure`` runs for these maps (the same draw: seed 0), to run them one at a time."""
    fixed = prep.fixed
    cand = np.flatnonzero(~fixed)
    whole = np.ones(len(fixed), bool)
    rows = {whole.tobytes(): whole}
    for k in F.counts(F.LEVELS, len(cand)):
        for o in F.orderings(f_scores, cand, F.RANDOM_SEEDS, 0).values():
            for row in F.cut(fixed, o, k):
                rows.setdefault(row.tobytes(), row)
    return list(rows.values())


def timed(fn, repeats: int):
    """The fastest of ``repeats`` runs (after one untimed warm-up) and the last result."""
    out = fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def planted() -> None:
    """The issue's planted-trigger results: the classifier the tests train (tests/planted.py: PLANT decides class 1),
    faithfulness over 12 of its sentences, and one-edit counterfactuals by the bundled bert-mini's MLM."""
    from core.inspect.attribution import attribute_batch, read_batch_csv
    from core.inspect.counterfactual import CounterfactualConfig, counterfactuals
    from tests.planted import PLANT, planted_classifier, planted_sentences

    lm = planted_classifier()
    sentences = planted_sentences(12, seed=1)
    rows = read_batch_csv("text,class\n" + "".join(f"{s},1\n" for s in sentences))
    batch = attribute_batch(lm, rows, dict(target="class", methods=METHODS))
    r = F.rank_methods([x.faithfulness for x in batch.results if x is not None])
    print(f"planted trigger {PLANT!r}, {r.inputs} sentences of class 1: AOPC mean ± sd (random on the same inputs)")
    for m in r.methods:
        print(
            f"  {m.key:<10} comprehensiveness {m.comp:.3f} ± {m.comp_sd:.3f} (random {m.random_comp:.3f})"
            f"   sufficiency {m.suff:.3f} ± {m.suff_sd:.3f} (random {m.random_suff:.3f})"
        )
    print(f"  most comprehensive: {r.most_comprehensive}; most sufficient: {r.most_sufficient}")
    mlm = load(ModelSpec("bert", bundled_id("bert"), DEVICE), "mlm")
    flips = 0
    for s in sentences:
        c = counterfactuals(lm, CounterfactualConfig(text=s, budget=1), mlm)
        flips += bool(c.found) and c.found[0].flipped and c.found[0].edits[0].old == PLANT
    print(
        f"  one MLM edit replaces the trigger and flips the label: {flips}/{len(sentences)} = {flips / len(sentences):.2f}x"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tiny random BERT; no bert-mini part (seconds)")
    ap.add_argument("--planted", action="store_true", help="only the planted-trigger classifier's results")
    args = ap.parse_args()
    if DEVICE == "cpu":
        torch.set_num_threads(THREADS)
    if args.planted:
        planted()
        return
    lm = random_mlm("bert", "bert-base-uncased", args.quick, DEVICE)
    repeats = 1 if args.quick else 3
    cfg = AttributionConfig(target="mask", text=TEXT, methods=METHODS, faithfulness=False)
    t_attr, res = timed(lambda: attribute(lm, cfg), repeats)
    prep = prepare(lm, cfg)
    scores = {m.method: m.scores for m in res.methods}
    t_faith, f = timed(lambda: F.measure(lm, prep, scores), repeats)
    rows = rows_of(prep, scores)
    t_naive, _ = timed(lambda: [F.probabilities(lm, prep, [r], f.removal) for r in rows], repeats)
    print(f"bench/faithfulness.py on {DEVICE}, {torch.get_num_threads()} torch thread(s), {len(res.tokens)} tokens")
    print(f"model: {lm.spec.checkpoint}")
    print(f"  the attribution ({', '.join(METHODS)}; baseline): {t_attr:.3f} s")
    print(
        f"  faithfulness of its {len(METHODS)} maps: {t_faith:.3f} s, {f.rows} distinct rows in {f.forwards} batched "
        f"forwards for {len(F.LEVELS)} levels (tokens per level {f.ks})"
    )
    print(f"  faithfulness/attribution = {t_faith / t_attr:.2f}x")
    print(
        f"  the same {len(rows)} rows one forward each: {t_naive:.3f} s; one-by-one/batched = {t_naive / t_faith:.2f}x"
    )
    bound = "met" if f.forwards <= len(F.LEVELS) else "missed"
    print(f"  at most one batched forward per level: {f.forwards} <= {len(F.LEVELS)}: {bound}")
    if not args.quick:
        mini = load(ModelSpec("bert", bundled_id("bert"), DEVICE), "mlm")
        r = attribute(mini, AttributionConfig(target="mask", text="The capital of France is [MASK].", methods=METHODS))
        fm = r.faithfulness
        print(f"\n{bundled_id('bert')} (trained), 'The capital of France is [MASK].': p({r.target_label}) {fm.p_x:.3f}")
        print("  method                 comp   reversed  suff   reversed")
        for c in fm.methods:
            rev = fm.reversed_of(c.key)
            print(f"  {c.key:<20} {c.aopc_comp:7.3f} {rev.aopc_comp:8.3f} {c.aopc_suff:7.3f} {rev.aopc_suff:8.3f}")
        print(f"  {'random (5 seeds)':<20} {fm.random.aopc_comp:7.3f} {'':8} {fm.random.aopc_suff:7.3f}")


if __name__ == "__main__":
    main()

"""Head ablation and head importance, timed (ratios from one run, against named baselines on the same inputs).

(a) One ablated fill-mask recompute (core.inspect.ablation: the hooks on, some heads zeroed, the decoder tapped) against
    one normal fill-mask (core.predict.fill_mask.fill_mask_batch, so the batcher is not timed), bert-base-size random
    weights, a 32-token text. Target: <= 1.2x. Interleaved round by round, median kept.
(b) Gradient importance (one backward per batch, core.inspect.head_importance) over 64 held-out sentences against
    exhaustive single-head ablation over the same 64 (one masked-LM evaluation per head, plus the baseline).
    Exhaustive ablation of bert-base's 144 heads takes long on 2 cores, so it is timed on a fixed subset of heads
    (BENCH_SUBSET, default 8) and extrapolated to every head: the output says so. Also the bundled minis.
Run: .venv/bin/python bench/ablation.py  [--quick] [BENCH_DEVICE=cuda] [BENCH_THREADS=n] [BENCH_ROUNDS=n] [BENCH_SUBSET=n]
``--quick``: the same parts, small: a tiny random BERT (core.models.tiny) instead of bert-base size, 2 rounds,
8 sentences, 2 heads timed exhaustively (seconds; tests/test_bench_quick.py runs it). Families the registry has no
bundled model of are skipped, with a line saying so.

Torch threads default to 1 on CPU (see bench/fill_mask.py: more threads than free cores spin-wait).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from core.compare.speed import timed as bench_timed  # noqa: E402
from core.inspect import ablation as ab  # noqa: E402
from core.inspect import ablation_predict as abp  # noqa: E402
from core.inspect import head_importance as hi  # noqa: E402
from core.models.loading import LoadedModel, ModelSpec, load  # noqa: E402
from core.models.tiny import random_mlm  # noqa: E402
from core.predict.fill_mask import FillMaskConfig, fill_mask_batch  # noqa: E402
from core.registry import FAMILIES, bundled_id  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
DEVICE = os.environ.get("BENCH_DEVICE", "cpu")
DEVICE_TYPE = torch.device(DEVICE).type
THREADS = int(os.environ.get("BENCH_THREADS", "1"))
SUBSET = int(os.environ.get("BENCH_SUBSET", "8"))
TEXT = (
    "The old lighthouse keeper climbed the narrow stairs every evening to light the [MASK] lamp, "
    "while the storm kept pounding the rocks below the tower all night until dawn"
)


def build_base(quick: bool = False) -> LoadedModel:
    """bert-base-uncased's config with random weights; ``quick``: the family's tiny config (same tokenizer)."""
    return random_mlm("bert", "bert-base-uncased", quick, DEVICE)


def timed(fn) -> float:
    return bench_timed(fn, DEVICE)


def recompute(lm: LoadedModel) -> None:
    cfg = FillMaskConfig(TEXT)
    n = len(lm.tokenizer(TEXT)["input_ids"])
    lay = ab.layout(lm.model)
    spec = "L2H6, L4*, L8H1, L11H0" if (lay.n_layers, lay.n_heads) == (12, 12) else "L0H0, L1*"  # tiny: 2 layers
    heads = ab.AblationConfig(ab.parse_heads(spec, lay.n_layers, lay.n_heads))
    dec = lm.model.get_output_embeddings()

    def normal():
        fill_mask_batch(lm, [cfg])

    def ablated_recompute():  # what ablate_fill_mask runs for its "after" half
        tap: list = []
        abp.fill_ablated(lm, cfg, heads, None, dec, lambda m, a: tap.append(a[0][:1]) if not tap else None)
        with torch.inference_mode():
            torch.nn.functional.linear(tap[0], dec.weight, dec.bias).softmax(-1)

    def whole():  # before + after, as the page calls it
        abp.ablate_fill_mask(lm, cfg, heads)

    for f in (normal, ablated_recompute, whole):  # warm-up (packing, hook install)
        f()
    t = {"normal": [], "ablated": [], "whole": []}
    for _ in range(ROUNDS):
        t["normal"].append(timed(normal))
        t["ablated"].append(timed(ablated_recompute))
        t["whole"].append(timed(whole))
    m = {k: statistics.median(v) for k, v in t.items()}
    print(
        f"(a) fill-mask, {lm.spec.checkpoint}, {n} tokens, {len(heads.heads)} heads zeroed, median of {ROUNDS} rounds"
    )
    print(f"    baseline: one normal fill-mask (fill_mask_batch)        {m['normal'] * 1000:8.1f} ms  1.00x")
    print(
        f"    one ablated recompute (hooks + decoder tap)             {m['ablated'] * 1000:8.1f} ms  "
        f"{m['ablated'] / m['normal']:.2f}x  (target <= 1.2x)"
    )
    print(
        f"    ablate_fill_mask (normal + ablated, what a page calls)  {m['whole'] * 1000:8.1f} ms  "
        f"{m['whole'] / m['normal']:.2f}x"
    )


def importance(lm, label: str, n_texts: int = 64) -> None:
    texts = ab.default_texts(n_texts)
    lay = ab.layout(lm.model)
    n_heads = lay.n_layers * lay.n_heads
    r = hi.head_importance(lm, texts, exhaustive=False, pruning=False)  # warm-up
    r = hi.head_importance(lm, texts, exhaustive=False, pruning=False)
    chunks = hi._mlm_chunks(lm, texts)
    flat = [(la, h) for la in range(lay.n_layers) for h in range(lay.n_heads)]
    subset = flat[:: max(1, n_heads // SUBSET)][:SUBSET]
    t0 = time.perf_counter()
    hi._mlm_eval(lm, chunks)  # the baseline loss exhaustive ablation subtracts
    for head in subset:
        with ab.ablated(lm, ab.AblationConfig((head,))):
            hi._mlm_eval(lm, chunks)
    per_eval = (time.perf_counter() - t0) / (len(subset) + 1)
    exhaustive = per_eval * (n_heads + 1)
    note = "" if len(subset) == n_heads else f", extrapolated from {len(subset)} heads + baseline"
    print(f"(b) {label}: {n_heads} heads, {len(texts)} held-out sentences")
    print(f"    baseline: exhaustive single-head ablation  {exhaustive:8.2f} s  ({per_eval:.3f} s per head{note})")
    print(
        f"    gradient importance (one backward/batch)   {r.seconds_gradient:8.2f} s  "
        f"speed-up {exhaustive / r.seconds_gradient:.1f}x  (expected > 50x for 144 heads)"
    )


def main() -> None:
    global ROUNDS, SUBSET
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tiny BERT, 2 rounds, 8 sentences, 2 heads: seconds")
    args = ap.parse_args()
    n_texts = 64
    if args.quick:
        ROUNDS, SUBSET, n_texts = 2, 2, 8
    if DEVICE_TYPE == "cpu":
        torch.set_num_threads(THREADS)
    print(f"device {DEVICE}, torch threads {torch.get_num_threads()}{' (--quick)' if args.quick else ''}")
    base = build_base(args.quick)
    recompute(base)
    importance(base, f"{'tiny BERT' if args.quick else 'bert-base-size'}, random weights", n_texts)
    for fam in FAMILIES.values():
        if not fam.bundled:
            print(f"(b) {fam.label}: skipped, EncoderLab bundles no {fam.label} model (assets/models)")
            continue
        importance(load(ModelSpec(fam.key, bundled_id(fam.key), DEVICE), "mlm"), bundled_id(fam.key), n_texts)


if __name__ == "__main__":
    main()

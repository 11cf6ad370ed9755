"""Activation patching against attribution patching, timed (one run, the ratio against a named baseline).

Baseline: exact activation patching (core.inspect.patching.patch) of every site: the residual stream per (depth,
position), each head over all positions and per position, each MLP over all positions and per position, one
patched forward row per site, ROWS_PER_FORWARD rows a forward. Against it: attribution patching of the same sites in
the same call (two forwards and one backward). Target: attribution patching >= 20x faster.

Model: bert-base-uncased's config with random weights (no pretrained bert-base here; speed does not depend on the
weights), a 32-token clean text with one [MASK] and a corrupted one with one word swapped. Also, not in --quick: the
issue's worked example on the bundled bert-mini ("The capital of France is [MASK]." against Italy, answers paris and
rome), where the correlation of the two methods means something (trained weights).

Run: .venv/bin/python bench/patching.py  [--quick] [BENCH_DEVICE=cuda] [BENCH_THREADS=n]
``--quick``: a tiny random BERT (core.models.tiny) instead of bert-base size, and no bert-mini part (seconds;
tests/test_bench_quick.py runs it). Torch threads default to 1 on CPU (bench/fill_mask.py says why).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from core.inspect.patching import PatchConfig, PatchResult, patch  # noqa: E402
from core.models.loading import LoadedModel, ModelSpec, load  # noqa: E402
from core.models.tiny import random_mlm  # noqa: E402
from core.registry import bundled_id  # noqa: E402

DEVICE = os.environ.get("BENCH_DEVICE", "cpu")
THREADS = int(os.environ.get("BENCH_THREADS", "1"))
TARGET = 20.0
# 32 tokens with [CLS] and [SEP] under bert-base-uncased's WordPiece; "cat" and "dog" are one piece each
CLEAN = (
    "the old cat climbed the narrow stairs every evening to light the [MASK] lamp while the storm kept pounding the "
    "rocks below the tower until the pale dawn came again"
)
CORRUPTED = CLEAN.replace("old cat", "old dog")


def build_base(quick: bool) -> LoadedModel:
    """bert-base-uncased's config with random weights; ``quick``: the family's tiny config (same tokenizer)."""
    return random_mlm("bert", "bert-base-uncased", quick, DEVICE)


def report(title: str, r: PatchResult) -> None:
    print(f"\n{title}: {len(r.tokens)} tokens, answers {r.answers[0]!r} vs {r.answers[1]!r}")
    print(f"  exact patching (baseline): {r.exact_seconds:.2f} s for {r.rows} patched forward rows")
    print(f"  attribution patching:      {r.attribution_seconds:.3f} s (2 forwards, 1 backward)")
    verdict = "met" if r.speed_ratio >= TARGET else "missed"
    print(f"  exact/attribution = {r.speed_ratio:.1f}x (target >= {TARGET:.0f}x: {verdict})")
    corr = ", ".join(f"{k} {r.correlation(k):+.3f}" for k in r.exact)
    print(f"  correlation of attribution with exact: all per-position sites {r.correlation():+.3f}; {corr}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tiny random BERT; no bert-mini part (seconds)")
    args = ap.parse_args()
    if DEVICE == "cpu":
        torch.set_num_threads(THREADS)
    lm = build_base(args.quick)
    n = len(lm.tokenizer(CLEAN.replace("[MASK]", lm.tokenizer.mask_token))["input_ids"])
    print(f"bench/patching.py on {DEVICE}, {torch.get_num_threads()} torch thread(s), {n}-token inputs")
    report(lm.spec.checkpoint, patch(lm, PatchConfig(CLEAN, CORRUPTED)))
    if not args.quick:
        mini = load(ModelSpec("bert", bundled_id("bert"), DEVICE), "mlm")
        cfg = PatchConfig(
            "The capital of France is [MASK].",
            "The capital of Italy is [MASK].",
            clean_answer="paris",
            corrupted_answer="rome",
        )
        r = patch(mini, cfg)
        report(f"{bundled_id('bert')} (trained): the worked example", r)
        best = max(range(r.n_layers * mini.model.config.num_attention_heads), key=lambda i: r.exact["heads"].flat[i])
        layer, head = divmod(best, mini.model.config.num_attention_heads)
        print(
            f"  the head that restores most: L{layer}H{head}, {r.exact['heads'][layer, head]:.2f} of the clean metric"
        )


if __name__ == "__main__":
    main()

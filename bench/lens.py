"""Layer lens cost: the lens at every depth against one fill-mask, and the tuned lens's KL table.

1. bert-base size (random weights of the official config), one text of 32 tokens with one [MASK]: core.inspect.lens.lens
   (all 13 depths, top-5 each) against core.predict.fill_mask.fill_mask_batch (called directly, so the batcher's window is
   not in the timing), interleaved round by round, medians. Target: lens / fill-mask <= 1.3x. A third line, the
   plain way (transformers' forward with output_hidden_states=True, then the MLM head once per depth), shows what
   the single batched head call and the shared kernels save.
2. The same ratio on the four bundled minis (real weights).
3. bert-mini: a tuned lens trained here (BENCH_TUNE_STEPS steps, default 300), its training time, and the KL to the
   last layer per depth on held-out text (assets/corpus/heldout.txt), raw against tuned.

Run: .venv/bin/python bench/lens.py  [--quick] [BENCH_DEVICE=cuda] [BENCH_THREADS=n] [BENCH_ROUNDS=n] [BENCH_TUNE_STEPS=n]
``--quick``: the same three parts, small: a tiny random BERT (core.models.tiny) instead of bert-base size, 2 rounds,
a tuned lens of 3 steps on 16 held-out sentences (seconds; tests/test_bench_quick.py runs it). Families the registry
has no bundled model of are skipped in part 2, with a line saying so.
Torch threads default to 1 on CPU (see bench/fill_mask.py for why).
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
from core.inspect.lens import LensConfig, lens  # noqa: E402
from core.inspect.tuned_lens import TuneConfig, tune
from core.models.loading import LoadedModel, ModelSpec, load  # noqa: E402
from core.models.tiny import random_mlm  # noqa: E402
from core.predict.fill_mask import FillMaskConfig, examples, fill_mask_batch, mlm_head  # noqa: E402
from core.registry import FAMILIES, bundled_families, bundled_id  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "15"))
DEVICE = os.environ.get("BENCH_DEVICE", "cpu")
DEVICE_TYPE = torch.device(DEVICE).type
THREADS = int(os.environ.get("BENCH_THREADS", "1"))
TUNE_STEPS = int(os.environ.get("BENCH_TUNE_STEPS", "300"))
TOKENS = 32
TOP_K = 5


def timed(fn) -> float:
    return bench_timed(fn, DEVICE)


def base_model(quick: bool = False) -> LoadedModel:
    """bert-base-uncased's config with random weights; ``quick``: the family's tiny config (same tokenizer)."""
    return random_mlm("bert", "bert-base-uncased", quick, DEVICE)


def text_of(lm: LoadedModel, n: int = TOKENS) -> str:
    """An example sentence with one [MASK], extended with more example text to ``n`` tokens (specials included)."""
    first = next(s for s in examples("en") if s.count("[MASK]") == 1)
    more = " ".join(s.replace("[MASK]", "word") for s in examples("en")[1:]).split()
    words = first.split()
    while len(lm.tokenizer(" ".join(words).replace("[MASK]", lm.tokenizer.mask_token))["input_ids"]) < n:
        words.append(more.pop(0))
    while len(lm.tokenizer(" ".join(words).replace("[MASK]", lm.tokenizer.mask_token))["input_ids"]) > n:
        words.pop()
    return " ".join(words)


def plain_lens(lm: LoadedModel, text: str):
    """The lens the obvious way: transformers' forward with every hidden state, the MLM head once per depth."""
    tok = lm.tokenizer
    enc = tok(text.replace("[MASK]", tok.mask_token), return_tensors="pt").to(DEVICE)
    pos = int((enc["input_ids"][0] == tok.mask_token_id).nonzero()[0, 0])
    head = mlm_head(lm.model)
    with torch.inference_mode():
        hs = lm.model.base_model(**enc, output_hidden_states=True).hidden_states
        return [torch.topk(head(h[0, pos][None]).softmax(-1), TOP_K) for h in hs]


def ratio(lm: LoadedModel, label: str, with_plain: bool = False) -> float:
    text = text_of(lm)
    n_tok = len(lm.tokenizer(text.replace("[MASK]", lm.tokenizer.mask_token))["input_ids"])
    fcfg, lcfg = FillMaskConfig(text, top_k=TOP_K), LensConfig(text, top_k=TOP_K)
    methods = {"fill-mask": lambda: fill_mask_batch(lm, [fcfg]), "lens": lambda: lens(lm, lcfg)}
    if with_plain:
        methods["plain lens"] = lambda: plain_lens(lm, text)
    for f in methods.values():  # warm up (packs the linears once)
        f()
        f()
    res, ref = lens(lm, lcfg), fill_mask_batch(lm, [fcfg])[0]
    assert [c.token_id for c in res.masks[0].rows[-1]] == [c.token_id for c in ref.masks[0].candidates]
    times: dict[str, list[float]] = {m: [] for m in methods}
    for _ in range(ROUNDS):
        for name, f in methods.items():
            times[name].append(timed(f))
    med = {m: statistics.median(ts) for m, ts in times.items()}
    r = statistics.median(a / b for a, b in zip(times["lens"], times["fill-mask"]))  # per-round ratios
    print(
        f"{label}: {n_tok} tokens, {res.depths} depths; fill-mask {med['fill-mask'] * 1000:.1f} ms, lens "
        f"{med['lens'] * 1000:.1f} ms -> lens / fill-mask = {r:.2f}x (target <= 1.3x)"
    )
    if with_plain:
        print(
            f"  the plain way (output_hidden_states + the head once per depth): {med['plain lens'] * 1000:.1f} ms "
            f"= {med['plain lens'] / med['fill-mask']:.2f}x fill-mask, {med['plain lens'] / med['lens']:.2f}x the lens"
        )
    return r


def kl_table(quick: bool = False) -> None:
    fam = bundled_families()[0].key  # bert-mini: the first family with a bundled model
    lm = load(ModelSpec(fam, bundled_id(fam), DEVICE_TYPE), task="mlm")
    cfg = TuneConfig(steps=TUNE_STEPS, heldout_sentences=16) if quick else TuneConfig(steps=TUNE_STEPS)
    t0 = time.perf_counter()
    _, rep = tune(lm, cfg, save=False)
    total = time.perf_counter() - t0
    print(
        f"tuned lens for {lm.spec.checkpoint}: {rep.steps} steps x {cfg.batch_size} sentences, training "
        f"{rep.seconds:.1f} s ({rep.seconds / max(1, rep.steps) * 1000:.0f} ms/step), with the held-out measurement "
        f"{total:.1f} s; train KL {rep.loss_first:.3f} -> {rep.loss_last:.3f} nats"
    )
    print(
        f"held-out KL(last layer || lens) per depth, nats, over {rep.heldout_positions} masked positions "
        f"({cfg.heldout_sentences} sentences):"
    )
    print(f"  {'depth':>12s} {'raw':>8s} {'tuned':>8s} {'tuned/raw':>10s}")
    for d, (a, b) in enumerate(zip(rep.kl_raw, rep.kl_tuned)):
        name = "embeddings" if d == 0 else f"layer {d}"
        print(f"  {name:>12s} {a:8.3f} {b:8.3f} {b / a if a > 0 else float('nan'):10.2f}")
    lower = all(b < a for a, b in zip(rep.kl_raw[:-1], rep.kl_tuned[:-1]))
    print(f"  tuned lower than raw at every intermediate depth: {lower}")


def main() -> None:
    global ROUNDS, TUNE_STEPS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny models, 2 rounds, 3 tuning steps: seconds")
    args = ap.parse_args()
    if args.quick:
        ROUNDS, TUNE_STEPS = 2, 3
    if DEVICE_TYPE == "cpu":
        torch.set_num_threads(THREADS)
    print(
        f"torch {torch.__version__}, device {DEVICE}"
        f"{'' if DEVICE_TYPE != 'cpu' else f' ({torch.get_num_threads()} threads)'}; top_k={TOP_K}, {ROUNDS} rounds"
    )
    ratio(
        base_model(args.quick),
        f"{'tiny BERT' if args.quick else 'bert-base-uncased'} config, random weights",
        with_plain=True,
    )
    for fam in FAMILIES.values():
        if not fam.bundled:
            print(f"{fam.label}: skipped, EncoderLab bundles no {fam.label} model (assets/models)")
            continue
        ratio(load(ModelSpec(fam.key, bundled_id(fam.key), DEVICE_TYPE), task="mlm"), bundled_id(fam.key))
    kl_table(args.quick)


if __name__ == "__main__":
    main()

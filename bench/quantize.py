"""int8 dynamic quantization against fp32: the third article's "ALBERT + quantization" advice, measured.

    .venv/bin/python bench/quantize.py [--batch 8] [--seq-len 128] [--rounds 3] [--threads 1,2] [--skip-minis] [--quick]

Part 1, timing and size: each family's base-size architecture (the official configs in assets/configs, random
weights: latency and size do not depend on the values), with its MLM head, fp32 against a dynamically quantized
int8 copy (core.models.int8.quantize_int8), on the CPU with 1 thread and with 2. The encoder forward at batch x length
(the Speed page's defaults), fp32 and int8 interleaved round by round, median per model. Baseline: the same
model in fp32 (the int8/fp32 ratios), and BERT-base fp32 for the cross-family lines.
Part 2, accuracy: the bundled minis (real weights), core.compare.int8.compare_models: top-1 fill-mask agreement with
fp32 on the probe (the bundled fill-mask examples + 64 held-out corpus sentences with one word masked each) and
both models' held-out top-1/top-5.
The families are the registry's with a bundled mini and a base-size config (core.registry); part 2 skips a family
without a bundled mini, with a line saying so.
``--quick``: part 1 on each family's tiny config (core.models.tiny) at batch 2 x 16, 1 round, 1 thread; part 2 on
the first bundled mini only (seconds; tests/test_bench_quick.py runs it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import transformers  # noqa: E402

from core.compare.int8 import QuantConfig, compare_models, time_encoder  # noqa: E402
from core.compare.speed import ARTICLE_FAMILIES  # noqa: E402
from core.models.int8 import disk_bytes, memory_bytes, quantize_int8  # noqa: E402
from core.models.loading import ModelSpec, load  # noqa: E402
from core.models.tiny import tiny_config  # noqa: E402
from core.registry import FAMILIES as REG  # noqa: E402
from core.registry import bundled_id, official_config

FAMILIES = ARTICLE_FAMILIES  # bert, roberta, albert, distilbert (not the bundled XLM-R: in no article's comparison)


def build_base(family: str, quick: bool = False):
    """The family's base-size config with random weights; ``quick``: its tiny config (core.models.tiny)."""
    cfg = official_config(REG[family].base_checkpoint)
    if quick:
        cfg = tiny_config(family, cfg.vocab_size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = getattr(transformers, REG[family].classes["mlm"])(cfg)
    return model.eval()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--skip-minis", action="store_true")
    ap.add_argument("--quick", action="store_true", help="tiny configs, batch 2 x 16, 1 round, 1 thread: seconds")
    args = ap.parse_args()
    if args.quick:
        args.batch, args.seq_len, args.rounds, args.threads = 2, 16, 1, "1"

    transformers.logging.set_verbosity_error()
    fams = [f for f in args.families.split(",") if f]
    mb = lambda b: b / 2**20  # noqa: E731
    print(
        f"# int8 vs fp32 · {'tiny' if args.quick else 'base-size'} configs, random weights · batch {args.batch} x {args.seq_len} tokens · "
        f"median of {args.rounds} interleaved rounds · CPU ({os.cpu_count()} cores here)"
    )
    built = {}
    for fam in fams:
        fp = build_base(fam, args.quick)
        q = quantize_int8(fp)
        built[fam] = (fp, q)
        print(
            f"{REG[fam].base_checkpoint:<26} params {sum(p.numel() for p in fp.parameters()) / 1e6:6.1f}M · disk "
            f"fp32 {mb(disk_bytes(fp)):7.1f} MB int8 {mb(disk_bytes(q)):7.1f} MB ({disk_bytes(q) / disk_bytes(fp):.2f}x)"
            f" · memory fp32 {mb(memory_bytes(fp)):7.1f} MB int8 {mb(memory_bytes(q)):7.1f} MB "
            f"({memory_bytes(q) / memory_bytes(fp):.2f}x)",
            flush=True,
        )
    lat: dict[tuple[str, str, int], float] = {}
    for threads in [int(x) for x in args.threads.split(",") if x]:
        torch.set_num_threads(threads)
        models = [m for fam in fams for m in built[fam]]
        vocab = min(int(built[f][0].config.vocab_size) for f in fams)
        times = time_encoder(models[0], vocab, args.batch, args.seq_len, args.rounds, models[1:])
        for i, fam in enumerate(fams):
            for j, kind in enumerate(("fp32", "int8")):
                lat[(fam, kind, threads)] = statistics.median(times[2 * i + j]) * 1000
        print(f"\n[{threads} thread{'s' if threads > 1 else ''}] encoder latency, ms per batch (median)")
        for fam in fams:
            f32, i8 = lat[(fam, "fp32", threads)], lat[(fam, "int8", threads)]
            print(
                f"  {REG[fam].label:<11} fp32 {f32:8.1f}  int8 {i8:8.1f}  int8 speedup {f32 / i8:5.2f}x (baseline: "
                f"the same model in fp32)",
                flush=True,
            )
        if "bert" in fams:
            base = lat[("bert", "fp32", threads)]
            for fam in fams:
                print(
                    f"  {REG[fam].label:<11} int8 vs BERT-base fp32: {base / lat[(fam, 'int8', threads)]:5.2f}x as fast"
                )

    if "albert" in fams and "bert" in fams:
        a_fp, a_q = built["albert"]
        b_fp, b_q = built["bert"]
        print("\n# the article: ALBERT with quantization 'often brings unexpectedly good cost-effectiveness'")
        for threads in sorted({k[2] for k in lat}):
            print(
                f"  [{threads}t] ALBERT-base int8: {mb(memory_bytes(a_q)):.1f} MB, "
                f"{lat[('albert', 'int8', threads)]:.0f} ms · BERT-base int8: {mb(memory_bytes(b_q)):.1f} MB, "
                f"{lat[('bert', 'int8', threads)]:.0f} ms · ALBERT int8 is {memory_bytes(b_fp) / memory_bytes(a_q):.1f}x "
                f"smaller than BERT-base fp32 and {lat[('bert', 'fp32', threads)] / lat[('albert', 'int8', threads)]:.2f}x "
                "as fast"
                + (
                    f"; DistilBERT int8: {mb(memory_bytes(built['distilbert'][1])):.1f} MB, "
                    f"{lat[('distilbert', 'int8', threads)]:.0f} ms"
                    if "distilbert" in fams
                    else ""
                )
            )

    if args.skip_minis:
        return
    print("\n# bundled minis (real weights): int8 vs fp32 on the fill-mask probe (examples + 64 held-out words)")
    torch.set_num_threads(1)
    for fam in fams[:1] if args.quick else fams:
        if not REG[fam].bundled:
            print(f"  {REG[fam].label}: skipped, EncoderLab bundles no {REG[fam].label} model (assets/models)")
            continue
        spec = ModelSpec(fam, bundled_id(fam), "cpu")
        fp, q = load(spec, "mlm"), load(ModelSpec(fam, bundled_id(fam), "cpu", "int8"), "mlm")
        r = compare_models(fp, q, QuantConfig(seq_len=args.seq_len, batch=args.batch, repeats=args.rounds))
        print(
            f"  {bundled_id(fam):<26} top-1 agreement {r.agreement:5.1%} (examples {r.agree_examples:.0%} of "
            f"{r.n_examples}, held-out {r.agree_heldout:.0%} of {r.n_heldout}) · held-out top-1 fp32 "
            f"{r.fp32.heldout_top1:.1%} int8 {r.int8.heldout_top1:.1%} · top-5 fp32 {r.fp32.heldout_top5:.1%} int8 "
            f"{r.int8.heldout_top5:.1%} · disk {r.disk_ratio:.2f}x · latency {r.speedup:.2f}x faster (1 thread)",
            flush=True,
        )


if __name__ == "__main__":
    main()

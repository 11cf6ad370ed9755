"""Fill-mask latency and batching on a bert-base-size model (random weights of the official config).

Baselines, from one run on the same inputs: transformers' pipeline("fill-mask") (which projects every token onto
the vocabulary), and a bare encoder forward on pre-tokenized input (a full forward, without tokenizing or any
head). Ours comes in under that: its last layer runs only at the masks (core/models/masked_forward.py), the vocabulary
projection only there too, and on CPU its linears use oneDNN-packed weights (core/models/packed_linear.py). A fourth line,
ours with the default linears, shows how much of the gain is the kernels and how much the skipped work.
Methods are interleaved round by round and the median per sentence is kept, so background load hits every method
alike.
Run: .venv/bin/python bench/fill_mask.py  [--quick] [BENCH_DEVICE=cuda] [BENCH_THREADS=n] [BENCH_ROUNDS=n]
``--quick``: the same comparisons on a tiny random BERT (core.models.tiny), 3 sentences, 1 round, a batch of 8
instead of 64 (seconds; tests/test_bench_quick.py runs it).

Torch threads default to 1 on CPU: on a shared 2-core machine more threads than free cores makes every method
spin-wait (10x slower here) and buries the ratios in noise; all methods run with the same setting.
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

from core.compare.speed import timed as bench_timed  # noqa: E402
from core.models import packed_linear  # noqa: E402
from core.models.loading import LoadedModel  # noqa: E402
from core.models.tiny import random_mlm  # noqa: E402
from core.predict.fill_mask import FillMaskConfig, examples, fill_mask, fill_mask_batch  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
DEVICE = os.environ.get("BENCH_DEVICE", "cpu")
DEVICE_TYPE = torch.device(DEVICE).type  # "cuda" for cuda:0 too: it decides the threads and the synchronize
THREADS = int(os.environ.get("BENCH_THREADS", "1"))
TOP_K = 5


def build(quick: bool = False) -> LoadedModel:
    """bert-base-uncased's config with random weights; ``quick``: the family's tiny config (same tokenizer)."""
    if DEVICE_TYPE == "cpu":
        torch.set_num_threads(THREADS)
    return random_mlm("bert", "bert-base-uncased", quick, DEVICE)


def timed(fn) -> float:
    return bench_timed(fn, DEVICE)


def unpacked(fn):
    """``fn`` with packed linears switched off: the default kernels that transformers uses."""

    def run(*a):
        with packed_linear.off():
            return fn(*a)

    return run


def latency(lm: LoadedModel, pipe, sentences: list[str], label: str) -> float:
    """ours / pipeline / bare encoder on ``sentences``, interleaved; prints the ratios, returns the pipeline's
    median seconds per text."""
    model, tok = lm.model, lm.tokenizer
    pre = [tok(s, return_tensors="pt").to(DEVICE) for s in sentences]
    cfgs = [FillMaskConfig(s, top_k=TOP_K) for s in sentences]
    print(
        f"{label}: {len(sentences)} texts ({min(len(p['input_ids'][0]) for p in pre)}-"
        f"{max(len(p['input_ids'][0]) for p in pre)} tokens), one [MASK] each"
    )

    def encoder(i: int) -> None:
        with torch.inference_mode():
            model.bert(**pre[i])

    methods = {
        "ours": lambda i: fill_mask(lm, cfgs[i]),
        "pipeline": lambda i: pipe(sentences[i]),
        "encoder": encoder,
        "ours, default linears": unpacked(lambda i: fill_mask(lm, cfgs[i])),
    }
    for i in range(len(sentences)):  # warm up every path once
        for f in methods.values():
            f(i)
    # a sanity check that the comparison is apples to apples: same top-5 as the pipeline
    ours0, theirs0 = fill_mask(lm, cfgs[0]).masks[0].candidates, pipe(sentences[0])
    assert [c.token_id for c in ours0] == [d["token"] for d in theirs0], "top-k differs from the pipeline"
    times: dict[str, list[list[float]]] = {m: [[] for _ in sentences] for m in methods}
    for _ in range(ROUNDS):
        for i in range(len(sentences)):
            for name, f in methods.items():
                times[name][i].append(timed(lambda f=f, i=i: f(i)))
    med = {m: sum(statistics.median(t) for t in ts) / len(ts) for m, ts in times.items()}
    for m in methods:
        print(f"  {m:22s} {med[m] * 1000:8.2f} ms / text (median per text, mean over texts)")
    print(f"  fill-mask latency: ours/pipeline = {med['ours'] / med['pipeline']:.2f}x (target <= 0.75x)")
    print(f"  fill-mask latency: ours/bare encoder forward = {med['ours'] / med['encoder']:.2f}x (target <= 1.1x)")
    if packed_linear.available():
        print(
            f"  (ours with the default linears: {med['ours, default linears'] / med['pipeline']:.2f}x the "
            f"pipeline, {med['ours, default linears'] / med['encoder']:.2f}x the encoder)"
        )
    return med["pipeline"]


def main() -> None:
    global ROUNDS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tiny BERT, 3 sentences, 1 round, a batch of 8: seconds")
    args = ap.parse_args()
    if args.quick:
        ROUNDS = 1
    n_batch = 8 if args.quick else 64
    lm = build(args.quick)
    model = lm.model
    sentences = [s for s in examples("en") if s.count("[MASK]") == 1][: 3 if args.quick else None]
    pipe = transformers.pipeline(
        "fill-mask", model=model, tokenizer=lm.tokenizer, device=torch.device(DEVICE), top_k=TOP_K
    )
    print(
        f"model: {lm.spec.checkpoint}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M "
        f"params; torch {torch.__version__}, device {DEVICE}"
        f"{'' if DEVICE_TYPE != 'cpu' else f' ({torch.get_num_threads()} threads)'}; top_k={TOP_K}, {ROUNDS} rounds"
    )
    pipe_one = latency(lm, pipe, sentences, "the example sentences (the target)")
    # The same sentences, each followed by four unmasked ones: a paragraph-length input, where the forward is
    # bound by arithmetic rather than by reading the weights, shows the other regime.
    plain = [s.replace("[MASK]", "word") for s in sentences]
    paragraphs = [" ".join([s] + [plain[(i + j) % len(plain)] for j in range(1, 5)]) for i, s in enumerate(sentences)]
    latency(lm, pipe, paragraphs, "paragraphs (context only)")

    batch = [FillMaskConfig(sentences[i % len(sentences)], top_k=TOP_K) for i in range(n_batch)]
    fill_mask_batch(lm, batch[:8])
    one, many = [], []
    for _ in range(ROUNDS):  # interleaved, and the ratio taken per round: load that comes and goes hits both
        one.append(timed(lambda: [fill_mask(lm, c) for c in batch]))
        many.append(timed(lambda: fill_mask_batch(lm, batch)))
    ratio = statistics.median(a / b for a, b in zip(one, many))
    print(
        f"batch of {n_batch} (the example sentences, repeated): ours one at a time "
        f"{n_batch / statistics.median(one):.1f} sentences/s; ours batched {n_batch / statistics.median(many):.1f} "
        f"sentences/s; the pipeline one at a time {1 / pipe_one:.1f} sentences/s (from the latency runs above)"
    )
    print(
        f"  throughput: batch of {n_batch} / ours one at a time = {ratio:.2f}x (target >= 3x; median of {ROUNDS} "
        f"per-round ratios)"
    )
    print(
        f"  throughput: batch of {n_batch} / the pipeline one at a time = "
        f"{pipe_one / (statistics.median(many) / n_batch):.2f}x"
    )
    # Why batching buys little on a CPU once one sentence is fast: the arithmetic rate each achieves
    # (2 x tokens x encoder weights, an estimate that ignores attention scores and the skipped last-layer work).
    tokens = sum(len(lm.tokenizer(c.text)["input_ids"]) for c in batch)
    weights = sum(p.numel() for n, p in model.bert.encoder.named_parameters() if n.endswith("weight"))
    gflop = 2 * tokens * weights / 1e9
    print(
        f"  arithmetic rate: batched {gflop / statistics.median(many):.0f} GFLOP/s, one at a time "
        f"{gflop / statistics.median(one):.0f} GFLOP/s ({gflop:.0f} GFLOP for the {n_batch}); the limit here: "
        f"{peak_gflops():.0f} GFLOP/s for one large matrix product (2048 x 768 by 768 x 3072)"
    )


def peak_gflops() -> float:
    """The best rate of one large fp32 matrix product with the faster of the two kernels: the machine's limit."""
    x, w, b = (t.to(DEVICE) for t in (torch.randn(2048, 768), torch.randn(3072, 768), torch.zeros(3072)))
    with torch.inference_mode():
        fns = [lambda: torch.nn.functional.linear(x, w, b)]
        if packed_linear.available() and DEVICE_TYPE == "cpu":
            p = torch.ops.mkldnn._reorder_linear_weight(w)
            fns.append(lambda: torch.ops.mkldnn._linear_pointwise(x, p, b, "none", [], ""))
        best = min(timed(f) for f in fns for _ in range(5))
    return 2 * 2048 * 768 * 3072 / best / 1e9


if __name__ == "__main__":
    main()

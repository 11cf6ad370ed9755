"""Integrated Gradients (on the embeddings) cost against its floor, on a bert-base-size classifier and a 32-token input.

Model: random weights of the official bert-base-uncased config (BertForSequenceClassification, 2 labels) with the
real bert-base-uncased tokenizer; the explained score is the logit of class 1. n_steps = 50.
- floor:  ONE batched forward+backward over the 50 interpolated word-embedding inputs (what IG cannot do without);
- ours:   core.inspect.attribution.attribute(..., methods=("lig",), n_steps=50, internal_batch_size=50): everything the page
          runs (tokenize, the f(x)/f(baseline) forwards, the 50-step integral and the convergence delta);
- captum: captum's LayerIntegratedGradients on the word-embedding layer with internal_batch_size=1 (50 separate
          forward+backward passes), on the same input and [PAD] baseline.
floor and ours are interleaved round by round (alternating which goes first) and the median is kept, so background
load hits both alike; the captum run (50 sequential passes) runs once, in the first round. One torch thread by
default (BENCH_THREADS): every side gets the same, and on a shared 2-core machine multi-thread timings swing more
than the differences measured here.
Run: .venv/bin/python bench/attribution.py  [--quick] [BENCH_DEVICE=cuda] [BENCH_ROUNDS=n] [BENCH_THREADS=n]
``--quick``: the same three on a tiny random BERT classifier (core.models.tiny), 1 round (seconds;
tests/test_bench_quick.py runs it).
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
import transformers  # noqa: E402
from captum.attr import LayerIntegratedGradients  # noqa: E402

from core.inspect.attribution import attribute  # noqa: E402
from core.inspect.attribution_inputs import AttributionConfig, prepare  # noqa: E402
from core.models.loading import LoadedModel, ModelSpec  # noqa: E402
from core.models.tiny import tiny_config  # noqa: E402
from core.models.tokenizer_build import bert_uncased_tokenizer  # noqa: E402
from core.registry import official_config  # noqa: E402

N_STEPS = 50
WORDS = "the cat sat on the mat and then it slept for a long time in the warm sun".split()  # one WordPiece each


def build(device: str, quick: bool = False) -> LoadedModel:
    """bert-base-uncased's config with random weights; ``quick``: the family's tiny config (same tokenizer)."""
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    tok = bert_uncased_tokenizer()
    cfg = tiny_config("bert", len(tok), tok) if quick else official_config("bert-base-uncased")
    cfg.num_labels = 2
    model = transformers.BertForSequenceClassification(cfg).eval().to(device)
    name = "tiny BERT" if quick else "bert-base-uncased"
    return LoadedModel(
        model=model,
        tokenizer=tok,
        spec=ModelSpec("bert", f"{name} (random weights)", "cpu"),
        task="seqcls",
        source="random init",
        path="",
        device=device,
    )


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tiny BERT classifier, 1 round: seconds")
    args = ap.parse_args()
    device = os.environ.get("BENCH_DEVICE", "cpu")
    rounds = 1 if args.quick else int(os.environ.get("BENCH_ROUNDS", "3"))
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))
    lm = build(device, args.quick)
    text = " ".join(WORDS[i % len(WORDS)] for i in range(30))  # 30 words + [CLS] [SEP] = 32 tokens
    cfg = AttributionConfig(
        target="class",
        text=text,
        class_index=1,
        methods=("lig",),
        n_steps=N_STEPS,
        internal_batch_size=N_STEPS,
        baseline="pad",
        faithfulness=False,  # the captum comparison times the attribution alone (bench/faithfulness.py times that)
    )
    prep = prepare(lm, cfg)
    seq = prep.ids.shape[1]
    assert seq == 32, seq
    model = lm.model

    def floor() -> None:
        alphas = torch.linspace(0, 1, N_STEPS, device=device).view(-1, 1, 1)
        x = (prep.base + alphas * (prep.embeds - prep.base)).detach().requires_grad_()  # (50, 32, 768)
        out = model(inputs_embeds=x, **{k: v.expand(N_STEPS, -1) for k, v in prep.extra.items()}).logits[:, 1]
        torch.autograd.grad(out.sum(), x)

    def ours() -> None:
        attribute(lm, cfg)

    def captum_ibs1() -> None:
        base_ids = prep.ids.clone()
        base_ids[0, torch.as_tensor(~prep.special, device=prep.ids.device)] = lm.tokenizer.pad_token_id
        extra = prep.extra

        def f(ids):
            return model(input_ids=ids, **{k: v.expand(ids.shape[0], -1) for k, v in extra.items()}).logits[:, 1]

        lig = LayerIntegratedGradients(f, model.bert.embeddings.word_embeddings)
        lig.attribute(
            prep.ids, baselines=base_ids, n_steps=N_STEPS, internal_batch_size=1, return_convergence_delta=True
        )

    def timed(fn) -> float:
        sync(device)
        t = time.perf_counter()
        fn()
        sync(device)
        return time.perf_counter() - t

    floor(), ours()  # warm-up (allocator, first-call imports)
    times: dict[str, list[float]] = {"floor": [], "ours": [], "captum": []}
    for r in range(rounds):
        for name in ("floor", "ours") if r % 2 == 0 else ("ours", "floor"):
            times[name].append(timed(floor if name == "floor" else ours))
        if r == 0:  # 50 sequential passes: slow on a CPU, so once
            times["captum"].append(timed(captum_ibs1))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"device={device} threads={torch.get_num_threads()} model={lm.spec.checkpoint} "
        f"seq={seq} n_steps={N_STEPS} rounds={rounds} (captum: 1 run)"
    )
    for k, v in times.items():
        print(f"  {k:<7} median {med[k]:.3f}s  runs: " + ", ".join(f"{t:.3f}" for t in v))
    print(
        f"ours/floor (one batched fwd+bwd over {N_STEPS} inputs) = {med['ours'] / med['floor']:.2f}x  (target <= 1.30x)"
    )
    print(f"ours/captum LayerIG internal_batch_size=1 = {med['ours'] / med['captum']:.2f}x")


if __name__ == "__main__":
    main()

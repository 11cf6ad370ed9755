"""Ours against ONNX Runtime on the same model and inputs: fill-mask (1 text; 32 x 128 tokens), NSP pair scoring and
a fine-tuned classifier's prediction, at 1 and 2 threads.

    .venv/bin/python bench/engines.py [--threads 1,2] [--rounds 7] [--quick]

The model: bert-base-uncased's config with random weights (seed 0), saved as a BertForPreTraining folder (fill-mask
loads its MLM head, pair scoring its NSP head, both through core.models.loading.load, the app's own path) and as a
fine-tuned classifier folder (the same encoder, a random 3-class head, the run metadata
core.predict.classify.load_finetuned reads). ONNX Runtime runs graphs exported from the same loaded torch modules
with the dynamo exporter (``torch.onnx.export(..., dynamo=True)``: the TorchScript exporter gives wrong outputs for
transformers 5's BERT), its default session options (all graph optimisations), one session per thread count.

Both sides do the whole job from text: tokenize with the same fast tokenizer, forward, softmax, top-k. Ours is what
the pages call (``fill_mask``, ``fill_mask_batch``, ``score_pairs_now``, ``classify_now``); ONNX Runtime's is the
plain use of an exported model (the model's full logits, then the softmax at the masks). Parity, every case at every
thread count: top-k ids identical and probabilities within 1e-4 of ONNX Runtime's, and ours has the eager transformers
model's top-k (which every inspect view uses). Rounds are interleaved (A B A B ...) and the median kept.

Techniques, each measured alone on the 1-text fill-mask at the first thread count: the packed oneDNN linears (ours
with them off); the head and last layer at the masks only (the same trick exported into ONNX Runtime, "ORT masked",
against its full graph); SDPA against eager attention (transformers' forward, full logits); the engines alone (torch
eager against ONNX Runtime on a bare encoder forward).

Roofline: each case's useful FLOPs (the encoder over every real token, attention scores, the head where it is read)
over its time, as a fraction of this CPU's matrix-multiply peak at the same thread count (the best of torch's kernels
on 512 x 768 x 3072 fp32, measured in this run).

``--quick``: a tiny BERT, 1 thread, 2 rounds, 8 x 32 instead of 32 x 128, no technique rows (seconds;
tests/test_bench_quick.py runs it). The machine may be shared: read the ratios, not the milliseconds.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from core.compare.speed import timed  # noqa: E402
from core.models import packed_linear  # noqa: E402
from core.models.loading import ModelSpec, load  # noqa: E402
from core.models.masked_forward import head_parts, masked_hidden  # noqa: E402
from core.models.tiny import tiny_config  # noqa: E402
from core.models.tokenizer_build import bert_uncased_tokenizer  # noqa: E402
from core.predict.classify import META_FILE, classify_now, load_finetuned  # noqa: E402
from core.predict.fill_mask import FillMaskConfig, fill_mask, fill_mask_batch  # noqa: E402
from core.predict.sentence_pair import score_pairs_now  # noqa: E402
from core.registry import official_config  # noqa: E402
from core.runtime.serving.batcher import compute_thread  # noqa: E402

TOL = 1e-4
SETTLE_S = 0.2  # the pause before each method's turn (interleaved)
LABELS = ("negative", "neutral", "positive")
TOP_K = 5
SHORT = "The capital of France is [MASK], a city on the river Seine."
PAIRS = [
    ("The cat sat on the mat.", "It was very comfortable there."),
    ("She opened the window.", "Fresh air filled the room at once."),
    ("Stocks fell sharply on Monday.", "The river froze early that winter."),
    ("He studied all night.", "He passed the exam the next morning."),
] * 2
TEXTS = [
    "This medicine worked well for my headaches.",
    "Terrible side effects, I stopped after a week.",
    "No change at all after a month.",
    "My doctor suggested it and it helped a lot.",
    "I felt dizzy every morning.",
    "Works fine, a bit expensive.",
    "Would not take it again.",
    "Great results, no problems so far.",
]


# ---------------------------------------------------------------------------------------------- models and inputs
def build(root: Path, quick: bool) -> tuple[Path, Path]:
    """(pretraining folder, fine-tuned classifier folder): bert-base-uncased's config, random weights, seed 0."""
    import transformers

    transformers.utils.logging.disable_progress_bar()
    tok = bert_uncased_tokenizer()
    cfg = tiny_config("bert", len(tok), tok) if quick else official_config("bert-base-uncased")
    torch.manual_seed(0)
    pre = transformers.BertForPreTraining(cfg).eval()
    pre.save_pretrained(str(root / "pre"))
    tok.save_pretrained(str(root / "pre"))
    clf = transformers.BertForSequenceClassification(
        cfg.__class__(**{**cfg.to_dict(), "id2label": dict(enumerate(LABELS))})
    )
    clf.bert.load_state_dict(pre.bert.state_dict())  # the same encoder (and pooler), a random 3-class head
    clf.save_pretrained(str(root / "clf"))
    tok.save_pretrained(str(root / "clf"))
    meta = {
        "config": {"family": "bert", "pooling": "cls", "max_length": 128, "task": "sequence"},
        "label_names": list(LABELS),
    }
    (root / "clf" / META_FILE).write_text(json.dumps(meta))
    return root / "pre", root / "clf"


def long_texts(tok, n: int, tokens: int) -> list[str]:
    """``n`` different texts of exactly ``tokens`` pieces with [CLS] and [SEP], one [MASK] each, at different places."""
    lines = (ROOT / "assets/examples/en.txt").read_text(encoding="utf-8").splitlines()
    pool = " ".join(ln.strip() for ln in lines if ln.strip()).replace("[MASK]", "").split()
    out = []
    for i in range(n):
        words = pool[i * 7 :] + pool[: i * 7]
        at = 3 + (i * 13) % max(1, tokens // 2)  # the mask's word
        kept: list[str] = []
        for w in words:
            trial = kept + [w]
            text = " ".join("[MASK]" if j == at else x for j, x in enumerate(trial))
            n_tok = len(tok(text.replace("[MASK]", tok.mask_token))["input_ids"])
            if n_tok <= tokens:
                kept = trial
            if n_tok == tokens and len(kept) > at:
                break
        out.append(" ".join("[MASK]" if j == at else x for j, x in enumerate(kept)))
        assert len(tok(out[-1].replace("[MASK]", tok.mask_token))["input_ids"]) == tokens, out[-1]
    return out


# ---------------------------------------------------------------------------------------------- ONNX Runtime
class _Out(torch.nn.Module):
    """A model's forward with plain tensor inputs and one named output, for the exporter."""

    def __init__(self, model: torch.nn.Module, out: str):
        super().__init__()
        self.model, self.out = model, out

    def forward(self, ids, attn, types):
        return getattr(self.model(input_ids=ids, attention_mask=attn, token_type_ids=types), self.out)


class _Masked(torch.nn.Module):
    """Our fill-mask forward (core.models.masked_forward, plain linears) as a graph: MLM logits at (rows, cols)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids, attn, rows, cols):
        h = masked_hidden(self.model, ids, attn, rows, cols, packed=False)
        dense, act, norm, decoder = head_parts(self.model)
        return F.linear(norm(act(F.linear(h, dense.weight, dense.bias))), decoder.weight, decoder.bias)


def export(module: torch.nn.Module, args: tuple, names: list[str], path: Path) -> Path:
    """The dynamo exporter with dynamic batch and length (and mask count for _Masked)."""
    batch, seq, masks = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=2, max=512), None
    dims: list[dict] = [{0: batch, 1: seq}, {0: batch, 1: seq}]
    if names[2] == "rows":
        masks = torch.export.Dim("masks", min=1, max=1024)
        dims += [{0: masks}, {0: masks}]
    else:
        dims.append({0: batch, 1: seq})
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module.eval(),
            args,
            str(path),
            input_names=names,
            output_names=["out"],
            dynamo=True,
            dynamic_shapes=tuple(dims),
            external_data=True,
            verbose=False,
        )
    return path


def session(path: Path, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def topk(p: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    idx = np.argpartition(-p, k, axis=-1)[..., :k]
    order = np.argsort(-np.take_along_axis(p, idx, -1), -1)
    idx = np.take_along_axis(idx, order, -1)
    return idx, np.take_along_axis(p, idx, -1)


def np_inputs(enc) -> dict:
    return {"ids": enc["input_ids"], "attn": enc["attention_mask"], "types": enc["token_type_ids"]}


# ---------------------------------------------------------------------------------------------- the cases
class Case:
    """One comparison: ours and ONNX Runtime's runs (each returns its answer), a parity check, the useful FLOPs."""

    def __init__(self, name: str, ours: Callable, ort: Callable, parity: Callable, flops: float, unit: int):
        self.name, self.ours, self.ort, self.parity, self.flops, self.unit = name, ours, ort, parity, flops, unit


def fill_parity(tok, eager):
    """(ours' results, ORT's (ids, probs)) -> Δp; raises when the top-k differs from ORT's or from the eager model."""

    def check(results, theirs) -> float:
        ids, probs = theirs
        texts = [r.model_text for r in results]
        enc = tok(texts, padding=True, return_tensors="pt")
        with torch.inference_mode():
            logits = eager(**enc).logits
        r, c = (enc["input_ids"] == tok.mask_token_id).nonzero(as_tuple=True)
        eager_ids = logits[r, c].softmax(-1).topk(TOP_K).indices.tolist()
        worst = 0.0
        for i, res in enumerate(results):
            got = [x.token_id for x in res.masks[0].candidates]
            assert got == ids[i].tolist(), f"top-{TOP_K} differs from ONNX Runtime's: {got} vs {ids[i].tolist()}"
            assert got == eager_ids[i], f"top-{TOP_K} differs from the eager model's: {got} vs {eager_ids[i]}"
            worst = max(worst, float(np.abs(np.array([x.prob for x in res.masks[0].candidates]) - probs[i]).max()))
        return worst

    return check


def ort_fill(sess, tok, texts: list[str]):
    def run():
        enc = tok([t.replace("[MASK]", tok.mask_token) for t in texts], padding=True, return_tensors="np")
        logits = sess.run(None, np_inputs(enc))[0]
        r, c = np.nonzero(enc["input_ids"] == tok.mask_token_id)
        return topk(softmax(logits[r, c]), TOP_K)

    return run


def useful_flops(model, tokens: list[int], head_rows: int, head_params: int) -> float:
    """2 x tokens x encoder linear weights, attention scores and mixing (4 x T^2 x H per layer), the head's rows."""
    cfg = model.config
    enc = sum(m.weight.numel() for m in model.base_model.encoder.modules() if isinstance(m, torch.nn.Linear))
    attn = sum(4 * t * t * cfg.hidden_size * cfg.num_hidden_layers for t in tokens)
    return 2.0 * sum(tokens) * enc + attn + 2.0 * head_rows * head_params


def cases(dirs: tuple[Path, Path], out: Path, threads: int, quick: bool, shared: dict) -> list[Case]:
    """The four cases at ``threads``; models, inputs and exported graphs are made once (``shared``)."""
    if not shared:
        spec = ModelSpec("bert", str(dirs[0]), "cpu")
        mlm, pre, fm = load(spec, "mlm"), load(spec, "pretraining"), load_finetuned(dirs[1], "cpu")
        tok = mlm.tokenizer
        long = long_texts(tok, 8 if quick else 32, 32 if quick else 128)
        sample = tok([SHORT.replace("[MASK]", tok.mask_token)] * 2, return_tensors="pt")  # batch 2: not specialised
        args = (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"])
        names = ["ids", "attn", "types"]
        shared.update(
            sample=args,
            mlm=mlm,
            pre=pre,
            fm=fm,
            tok=tok,
            long=long,
            graphs=dict(
                fill=export(_Out(mlm.model, "logits"), args, names, out / "fill.onnx"),
                nsp=export(_Out(pre.model, "seq_relationship_logits"), args, names, out / "nsp.onnx"),
                clf=export(_Out(fm.model, "logits"), args, names, out / "clf.onnx"),
            ),
        )
    s = shared
    mlm, pre, fm, tok = s["mlm"], s["pre"], s["fm"], s["tok"]
    g = {k: session(p, threads) for k, p in s["graphs"].items()}
    V, H = mlm.model.config.vocab_size, mlm.model.config.hidden_size
    head = H * H + H * V
    short_cfg, long_cfgs = FillMaskConfig(SHORT, top_k=TOP_K), [FillMaskConfig(t, top_k=TOP_K) for t in s["long"]]
    n_short = len(tok(SHORT.replace("[MASK]", tok.mask_token))["input_ids"])
    n_long = len(tok(s["long"][0].replace("[MASK]", tok.mask_token))["input_ids"])
    pair_tokens = [len(x) for x in tok([a for a, _ in PAIRS], [b for _, b in PAIRS])["input_ids"]]
    text_tokens = [len(x) for x in tok(TEXTS)["input_ids"]]

    def prob_parity(ours_p, theirs_p) -> float:
        a, b = np.asarray(ours_p), np.asarray(theirs_p)
        assert (a.argmax(-1) == b.argmax(-1)).all() if a.ndim > 1 else True, "argmax differs from ONNX Runtime's"
        return float(np.abs(a - b).max())

    def ort_pairs():
        enc = tok([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True, return_tensors="np")
        return softmax(g["nsp"].run(None, np_inputs(enc))[0])[:, 0]

    def ort_clf():
        return softmax(g["clf"].run(None, np_inputs(tok(TEXTS, padding=True, return_tensors="np")))[0])

    fill_check = fill_parity(tok, mlm.model)
    return [
        Case(
            f"fill-mask, 1 text ({n_short} tokens)",
            lambda: [fill_mask(mlm, short_cfg)],
            ort_fill(g["fill"], tok, [SHORT]),
            fill_check,
            useful_flops(mlm.model, [n_short], 1, head),
            1,
        ),
        Case(
            f"fill-mask, {len(long_cfgs)} x {n_long} tokens",
            lambda: list(fill_mask_batch(mlm, long_cfgs)),
            ort_fill(g["fill"], tok, s["long"]),
            fill_check,
            useful_flops(mlm.model, [n_long] * len(long_cfgs), len(long_cfgs), head),
            len(long_cfgs),
        ),
        Case(
            f"NSP, {len(PAIRS)} pairs",
            lambda: score_pairs_now(pre, PAIRS)[0],
            ort_pairs,
            prob_parity,
            useful_flops(pre.model, pair_tokens, len(PAIRS), H * H + 2 * H),
            len(PAIRS),
        ),
        Case(
            f"classifier, {len(TEXTS)} texts",
            lambda: classify_now(fm, TEXTS),
            ort_clf,
            prob_parity,
            useful_flops(fm.model, text_tokens, len(TEXTS), H * H + 3 * H),
            len(TEXTS),
        ),
    ]


# ---------------------------------------------------------------------------------------------- timing
def interleaved(fns: dict[str, Callable], rounds: int, device: str = "cpu") -> dict[str, float]:
    """Median seconds per method, the methods taking turns every round (load that comes and goes hits all).

    Before each timed call: a pause, then an untimed call of the same method. Both engines' thread pools spin-wait
    after their work (torch's OpenMP, ONNX Runtime's intra-op pool, for longer than one of our calls), and on 2 cores
    the spinning of the method before would be charged to the one after: at 2 threads, fill-mask at batch 1 measured
    1.71x ONNX Runtime's time called back to back, 1.30x with an untimed call between, 1.06x with the pause too
    (ONNX Runtime with its spinning switched off: 1.00x). A user runs one engine, not both in turn."""
    for f in fns.values():  # warm-up: packs, first-run allocations, ORT's arena
        f()
        f()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            time.sleep(SETTLE_S)
            f()
            times[k].append(timed(f, device))
    return {k: statistics.median(v) for k, v in times.items()}


def peak_gflops() -> float:
    """The best fp32 rate of a 512 x 768 by 768 x 3072 product at torch's thread count: its default and packed
    kernels. (Not numpy's BLAS: its own thread pool ignores torch's setting. Measured on this 2-core machine: 113
    GFLOP/s on 1 thread, 215 on 2; an earlier estimate of 210 on "1 thread" was numpy on both cores.)"""
    x, w = torch.randn(512, 768), torch.randn(3072, 768)
    fns = [lambda: F.linear(x, w)]
    if packed_linear.available():
        p = torch.ops.mkldnn._reorder_linear_weight(w)
        fns.append(lambda: torch.ops.mkldnn._linear_pointwise(x, p, None, "none", [], ""))
    with torch.inference_mode():
        best = min(min(timed(f) for _ in range(5)) for f in fns)
    return 2 * 512 * 768 * 3072 / best / 1e9


def verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def run_threads(dirs, out: Path, threads: int, rounds: int, quick: bool, shared: dict) -> dict[str, float]:
    torch.set_num_threads(threads)
    peak = peak_gflops()
    cs = cases(dirs, out, threads, quick, shared)
    print(f"\n## {threads} thread{'s' if threads > 1 else ''} (matrix-multiply peak here: {peak:.0f} GFLOP/s)\n")
    print("| case | ours | ONNX Runtime | ours/ORT (time) | roofline ours | roofline ORT | parity (max Δp) |")
    print("|---|---|---|---|---|---|---|")
    ratios = {}
    for c in cs:
        dp = c.parity(c.ours(), c.ort())
        assert dp <= TOL, f"{c.name}: probabilities differ from ONNX Runtime's by {dp:.1e} (> {TOL})"
        t = interleaved({"ours": c.ours, "ort": c.ort}, rounds)
        ratios[c.name] = t["ours"] / t["ort"]
        print(
            f"| {c.name} | {t['ours'] * 1000:.1f} ms | {t['ort'] * 1000:.1f} ms | {ratios[c.name]:.2f}x | "
            f"{c.flops / t['ours'] / 1e9 / peak:.2f} | {c.flops / t['ort'] / 1e9 / peak:.2f} | "
            f"top-k identical, {dp:.1e} |",
            flush=True,
        )
    one, many = ratios[cs[0].name], ratios[cs[1].name]
    print(
        f"\nfill-mask latency at batch 1, {threads} thread(s): ours/ORT = {one:.2f}x "
        f"(target <= 0.75x: {verdict(one <= 0.75)})"
    )
    print(
        f"fill-mask throughput at {cs[1].name.split(', ')[1]}, {threads} thread(s): ours/ORT = {1 / many:.2f}x "
        f"(texts per second; target >= 1.0x: {verdict(many <= 1.0)})"
    )
    return ratios


def techniques(dirs, out: Path, threads: int, rounds: int, shared: dict) -> None:
    """Each technique alone, on the 1-text fill-mask, at ``threads``."""
    torch.set_num_threads(threads)
    mlm, tok = shared["mlm"], shared["tok"]
    cfg = FillMaskConfig(SHORT, top_k=TOP_K)
    spec = ModelSpec("bert", str(dirs[0]), "cpu")
    eager_attn = load(spec, "mlm", attentions=True).model
    enc = tok([SHORT.replace("[MASK]", tok.mask_token)], return_tensors="pt")
    pos = int((enc["input_ids"][0] == tok.mask_token_id).nonzero()[0, 0])
    ids, attn, types = shared["sample"]  # the export sample of cases(): SHORT twice
    two = (ids, attn, torch.tensor([0, 1]), torch.tensor([pos, pos]))
    masked = session(export(_Masked(mlm.model), two, ["ids", "attn", "rows", "cols"], out / "masked.onnx"), threads)
    bare = _Out(mlm.model.base_model, "last_hidden_state")
    encoder = session(export(bare, shared["sample"], ["ids", "attn", "types"], out / "encoder.onnx"), threads)
    full = session(shared["graphs"]["fill"], threads)
    npi = np_inputs({k: v.numpy() for k, v in enc.items()})

    def transformers_fill(model):
        def run():
            e = tok([SHORT.replace("[MASK]", tok.mask_token)], return_tensors="pt")
            with torch.inference_mode():
                return model(**e).logits[0, pos].softmax(-1).topk(TOP_K)

        return run

    def unpacked():
        with packed_linear.off():
            return fill_mask(mlm, cfg)

    def ort_masked():
        e = tok([SHORT.replace("[MASK]", tok.mask_token)], return_tensors="np")
        r, c = np.nonzero(e["input_ids"] == tok.mask_token_id)
        feed = {
            "ids": e["input_ids"],
            "attn": e["attention_mask"],
            "rows": r.astype(np.int64),
            "cols": c.astype(np.int64),
        }
        return topk(softmax(masked.run(None, feed)[0]), TOP_K)

    def torch_encoder():
        with torch.inference_mode():
            return mlm.model.base_model(**enc)

    def pairs_unpacked():
        with packed_linear.off():
            return score_pairs_now(shared["pre"], PAIRS)

    t = interleaved(
        {
            "ours": lambda: fill_mask(mlm, cfg),
            "ours, default linears": unpacked,
            "transformers, sdpa": transformers_fill(mlm.model),
            "transformers, eager attention": transformers_fill(eager_attn),
            "ORT full": ort_fill(full, tok, [SHORT]),
            "ORT masked": ort_masked,
            "torch encoder": torch_encoder,
            "ORT encoder": lambda: encoder.run(None, npi),
            "NSP": lambda: score_pairs_now(shared["pre"], PAIRS),
            "NSP, default linears": pairs_unpacked,
        },
        rounds,
    )
    assert ort_masked()[0].tolist() == ort_fill(full, tok, [SHORT])()[0].tolist(), "ORT masked differs from ORT full"
    print(f"\n## Each technique alone (fill-mask, 1 text, unless named; {threads} thread(s))\n")
    print("| technique | with | without | speed-up |")
    print("|---|---|---|---|")
    rows = [
        ("packed oneDNN linears (ours)", "ours", "ours, default linears"),
        (
            "last layer and head at the masks only (torch, default linears)",
            "ours, default linears",
            "transformers, sdpa",
        ),
        ("last layer and head at the masks only (inside ONNX Runtime)", "ORT masked", "ORT full"),
        ("SDPA attention (transformers forward)", "transformers, sdpa", "transformers, eager attention"),
        ("the engine: ONNX Runtime against torch eager (bare encoder)", "ORT encoder", "torch encoder"),
        (f"packed linears in the whole transformers forward (NSP, {len(PAIRS)} pairs)", "NSP", "NSP, default linears"),
    ]
    for label, a, b in rows:
        print(f"| {label} | {t[a] * 1000:.1f} ms | {t[b] * 1000:.1f} ms | {t[b] / t[a]:.2f}x |")


def on_gpu(dirs: tuple[Path, Path], device: str, rounds: int, quick: bool) -> None:
    """The fill-mask cases on a GPU: ours in fp32 against ours in bf16 (SDPA attention, the model loaded in bf16),
    and ONNX Runtime's CUDA provider where it is installed (onnxruntime-gpu; scripts/gpu_check.sh's device has
    none: its wheel is larger than what travels there). bf16 is compared by top-1 agreement and the largest gap in
    the top-1 probability, not held to 1e-4."""
    spec = ModelSpec("bert", str(dirs[0]), device)
    fp32, bf16 = load(spec, "mlm"), load(spec, "mlm", dtype="bfloat16")
    tok = fp32.tokenizer
    try:
        import onnxruntime

        cuda_ort = "CUDAExecutionProvider" in onnxruntime.get_available_providers()
    except ImportError:
        cuda_ort = False
    print(
        f"\n## {device}: ours fp32 against ours bf16 (SDPA){'' if cuda_ort else '; ONNX Runtime: no CUDA provider here'}\n"
    )
    print("| case | fp32 | bf16 | fp32/bf16 (time) | top-1 agreement | largest top-1 probability gap |")
    print("|---|---|---|---|---|---|")
    long = long_texts(tok, 8 if quick else 32, 32 if quick else 128)
    n_long = len(tok(long[0].replace("[MASK]", tok.mask_token))["input_ids"])
    for name, texts in (("fill-mask, 1 text", [SHORT]), (f"fill-mask, {len(long)} x {n_long} tokens", long)):
        cfgs = [FillMaskConfig(t, top_k=TOP_K) for t in texts]
        a, b = fill_mask_batch(fp32, cfgs), fill_mask_batch(bf16, cfgs)
        same = sum(x.masks[0].candidates[0].token_id == y.masks[0].candidates[0].token_id for x, y in zip(a, b))
        gap = max(abs(x.masks[0].candidates[0].prob - y.masks[0].candidates[0].prob) for x, y in zip(a, b))
        t = interleaved(
            {"fp32": lambda c=cfgs: fill_mask_batch(fp32, c), "bf16": lambda c=cfgs: fill_mask_batch(bf16, c)},
            rounds,
            device,
        )
        print(
            f"| {name} | {t['fp32'] * 1000:.1f} ms | {t['bf16'] * 1000:.1f} ms | {t['fp32'] / t['bf16']:.2f}x | "
            f"{same}/{len(cfgs)} | {gap:.1e} |",
            flush=True,
        )
    if cuda_ort:
        print("(ONNX Runtime's CUDA provider is installed: run the CPU comparison's graphs with it to add its column)")


def main() -> None:
    """Everything on the thread the batcher runs CPU batches on (core.runtime.serving.batcher.compute_thread; ours'
    fill_mask runs there anyway): torch's OpenMP keeps a thread team per calling thread, and libgomp stops
    spin-waiting, so that every parallel region waits on a futex, once more OpenMP threads exist than cores. Measured
    at 2 threads, fill-mask at batch 1: 27.9 ms with one team, 39-48 ms with a second one on this script's main
    thread. A server's main thread runs no torch."""
    if "--device" in sys.argv and sys.argv[sys.argv.index("--device") + 1] != "cpu":
        run()  # a GPU's kernels: no OpenMP teams to keep apart
    else:
        compute_thread(run)


def run() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (torch and ONNX Runtime alike)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved timed rounds per case")
    ap.add_argument("--quick", action="store_true", help="a tiny BERT, 1 thread, 2 rounds, no technique rows")
    ap.add_argument("--device", default="cpu", help="cpu (against ONNX Runtime), or cuda: fp32 against bf16")
    args = ap.parse_args()
    rounds = 2 if args.quick else args.rounds
    if args.device != "cpu":
        out = Path(tempfile.mkdtemp(prefix="encoderlab-bench-engines-"))
        try:
            on_gpu(build(out, args.quick), args.device, rounds, args.quick)
        finally:
            shutil.rmtree(out, ignore_errors=True)
        return
    import onnxruntime

    threads = [1] if args.quick else [int(x) for x in args.threads.split(",")]
    out = Path(tempfile.mkdtemp(prefix="encoderlab-bench-engines-"))
    try:
        dirs = build(out, args.quick)
        print(
            f"model: {'a tiny BERT' if args.quick else 'bert-base-uncased'}'s config, random weights; torch "
            f"{torch.__version__}, onnxruntime {onnxruntime.__version__}; {rounds} interleaved rounds, medians"
        )
        shared: dict = {}
        for n in threads:
            run_threads(dirs, out, n, rounds, args.quick, shared)
        if not args.quick:
            techniques(dirs, out, threads[0], rounds, shared)
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()

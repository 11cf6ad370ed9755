"""What dynamic int8 quantization (core.models.int8, the transform) costs and saves against fp32.

``measure_quantization(spec, cfg)`` loads the spec's model twice (fp32, int8) and reports, in a frozen
``QuantResult``: size on disk (the serialized state_dict) and in memory (parameters, buffers and the quantized
linears' packed weights), encoder latency at the Speed page's batch and length, top-1 fill-mask agreement of int8
with fp32 on a probe (the bundled fill-mask examples, assets/examples/fill_mask_en.txt, and held-out corpus
sentences, assets/corpus/heldout.txt, with one single-piece word masked in each), and both models' held-out
top-1/top-5 on those masked words.

"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from core.base.messages import msg
from core.base.paths import ASSETS
from core.compare.speed import check_timing_shape
from core.models.int8 import QuantizeError, disk_bytes, memory_bytes, quantized_linears
from core.models.loading import ModelSpec, load
from core.predict.fill_mask import FillMaskConfig, FillMaskError, check_mlm, encode, examples, fill_mask_batch, words

HELDOUT = ASSETS / "corpus" / "heldout.txt"
ARTICLE_CLAIM = (
    "对于部署环境苛刻的场景，ALBERT配合量化往往能带来意想不到的性价比提升。",
    "For demanding deployments, ALBERT with quantization often brings unexpectedly good cost-effectiveness.",
)
ARTICLE_SOURCE = "the third seed article, 4.3 (model selection: the closing advice)"


# ---------------------------------------------------------------------------------------------- the probe
def probe_examples() -> list[str]:
    """The bundled fill-mask example sentences (one [MASK] or more each)."""

    return examples("en")


def heldout_sentences(n: int) -> list[str]:
    """``n`` held-out corpus lines of 8-40 words, spread evenly over the file (deterministic)."""
    lines = [ln.strip() for ln in HELDOUT.read_text(encoding="utf-8").splitlines()]
    ok = [ln for ln in lines if 8 <= len(ln.split()) <= 40 and "[" not in ln and "<" not in ln]
    if not ok:
        raise QuantizeError(msg("int8.no_usable_sentences", corpus=HELDOUT))
    step = max(1, len(ok) // max(n, 1))
    return ok[::step][:n]


def heldout_configs(lm, n: int) -> list:
    """One FillMaskConfig per held-out sentence, masking the middle-most word of 3+ letters that this tokenizer
    keeps as one piece (so top-1/top-5 compare one token with the original). Sentences without such a word are
    skipped."""

    out = []
    for s in heldout_sentences(n):
        ws = words(s)
        mid = len(ws) / 2
        for i in sorted(range(len(ws)), key=lambda i: abs(i - mid)):
            if len(ws[i].text) < 3 or not ws[i].text.isalpha():
                continue
            cfg = FillMaskConfig(s, top_k=5, word=i)
            try:
                if len(encode(lm, cfg).mask_positions) == 1:
                    out.append(cfg)
                    break
            except FillMaskError:
                break
    return out


# ---------------------------------------------------------------------------------------------- measurement
@dataclass(frozen=True)
class QuantConfig:
    """The int8 measurement: latency at ``batch`` x ``seq_len`` (the Speed page's), ``repeats`` timed rounds,
    and ``heldout`` held-out sentences in the probe."""

    seq_len: int = 128
    batch: int = 8
    repeats: int = 5
    heldout: int = 64

    def __post_init__(self) -> None:
        check_timing_shape(self.seq_len, self.batch, self.repeats)
        if not 0 <= self.heldout <= 500:
            raise ValueError(msg("int8.held_out_sentences_out", heldout=self.heldout))


@dataclass(frozen=True)
class QuantSide:
    """One model (fp32 or int8) of the comparison."""

    name: str  # "fp32" or "int8"
    disk_bytes: int
    memory_bytes: int
    latency_ms: float  # median encoder forward, one batch
    latency_std_ms: float
    heldout_top1: float | None  # share of held-out masked words predicted first (None: no held-out probe)
    heldout_top5: float | None


@dataclass(frozen=True)
class QuantResult:
    checkpoint: str
    family: str
    fp32: QuantSide
    int8: QuantSide
    agree_examples: float  # top-1 agreement of int8 with fp32 on the bundled fill-mask examples (per mask)
    agree_heldout: float | None  # ... on the held-out masked words
    n_examples: int  # masks in the example probe
    n_heldout: int
    quantized_linears: int
    seq_len: int
    batch: int
    repeats: int
    threads: int
    disagreements: tuple[tuple[str, str, str], ...] = ()  # (masked text, fp32 top-1, int8 top-1), a few

    @property
    def agreement(self) -> float:
        """Top-1 agreement over the whole probe (examples and held-out, per mask)."""
        n = self.n_examples + self.n_heldout
        held = (self.agree_heldout or 0.0) * self.n_heldout
        return (self.agree_examples * self.n_examples + held) / max(n, 1)

    @property
    def disk_ratio(self) -> float:
        """int8 size on disk / fp32 size."""
        return self.int8.disk_bytes / self.fp32.disk_bytes

    @property
    def memory_ratio(self) -> float:
        return self.int8.memory_bytes / self.fp32.memory_bytes

    @property
    def speedup(self) -> float:
        """fp32 latency / int8 latency (> 1: int8 is faster)."""
        return self.fp32.latency_ms / self.int8.latency_ms


def _top1(results) -> list[tuple[str, str]]:
    return [(r.model_text, m.candidates[0].text) for r in results for m in r.masks]


def _heldout_scores(results) -> tuple[float, float]:
    ranks = [m.original_rank for r in results for m in r.masks if m.original_rank is not None]
    n = max(len(ranks), 1)
    return sum(r == 0 for r in ranks) / n, sum(r < 5 for r in ranks) / n


def time_encoder(
    model, vocab_size: int, batch: int, seq_len: int, repeats: int, others: list | None = None
) -> list[list[float]]:
    """Seconds per encoder forward over random ids (batch, seq_len), for ``model`` and each of ``others``, timed
    round-robin (one forward each per round, after one warm-up) so that load on a shared machine hits all alike."""
    import torch

    models = [model, *(others or [])]
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, max(6, min(vocab_size, 1000)), (batch, seq_len), generator=g)
    mask = torch.ones_like(ids)
    out: list[list[float]] = [[] for _ in models]
    with torch.inference_mode():
        for m in models:
            m.base_model(input_ids=ids, attention_mask=mask)
        for _ in range(repeats):
            for i, m in enumerate(models):
                t0 = time.perf_counter()
                m.base_model(input_ids=ids, attention_mask=mask)
                out[i].append(time.perf_counter() - t0)
    return out


def compare_models(
    fp32_lm, int8_lm, cfg: QuantConfig, on_progress: Callable[[float, str], None] | None = None
) -> QuantResult:
    """Measure a loaded fp32 model against its int8 copy (same tokenizer); see the module docstring."""
    import torch

    def tick(f: float, message: str) -> None:
        if on_progress:
            on_progress(f, message)

    ex = [FillMaskConfig(s, top_k=5) for s in probe_examples()]
    held = heldout_configs(fp32_lm, cfg.heldout) if cfg.heldout else []
    tick(0.3, msg("progress.int8.probe", examples=len(ex), heldout=len(held)))
    res = {}
    for name, lm in (("fp32", fp32_lm), ("int8", int8_lm)):
        res[name] = (fill_mask_batch(lm, ex), fill_mask_batch(lm, held) if held else ())
        tick(0.4 if name == "fp32" else 0.5, msg("progress.int8.fill_mask", name=name))
    a_ex, b_ex = _top1(res["fp32"][0]), _top1(res["int8"][0])
    a_h, b_h = _top1(res["fp32"][1]), _top1(res["int8"][1])
    agree_ex = sum(x[1] == y[1] for x, y in zip(a_ex, b_ex)) / max(len(a_ex), 1)
    agree_h = sum(x[1] == y[1] for x, y in zip(a_h, b_h)) / len(a_h) if a_h else None
    diffs = tuple((x[0], x[1], y[1]) for x, y in zip(a_ex + a_h, b_ex + b_h) if x[1] != y[1])[:8]
    max_len = min(cfg.seq_len, fp32_lm.max_tokens)
    vocab = int(fp32_lm.model.config.vocab_size)
    tick(0.55, msg("progress.int8.timing", batch=cfg.batch, tokens=max_len))
    lat = time_encoder(fp32_lm.model, vocab, cfg.batch, max_len, cfg.repeats, [int8_lm.model])
    sides = {}
    for (name, lm), s in zip((("fp32", fp32_lm), ("int8", int8_lm)), lat):
        top1, top5 = _heldout_scores(res[name][1]) if held else (None, None)
        sides[name] = QuantSide(
            name,
            disk_bytes(lm.model),
            memory_bytes(lm.model),
            statistics.median(s) * 1000,
            statistics.pstdev(s) * 1000 if len(s) > 1 else 0.0,
            top1,
            top5,
        )
    tick(1.0, msg("progress.done"))
    return QuantResult(
        checkpoint=fp32_lm.spec.checkpoint,
        family=fp32_lm.spec.family,
        fp32=sides["fp32"],
        int8=sides["int8"],
        agree_examples=agree_ex,
        agree_heldout=agree_h,
        n_examples=len(a_ex),
        n_heldout=len(a_h),
        quantized_linears=quantized_linears(int8_lm.model),
        seq_len=max_len,
        batch=cfg.batch,
        repeats=cfg.repeats,
        threads=torch.get_num_threads(),
        disagreements=diffs,
    )


def measure_quantization(
    spec: ModelSpec, cfg: QuantConfig, on_progress: Callable[[float, str], None] | None = None
) -> QuantResult:
    """Load ``spec``'s MLM model in fp32 and in int8 (CPU) and compare them; returns a QuantResult.

    A background job (core.runtime.jobs.progress_job): it loads its own copies, never the app's cached model. Raises
    ModelLoadError / QuantizeError / FillMaskError (ValueErrors) with a message for the page.
    """

    if on_progress:
        on_progress(0.0, msg("progress.int8.loading"))
    base = replace(spec, device="cpu", quant="")
    fp32 = load(base, "mlm")
    check_mlm(fp32)
    int8 = load(replace(base, quant="int8"), "mlm")
    if on_progress:
        on_progress(0.2, msg("progress.int8.quantized", n=quantized_linears(int8.model)))
    return compare_models(fp32, int8, cfg, on_progress)


def format_result(r: QuantResult) -> str:
    mb = lambda b: f"{b / 2**20:.1f} MB"  # noqa: E731
    pct = lambda v: "–" if v is None else f"{v:.0%}"  # noqa: E731
    return "\n".join(
        [
            f"{r.checkpoint} ({r.family}): {r.quantized_linears} linears int8 · batch {r.batch} x {r.seq_len} · "
            f"{r.threads} thread(s) · median of {r.repeats}",
            f"  disk   fp32 {mb(r.fp32.disk_bytes)}  int8 {mb(r.int8.disk_bytes)}  ({r.disk_ratio:.2f}x)",
            f"  memory fp32 {mb(r.fp32.memory_bytes)}  int8 {mb(r.int8.memory_bytes)}  ({r.memory_ratio:.2f}x)",
            f"  latency fp32 {r.fp32.latency_ms:.1f} ms  int8 {r.int8.latency_ms:.1f} ms  (int8 {r.speedup:.2f}x faster)",
            f"  top-1 agreement: examples {pct(r.agree_examples)} of {r.n_examples}, held-out {pct(r.agree_heldout)} "
            f"of {r.n_heldout}",
            f"  held-out top-1 fp32 {pct(r.fp32.heldout_top1)} int8 {pct(r.int8.heldout_top1)} · top-5 fp32 "
            f"{pct(r.fp32.heldout_top5)} int8 {pct(r.int8.heldout_top5)}",
        ]
    )


def probe_sources() -> tuple[Path, Path]:
    """The two probe files (for captions)."""
    return ASSETS / "examples" / "fill_mask_en.txt", HELDOUT

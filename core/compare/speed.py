"""Inference speed of each family's base architecture on the current device (the Speed page and bench/speed.py).

Random weights of the real configs (timing does not depend on the values). Models are timed round-robin,
one forward each per round, so that a noisy shared machine slows them all alike; the median is reported.
Run from the command line: ``python -m core.compare.speed --seq-len 128 --batch 8``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from core.base.fields import add_argument, bounded, bounds, default_of
from core.base.messages import msg
from core.models.devices import resolve_device
from core.models.loading import BUILD_LOCK
from core.registry import FAMILIES, build_model, bundled_families, official_config
from core.registry.shape import shape

# (family, baseline family) -> (the seeds' claim, claimed speedup): registry data (Family.speed_claims)
SEED_CLAIMS = {(f.key, c.baseline): (c.text, c.ratio) for f in FAMILIES.values() for c in f.speed_claims}


# the bundled families whose base size the articles give figures for (a GLUE row or a speed claim): bert, roberta,
# albert, distilbert; not the bundled Chinese-capable XLM-R (its base model, 278M with a 250K vocabulary, is in no
# article's comparison)
ARTICLE_FAMILIES = tuple(f.key for f in bundled_families() if f.base_checkpoint and (f.glue_claim or f.speed_claims))


@dataclass(frozen=True)
class SpeedConfig:
    # by default the families the articles' speed claims are about (ARTICLE_FAMILIES); any family with a base-size
    # config can be picked
    families: tuple[str, ...] = ARTICLE_FAMILIES
    # the bounds every timed measurement shares (Speed, int8: core.compare.int8), read by the page's widgets and URL
    seq_len: int = bounded(128, 8, 512, stops=(16, 32, 64, 128, 256, 512), label="Sequence length", hint="tokens")
    batch: int = bounded(8, 1, 256, stops=(1, 2, 4, 8, 16, 32, 64), label="Batch")
    repeats: int = bounded(5, 1, 100, label="Repeats")
    warmup: int = 1
    device: str = "auto"
    threads: int | None = None

    def __post_init__(self) -> None:
        if not self.families:
            raise ValueError(msg("speed.pick_least_one_family"))
        timeable = [k for k, f in FAMILIES.items() if f.base_checkpoint]
        unknown = [f for f in self.families if f not in timeable]
        if unknown:
            raise ValueError(msg("speed.cannot_time_use_families", unknown=unknown, choices=", ".join(timeable)))
        check_timing_shape(self.seq_len, self.batch, self.repeats)


def check_timing_shape(seq_len: int, batch: int, repeats: int) -> None:
    """The bounds every timed measurement shares (Speed, int8), as SpeedConfig declares them: ValueError with the
    range to use."""
    for name, value in (("seq_len", seq_len), ("batch", batch), ("repeats", repeats)):
        bounds(SpeedConfig, name).check(value, ValueError)


@dataclass(frozen=True)
class SpeedRow:
    family: str
    label: str
    checkpoint: str
    params: int
    layers: int
    latency_ms: float  # median over repeats, one batch
    latency_std_ms: float
    throughput: float  # sequences per second
    samples_ms: tuple[float, ...] = ()


@dataclass(frozen=True)
class SpeedResult:
    rows: tuple[SpeedRow, ...]
    seq_len: int
    batch: int
    repeats: int
    device: str
    device_name: str
    note: str = "random weights of the official base configs"
    claims: dict = field(default_factory=dict)

    def row(self, family: str) -> SpeedRow:
        for r in self.rows:
            if r.family == family:
                return r
        raise KeyError(family)

    def speedup(self, fast: str, base: str) -> float:
        """How many times faster ``fast`` is than ``base`` (base latency / fast latency)."""
        return self.row(base).latency_ms / self.row(fast).latency_ms

    def comparisons(self) -> list[tuple[str, float, str, float]]:
        """(pair, measured speedup, claim text, claimed speedup) for each seed claim whose models were timed."""
        fams = {r.family for r in self.rows}
        out = []
        for (fast, base), (text, claim) in SEED_CLAIMS.items():
            if fast in fams and base in fams:
                out.append((f"{FAMILIES[fast].label} vs {FAMILIES[base].label}", self.speedup(fast, base), text, claim))
        return out


def timed(fn: Callable[[], object], device: str = "cpu") -> float:
    """Seconds one call of ``fn`` takes, with CUDA synchronized before and after on a GPU (the bench scripts)."""
    import torch

    cuda = torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def _build(family: str, device: str):
    import torch

    cfg = official_config(FAMILIES[family].base_checkpoint)
    # BUILD_LOCK: a model built while another thread's from_pretrained runs can skip its weight init (see
    # core.models.loading). fork_rng: seeded weights without reseeding the process generators other sessions draw from.
    with BUILD_LOCK, torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = build_model(family, "base", cfg)
    return model.eval().to(device), cfg


def measure_speed(cfg: SpeedConfig, on_progress: Callable[[float, str], None] | None = None) -> SpeedResult:
    """Time a forward pass of each family's base model; returns a SpeedResult. ``on_progress`` may raise to stop."""
    import torch

    dev = resolve_device(cfg.device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    built = {}
    steps = len(cfg.families) * (1 + cfg.warmup) + cfg.repeats * len(cfg.families)
    done = 0

    def tick(message: str) -> None:
        nonlocal done
        done += 1
        if on_progress:
            on_progress(done / steps, message)

    g = torch.Generator().manual_seed(0)
    for fam in cfg.families:
        model, mcfg = _build(fam, dev.torch_device)
        ids = torch.randint(5, min(mcfg.vocab_size, 1000), (cfg.batch, cfg.seq_len), generator=g).to(dev.torch_device)
        mask = torch.ones_like(ids)
        built[fam] = (model, mcfg, ids, mask)
        tick(msg("progress.speed.built", model=FAMILIES[fam].label))
        for _ in range(cfg.warmup):
            _forward(model, ids, mask, dev.kind)
            tick(msg("progress.speed.warmup", model=FAMILIES[fam].label))
    samples: dict[str, list[float]] = {f: [] for f in cfg.families}
    for rep in range(cfg.repeats):
        for fam in cfg.families:
            model, _, ids, mask = built[fam]
            samples[fam].append(_forward(model, ids, mask, dev.kind))
            tick(msg("progress.speed.round", round=rep + 1, rounds=cfg.repeats, model=FAMILIES[fam].label))
    rows = []
    for fam in cfg.families:
        model, mcfg, _, _ = built[fam]
        s = samples[fam]
        med = statistics.median(s)
        rows.append(
            SpeedRow(
                family=fam,
                label=FAMILIES[fam].label,
                checkpoint=FAMILIES[fam].base_checkpoint,
                params=sum(p.numel() for p in model.parameters()),
                layers=shape(mcfg).layers,
                latency_ms=med * 1000,
                latency_std_ms=(statistics.pstdev(s) * 1000 if len(s) > 1 else 0.0),
                throughput=cfg.batch / med,
                samples_ms=tuple(x * 1000 for x in s),
            )
        )
    return SpeedResult(
        rows=tuple(rows),
        seq_len=cfg.seq_len,
        batch=cfg.batch,
        repeats=cfg.repeats,
        device=dev.kind,
        device_name=dev.name,
    )


def _forward(model, ids, mask, kind: str) -> float:
    import torch

    with torch.inference_mode():
        if kind == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        model(input_ids=ids, attention_mask=mask)
        if kind == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0


def format_result(res: SpeedResult) -> str:
    lines = [
        f"device: {res.device} ({res.device_name}); batch {res.batch} x {res.seq_len} tokens; "
        f"median of {res.repeats} rounds; {res.note}",
        f"{'family':<12}{'params':>10}{'layers':>8}{'ms/batch':>12}{'seq/s':>10}",
    ]
    for r in res.rows:
        lines.append(f"{r.label:<12}{r.params / 1e6:>9.1f}M{r.layers:>8}{r.latency_ms:>12.1f}{r.throughput:>10.1f}")
    for pair, measured, text, claim in res.comparisons():
        lines.append(f"{pair}: measured speedup {measured:.2f}x — seeds: {text} (~{claim:g}x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Time each family's base architecture (random weights).")
    for name in ("seq_len", "batch", "repeats"):  # default and range from SpeedConfig's fields
        add_argument(ap, SpeedConfig, name)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--families", default=",".join(default_of(SpeedConfig, "families")))
    a = ap.parse_args(argv)
    cfg = SpeedConfig(
        families=tuple(a.families.split(",")), seq_len=a.seq_len, batch=a.batch, repeats=a.repeats, device=a.device
    )
    print(format_result(measure_speed(cfg, lambda f, m: print(f"  [{f:5.0%}] {m}", flush=True))))


if __name__ == "__main__":
    main()

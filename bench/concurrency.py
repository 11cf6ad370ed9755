"""Many people at once: N simulated sessions predicting on one loaded model, with and without a fine-tune running.

    .venv/bin/python bench/concurrency.py [--n 1,8,32] [--rounds 12] [--device auto|cpu|cuda] [--base-size]
                                          [--no-finetune] [--soak] [--watch] [--quick]

Each simulated session is a thread calling what the Fill-mask page calls (core.predict.fill_mask.fill_mask), as Streamlit
runs each session's script in a thread of one process. All N are released at once, each makes ``--rounds`` calls
on the example sentences; per call the latency is kept and the result compared with the same text run alone
(a mismatch: other tokens, candidates or fills, or a probability more than 1e-5 away).

Baselines, from this run: a lone caller with batching off (the code before core.runtime.serving), and per N the
batched limit: one fill_mask_batch call of the N texts the sessions send in a round, round after round (what batching
itself allows; N callers can only approach it). Printed per N: p50 and p95 latency against the lone caller, throughput
against the lone caller and against the batched limit, mismatches; first with batching off (calls served one after
another), then on; then the ratio to the batched limit per N (target >= 0.9x) and the p95 of 8 callers with a fine-tune
in a worker against the p95 without (target <= 1.5x). Then N = 8 while a fine-tune of the same model family trains, once in
a worker process (the default) and once on a thread of this process (as before). ``--soak``: 300 predictions, 20
training jobs and 50 sessions opened and closed; the process memory after warm-up and at the end. ``--watch``:
the fine-tune speed with its page open and polling in Chromium against no browser (the e2e test, run here).

Defaults: the bundled bert-mini on CPU. ``--base-size``: random weights of bert-base-uncased's config (the size of
the hosted demo's models); scripts/gpu_check.sh runs ``--device cuda --n 1,8,50 --base-size``.
``--quick``: the same measurements, small: N = 1 and 4, 3 calls per session, the fine-tune on a thread only (a
worker process would spend most of the run importing torch) and timed alone for 1 s instead of 8 (seconds;
tests/test_bench_quick.py runs it). Every job is cancelled and waited for, and
worker processes are daemons: nothing is left running.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

from core.models.loading import LoadedModel, ModelSpec, load  # noqa: E402
from core.predict.fill_mask import FillMaskConfig, examples, fill_mask  # noqa: E402
from core.registry import official_config  # noqa: E402
from core.runtime.serving import pinned, stats  # noqa: E402
from core.runtime.serving.batcher import compute_thread  # noqa: E402

TOL = 1e-5


def build(device: str, base_size: bool) -> LoadedModel:
    if not base_size:
        return load(ModelSpec("bert", "encoderlab/bert-mini", device), "mlm")
    import torch
    import transformers

    folder = Path(tempfile.mkdtemp(prefix="encoderlab-bench-base-"))
    torch.manual_seed(0)
    transformers.BertForMaskedLM(official_config("bert-base-uncased")).save_pretrained(str(folder))
    transformers.AutoTokenizer.from_pretrained(str(ROOT / "assets/models/bert-mini")).save_pretrained(str(folder))
    return load(ModelSpec("bert", str(folder), device), "mlm")


def key(r) -> tuple:
    """What must be equal exactly: tokens, candidate ids in order, fills."""
    return (r.tokens, r.fill_pieces, r.fill_order, tuple(tuple(c.token_id for c in m.candidates) for m in r.masks))


def probs(r) -> np.ndarray:
    return np.array([c.prob for m in r.masks for c in m.candidates] + list(r.fill_probs))


def batching(on: bool) -> None:
    os.environ["ENCODERLAB_MAX_BATCH"] = os.environ.get("BENCH_MAX_BATCH", "32") if on else "1"


def sync(lm: LoadedModel) -> None:
    if lm.device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def sessions(lm: LoadedModel, cfgs: list[FillMaskConfig], ref: dict, n: int, rounds: int) -> dict:
    """N threads released together, each making ``rounds`` calls; latencies, wall time, mismatches."""
    lat: list[float] = []
    bad = [0]
    worst = [0.0]
    lock = threading.Lock()
    gate = threading.Barrier(n + 1)

    def session(i: int) -> None:
        gate.wait()
        for r in range(rounds):
            c = cfgs[(i + r) % len(cfgs)]
            t0 = time.perf_counter()
            res = fill_mask(lm, c)
            dt = time.perf_counter() - t0
            diff = float(np.abs(probs(res) - probs(ref[c.text])).max())
            with lock:
                lat.append(dt)
                worst[0] = max(worst[0], diff)
                if key(res) != key(ref[c.text]) or diff > TOL:
                    bad[0] += 1

    threads = [threading.Thread(target=session, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    before = stats(lm, "fill_mask")
    gate.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    after = stats(lm, "fill_mask")
    a = np.array(lat) * 1000
    calls = after.calls - before.calls
    return dict(
        p50=float(np.percentile(a, 50)),
        p95=float(np.percentile(a, 95)),
        thr=len(lat) / wall,
        bad=bad[0],
        worst=worst[0],
        calls=len(lat),
        per_batch=(calls / max(1, after.batches - before.batches)) if calls else 1.0,
    )


def row(label: str, m: dict, lone: dict, limit: float | None = None) -> str:
    vs_limit = f"{m['thr'] / limit:.2f}×" if limit else "–"
    return (
        f"| {label} | {m['p50']:.1f} ms ({m['p50'] / lone['p50']:.2f}×) | {m['p95']:.1f} ms "
        f"({m['p95'] / lone['p95']:.2f}×) | {m['thr']:.1f}/s ({m['thr'] / lone['thr']:.2f}×) | {vs_limit} | "
        f"{m['per_batch']:.1f} | {m['bad']} (max Δp {m['worst']:.1e}) |"
    )


def batched_limit(lm: LoadedModel, cfgs: list[FillMaskConfig], n: int, rounds: int) -> float:
    """Requests/s of one batched call (fill_mask_batch) of the texts N sessions send in a round, round after round:
    what batching itself allows here, the ceiling for N concurrent callers. Run where the batcher runs a batch (a
    model on the CPU: the process's compute thread, core.runtime.serving.batcher)."""
    from core.predict.fill_mask import fill_mask_batch

    def run(batch: list[FillMaskConfig]):
        return compute_thread(lambda: fill_mask_batch(lm, batch)) if pinned(lm) else fill_mask_batch(lm, batch)

    times = []
    for r in range(max(3, rounds)):
        batch = [cfgs[(i + r) % len(cfgs)] for i in range(n)]
        t0 = time.perf_counter()
        run(batch)
        sync(lm)
        times.append(time.perf_counter() - t0)
    return n / float(np.median(times))


def start_finetune(device: str, workers: bool, out: Path):
    """A fine-tune of bert-mini on the bundled drug reviews, long enough to outlast the measurement."""
    from core.data.datasets_local import load_bundled
    from core.runtime.jobs import JobRunner
    from core.train.finetune import job_fn
    from core.train.finetune_config import FinetuneConfig

    r = JobRunner({"cpu": 2, "gpu": 1}, workers=workers)
    cfg = FinetuneConfig(
        "bert", "encoderlab/bert-mini", epochs=1, max_steps=2000, batch_size=8, max_length=64, patience=0, device=device
    )
    job = r.submit("bench fine-tune", job_fn(cfg, load_bundled("drugreview").subset(6400, 32), out), device=device)
    end = time.time() + 300
    while sum(1 for m in job.metrics if m.get("kind") == "train") < 2 and not job.done and time.time() < end:
        time.sleep(0.2)
    if job.done:
        raise SystemExit(f"the fine-tune ended before the measurement: {job.status} {job.error}")
    return r, job


def train_steps(job) -> int:
    return max([int(m.get("step", 0)) for m in job.metrics if m.get("kind") == "train"] or [0])


def rss_mb() -> float:
    import psutil

    gc.collect()
    return psutil.Process().memory_info().rss / 2**20


def soak(lm: LoadedModel, cfgs: list[FillMaskConfig], device: str) -> None:
    """300 predictions, 20 training jobs and 50 sessions opened and closed; process memory before and after."""
    from core.data.datasets_local import load_bundled
    from core.runtime.jobs import JobRunner
    from core.runtime.run_folders import SessionSweeper
    from core.train.finetune import job_fn, runs_root
    from core.train.finetune_config import FinetuneConfig

    runs = Path(tempfile.mkdtemp(prefix="encoderlab-bench-runs-"))
    os.environ["ENCODERLAB_RUNS"] = str(runs)
    os.environ["ENCODERLAB_RUNS_TTL_S"] = "5"  # a closed session's runs go soon: the soak checks they do
    os.environ["ENCODERLAB_JOBS_KEEP"] = "10"
    data = load_bundled("drugreview").subset(64, 16)
    r = JobRunner({"cpu": 2, "gpu": 1}, workers=True)
    live: dict[str, bool] = {}
    sweeper = SessionSweeper(r, lambda sid: live.get(sid, False))

    def train_job(owner: str, i: int):
        cfg = FinetuneConfig(
            "bert",
            "encoderlab/bert-mini",
            epochs=1,
            max_steps=2,
            batch_size=8,
            max_length=64,
            patience=0,
            device=device,
        )
        return r.submit(f"soak {i}", job_fn(cfg, data, runs_root(owner) / f"run{i}"), device=device, owner=owner)

    for c in cfgs:  # warm-up: every text once, one training job
        fill_mask(lm, c)
    r.wait(train_job("warmup", 0), timeout=600)
    warm = rss_mb()
    t0 = time.perf_counter()
    jobs, preds, trainers, gate_jobs = [], 0, [], []
    gate = threading.Event()
    # one job holds the (otherwise unused) gpu queue, so the jobs the closing sessions leave behind are still queued
    r.submit("holds the queue", lambda ctx: gate.wait(3600), resource="gpu")
    for s in range(50):
        owner = sid = f"soak-session-{s}"
        live[sid] = True
        sweeper.remember(owner, sid)
        out = [None] * 6
        ts = [
            threading.Thread(
                target=lambda k=k, out=out, s=s: out.__setitem__(k, fill_mask(lm, cfgs[(s + k) % len(cfgs)]))
            )
            for k in range(6)
        ]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        preds += sum(o is not None for o in out)
        if s % 5 < 2:  # 20 of the 50 sessions train; they keep their tab open until their run is done
            jobs.append(train_job(owner, s))
            trainers.append(sid)
        else:  # the others leave a job waiting behind the trainers and close their tab: it is cancelled
            gate_jobs.append(r.submit("left queued", lambda ctx: None, owner=owner, resource="gpu"))
            live[sid] = False
        sweeper.sweep()
        sweeper.sweep()
    for j in jobs:
        r.wait(j, timeout=1800)
    for sid in trainers:
        live[sid] = False
    sweeper.sweep()
    sweeper.sweep()
    gate.set()
    time.sleep(6)
    r.evict()
    from core.runtime.run_folders import evict_run_folders

    evict_run_folders(runs)
    end = rss_mb()
    trained = sum(j.status == "done" for j in jobs)
    failed = [j.error for j in jobs if j.status == "error"]
    dropped = sum(j.status == "cancelled" for j in gate_jobs)
    left = sum(p.stat().st_size for p in runs.rglob("*") if p.is_file()) / 2**20
    print(
        f"\nsoak: {preds} predictions, {trained} training jobs done ({len(failed)} failed{': ' + failed[0] if failed else ''}), "
        f"50 sessions opened and closed ({dropped} of the {len(gate_jobs)} jobs left queued by a closed tab were "
        f"cancelled), {time.perf_counter() - t0:.0f} s"
    )
    print(
        f"  process memory (RSS) after warm-up {warm:.0f} MB, at the end {end:.0f} MB: growth {end - warm:+.0f} MB "
        "(target < 100 MB)"
    )
    print(f"  job table {len(r.jobs())} entries (keep 10), run folders left {left:.1f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="1,8,32", help="comma-separated numbers of simultaneous sessions")
    ap.add_argument("--rounds", type=int, default=12, help="calls per session")
    ap.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--base-size", action="store_true", help="bert-base-size random weights instead of bert-mini")
    ap.add_argument("--no-finetune", action="store_true", help="skip the measurement with a fine-tune running")
    ap.add_argument("--soak", action="store_true", help="also run the soak (a few minutes)")
    ap.add_argument("--watch", action="store_true", help="also measure a fine-tune watched in Chromium (e2e test)")
    ap.add_argument("--quick", action="store_true", help="N = 1,4, 3 calls per session, one short fine-tune: seconds")
    args = ap.parse_args()
    alone_s = 8.0
    if args.quick:
        args.n, args.rounds, alone_s = "1,4", 3, 1.0
    ns = [int(x) for x in args.n.split(",")]
    # the model is built, and the references run, on the thread the batcher runs CPU batches on: torch's OpenMP keeps
    # a thread team per calling thread, and libgomp stops spin-waiting (every parallel region then waits on a futex)
    # once more OpenMP threads exist than cores; a server's main thread runs no torch (core.runtime.serving.batcher)
    lm = compute_thread(lambda: build(args.device, args.base_size))
    import torch

    cfgs = [FillMaskConfig(t) for t in examples("en")]
    batching(False)
    ref = compute_thread(lambda: {c.text: fill_mask(lm, c) for c in cfgs})
    for _ in range(2):  # warm-up
        sessions(lm, cfgs, ref, 4, 2)
    # the machine is shared: of three lone runs, the one with the median p50 is the baseline
    lone = sorted((sessions(lm, cfgs, ref, 1, args.rounds * 2) for _ in range(3)), key=lambda m: m["p50"])[1]
    nparams = sum(p.numel() for p in lm.model.parameters()) / 1e6
    print(
        f"model: {lm.spec.checkpoint} ({nparams:.1f}M parameters), device {lm.device}, torch threads "
        f"{torch.get_num_threads()}, {os.cpu_count()} CPU cores; {len(cfgs)} example sentences; {args.rounds} calls "
        f"per session; window {os.environ.get('ENCODERLAB_BATCH_WINDOW_MS', '5')} ms, largest batch "
        f"{os.environ.get('BENCH_MAX_BATCH', '32')}"
    )
    print(
        f"baseline: a lone caller, batching off: p50 {lone['p50']:.1f} ms, p95 {lone['p95']:.1f} ms, "
        f"{lone['thr']:.1f} calls/s\n"
    )
    print(
        "| sessions at once | p50 (vs lone) | p95 (vs lone) | throughput (vs lone) | vs one batched call | "
        "requests per forward | mismatches |"
    )
    print("|---|---|---|---|---|---|---|")
    limits = {n: batched_limit(lm, cfgs, n, args.rounds) for n in ns if n > 1}
    results: dict[tuple[int, bool], dict] = {}
    for on in (False, True):
        batching(on)
        for n in ns:
            m = results[n, on] = sessions(lm, cfgs, ref, n, args.rounds)
            print(row(f"{n}, batching {'on' if on else 'off'}", m, lone, limits.get(n)), flush=True)
    batching(True)
    for n, limit in limits.items():
        ratio = results[n, True]["thr"] / limit
        print(
            f"{n} concurrent callers / one batched call of their texts ({limit:.1f}/s) = {ratio:.2f}x "
            f"(target >= 0.9x: {'met' if ratio >= 0.9 else 'missed'})"
        )
    if not args.no_finetune:
        for workers in (False,) if args.quick else (True, False):
            out = Path(tempfile.mkdtemp(prefix="encoderlab-bench-ft-"))
            r, job = start_finetune(args.device, workers, out)
            s0, t0 = train_steps(job), time.perf_counter()
            time.sleep(alone_s)
            alone = (train_steps(job) - s0) / (time.perf_counter() - t0)
            s0, t0 = train_steps(job), time.perf_counter()
            m = sessions(lm, cfgs, ref, 8, args.rounds * 2)
            rate = (train_steps(job) - s0) / (time.perf_counter() - t0)
            r.cancel(job.id)
            r.wait(job, timeout=180)
            where = "worker process" if workers else "thread of this process"
            print(
                row(f"8 + a fine-tune ({where}; its steps/s {alone:.2f} before, {rate:.2f} meanwhile)", m, lone),
                flush=True,
            )
            if workers and (8, True) in results:
                ratio = m["p95"] / results[8, True]["p95"]
                print(
                    f"p95 of 8 callers with a fine-tune in a worker / without = {ratio:.2f}x "
                    f"(target <= 1.5x: {'met' if ratio <= 1.5 else 'missed'})",
                    flush=True,
                )
    if args.soak:
        soak(lm, cfgs, args.device)
    if args.watch:
        print("\nwatching a fine-tune (tests/e2e/test_concurrency_e2e.py, a real server in Chromium):", flush=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-s",
                "-p",
                "no:cacheprovider",
                "tests/e2e/test_concurrency_e2e.py",
                "-k",
                "watching",
            ],
            cwd=ROOT,
            check=False,
            env={**os.environ, "ENCODERLAB_BENCH_WATCH": "1"},
        )


if __name__ == "__main__":
    main()

"""Scale-out on Ray: fill-mask throughput with 1 against 2 model replicas, and the Ray path's cost for one call.

    .venv/bin/python bench/scaleout.py [--duration 6] [--warmup 2] [--callers 16] [--rounds 2] [--lone 100]
                                       [--device cpu|cuda] [--json PATH] [--quick]

The model is the bundled bert-mini (task "mlm", as the Fill-mask page loads it), called as the pages call it,
``core.predict.fill_mask.fill_mask(lm, FillMaskConfig(text))``, on the example sentences; the backend decides where it runs
(``core.runtime.backend.use``).

1. Throughput. ``--callers`` threads (16) call fill-mask in a loop on a RayBackend whose deployment has 1 replica,
   then 2 (CPU: ``replica_cpus=1, replica_threads=1`` each on a local Ray of 2 CPUs; ``--device cuda``: 1 replica
   with ``replica_gpus=1`` against 2 with ``replica_gpus=0.5`` on one GPU). Per measurement the callers run
   ``--warmup`` seconds uncounted, then ``--duration`` seconds counted (requests completed / seconds). The replica
   counts alternate 1, 2, 2, 1, ... over ``--rounds`` rounds (each switch deletes the Serve application and
   deploys it again with the other count), so drift on a shared machine hits both alike; the ratio is the median
   2-replica throughput over the median 1-replica one. Baseline: 1 replica, from this run. Target: >= 1.6x.
   Every result is checked against the same text run in this process (a mismatch: other candidates or fills, or
   a probability more than 1e-5 away). Per run also: requests per forward (requests / forwards, as
   bench/concurrency.py; from each raw result's ``batch_size``), and the same callers in-process once, as a
   reference with no target.
2. Overhead. One caller, sequential calls, in-process (``InProcessBackend``) and on Ray (1 replica) interleaved
   call by call, ``--lone`` calls each; the medians. This process's torch threads are set to 1 (a replica's
   ``replica_threads=1``), so both sides compute on one thread. Target: Ray <= 1.5 x in-process + 5 ms.

Ray's own startup and each deployment's start are timed and printed, but are in no number above. Ray is shut
down at the end. scripts/gpu_check.sh runs ``--device cuda``.
``--quick``: the same two parts, small: 4 callers, 0.5 s warm-up + 1 s counted, 1 round (1 then 2 replicas), 5 lone
calls per path; Ray (2 CPUs) is still started and shut down (tens of seconds, most of it Ray's and the
deployments' startup; tests/test_bench_quick.py runs it when ray is installed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

import core.runtime.backend as backend  # noqa: E402
from core.models.loading import LoadedModel, ModelSpec, load  # noqa: E402
from core.predict.fill_mask import FillMaskConfig, examples, fill_mask  # noqa: E402

TOL = 1e-5
TARGET_SCALE = 1.6
TARGET_FACTOR, TARGET_ADD_MS = 1.5, 5.0


def key(r) -> tuple:
    return (r.tokens, r.fill_pieces, r.fill_order, tuple(tuple(c.token_id for c in m.candidates) for m in r.masks))


def probs(r) -> np.ndarray:
    return np.array([c.prob for m in r.masks for c in m.candidates] + list(r.fill_probs))


def same(res, ref) -> bool:
    return key(res) == key(ref) and float(np.abs(probs(res) - probs(ref)).max(initial=0.0)) <= TOL


class Counting(backend.Backend):
    """A backend that passes every call on to ``inner`` and keeps, per fill-mask request, how many requests shared
    its forward (the raw result's ``batch_size``, which ``fill_mask`` then resets to 1 for the page)."""

    def __init__(self, inner: backend.Backend) -> None:
        self.inner, self.name = inner, inner.name
        self._lock = threading.Lock()
        self.sizes: list[int] = []

    def batched(self, obj, op, fn, item):
        res = self.inner.batched(obj, op, fn, item)
        with self._lock:
            self.sizes.append(int(getattr(res, "batch_size", 1) or 1))
        return res

    def call(self, obj, fn, args, kwargs, progress=None):
        return self.inner.call(obj, fn, args, kwargs, progress)

    def job_runner(self):
        return self.inner.job_runner()

    def room_store(self):
        return self.inner.room_store()

    def take(self) -> list[int]:
        with self._lock:
            out, self.sizes = self.sizes, []
        return out


def settings_for(device: str, replicas: int):
    from core.runtime.backend.ray_settings import RaySettings

    if device == "cuda":  # two replicas share the one GPU; one replica has it all
        return RaySettings(
            cpus=2, replicas=replicas, replica_cpus=1, replica_threads=1, replica_gpus=1.0 if replicas == 1 else 0.5
        )
    return RaySettings(cpus=2, replicas=replicas, replica_cpus=1, replica_threads=1)


class Deployments:
    """The model's Serve application with a given replica count: deletes and redeploys when the count changes."""

    def __init__(self, lm: LoadedModel, device: str) -> None:
        self.lm, self.device = lm, device
        self.replicas = 0
        self.ray = None
        self.backend: Counting | None = None
        self.deploy_s: list[float] = []
        self.where: list[dict] = []

    def with_replicas(self, n: int):
        from ray import serve

        from core.runtime.backend.ray_backend import RayBackend, app_name

        if n == self.replicas:
            return self.backend
        if self.ray is not None:
            serve.delete(app_name(self.lm.recipe))
            self.ray.forget(self.lm.recipe)
        t0 = time.perf_counter()
        self.ray = RayBackend(settings_for(self.device, n))
        self.ray.handle(self.lm.recipe)  # deploys; waits until the replicas are up
        self.deploy_s.append(time.perf_counter() - t0)
        self.replicas = n
        where = {w["pid"]: w for w in self.ray.where(self.lm)}
        if len(where) != n:
            print(f"  (note: {n} replicas asked for, {len(where)} answered: {sorted(where)})", flush=True)
        self.where = list(where.values())
        self.backend = Counting(self.ray)
        return self.backend


def throughput(
    lm: LoadedModel, cfgs: list[FillMaskConfig], ref: dict, b: Counting, callers: int, warmup: float, duration: float
) -> dict:
    """``callers`` threads calling fill-mask in a loop on ``b``; requests completed per second after the warm-up,
    and requests per forward (as bench/concurrency.py: requests / forwards) over the same seconds."""
    backend.use(b)
    done = [0] * callers
    bad = [0] * callers
    errors: list[BaseException] = []
    stop = threading.Event()
    gate = threading.Barrier(callers + 1)

    def caller(i: int) -> None:
        gate.wait()
        k = i
        try:
            while not stop.is_set():
                c = cfgs[k % len(cfgs)]
                k += 1
                res = fill_mask(lm, c)
                if not same(res, ref[c.text]):
                    bad[i] += 1
                done[i] += 1
        except BaseException as e:  # noqa: BLE001 - reported below, the measurement is void
            errors.append(e)
            stop.set()

    threads = [threading.Thread(target=caller, args=(i,), daemon=True) for i in range(callers)]
    for t in threads:
        t.start()
    gate.wait()
    time.sleep(warmup)
    n0, b0, t0 = sum(done), sum(bad), time.perf_counter()
    b.take()
    time.sleep(duration)
    n1, b1, t1 = sum(done), sum(bad), time.perf_counter()
    sizes = b.take()
    stop.set()
    for t in threads:
        t.join(timeout=120)
    if errors:
        raise RuntimeError(f"a caller failed: {type(errors[0]).__name__}: {errors[0]}") from errors[0]
    per_forward = len(sizes) / sum(1 / k for k in sizes) if sizes else 0.0
    return dict(
        thr=(n1 - n0) / (t1 - t0),
        requests=n1 - n0,
        seconds=t1 - t0,
        mismatches=b1 - b0,
        per_forward=per_forward,
        largest_batch=max(sizes, default=0),
    )


def lone(lm: LoadedModel, cfgs: list[FillMaskConfig], ref: dict, paths: dict, n: int) -> dict:
    """One caller, sequential calls, the paths interleaved call by call; milliseconds per call for each."""
    ms: dict[str, list[float]] = {p: [] for p in paths}
    bad = {p: 0 for p in paths}
    for i in range(len(cfgs)):  # warm-up: every text once on every path
        for b in paths.values():
            backend.use(b)
            fill_mask(lm, cfgs[i])
    for i in range(n):
        c = cfgs[i % len(cfgs)]
        for p, b in paths.items():
            backend.use(b)
            t0 = time.perf_counter()
            res = fill_mask(lm, c)
            ms[p].append((time.perf_counter() - t0) * 1000)
            bad[p] += not same(res, ref[c.text])
    return {
        p: dict(median_ms=statistics.median(v), p90_ms=float(np.percentile(v, 90)), calls=len(v), mismatches=bad[p])
        for p, v in ms.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=6.0, help="counted seconds per throughput measurement")
    ap.add_argument("--warmup", type=float, default=2.0, help="uncounted seconds before each measurement")
    ap.add_argument("--callers", type=int, default=16, help="concurrent caller threads")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of (1 replica, 2 replicas), order alternating")
    ap.add_argument("--lone", type=int, default=100, help="sequential calls per path for the overhead")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--json", default=None, metavar="PATH", help="also write the numbers to PATH")
    ap.add_argument("--quick", action="store_true", help="4 callers, 1 s per run, 1 round, 5 lone calls")
    args = ap.parse_args()
    if args.quick:
        args.callers, args.warmup, args.duration, args.rounds, args.lone = 4, 0.5, 1.0, 1, 5

    try:
        import ray  # noqa: F401 - requirements-ray.txt; `make bench` installs requirements.txt only
    except ImportError:
        print("bench/scaleout.py skipped: Ray is not installed here (pip install -r requirements-ray.txt)")
        return
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here")
    torch.set_num_threads(1)  # like for like with a replica's replica_threads=1
    lm = load(ModelSpec("bert", "encoderlab/bert-mini", args.device), "mlm")
    if lm.recipe is None:
        raise SystemExit("the model has no recipe: a replica could not load it")
    cfgs = [FillMaskConfig(t) for t in examples("en")]
    inproc = Counting(backend.InProcessBackend())
    backend.use(inproc)
    ref = {c.text: fill_mask(lm, c) for c in cfgs}

    import logging

    import ray
    import ray.serve  # noqa: F401 - importing it sets its logger to INFO: quieten it after

    from core.runtime.backend.ray_backend import connect

    logging.getLogger("ray.serve").setLevel(logging.WARNING)  # Serve's "application is ready" lines, in this process

    t0 = time.perf_counter()
    connect(settings_for(args.device, 1))  # a local Ray of its own and Serve (no HTTP proxy), as the backend does
    ray_start_s = time.perf_counter() - t0
    out: dict = {}
    try:
        deps = Deployments(lm, args.device)
        ray1 = deps.with_replicas(1)
        res = ray.cluster_resources()
        nparams = sum(p.numel() for p in lm.model.parameters()) / 1e6
        gpus = f", {res['GPU']:g} GPUs" if res.get("GPU") else ""
        print(
            f"model: {lm.spec.checkpoint} ({nparams:.1f}M parameters, task {lm.task}), device {args.device}; "
            f"{os.cpu_count()} CPU cores here (load average {os.getloadavg()[0]:.1f}); a local Ray of "
            f"{res.get('CPU', 0):g} CPUs{gpus} (up in "
            f"{ray_start_s:.1f} s, not counted); {len(cfgs)} example sentences; batch window "
            f"{os.environ.get('ENCODERLAB_BATCH_WINDOW_MS', '5')} ms, largest batch "
            f"{os.environ.get('ENCODERLAB_MAX_BATCH', '32')}",
            flush=True,
        )
        print(f"replicas: {settings_for(args.device, 1)}; the replica reports {deps.where}", flush=True)
        print(
            f"this process: torch threads set to {torch.get_num_threads()} for the in-process side "
            "(like for like with replica_threads=1)\n",
            flush=True,
        )

        # 2. the overhead of one lone call (with the 1-replica deployment up)
        lo = lone(lm, cfgs, ref, {"in-process": inproc, "ray": ray1}, args.lone)
        ip, rp = lo["in-process"]["median_ms"], lo["ray"]["median_ms"]
        limit = TARGET_FACTOR * ip + TARGET_ADD_MS
        over_ok = rp <= limit
        print(
            f"one lone fill-mask: {args.lone} sequential calls per path, interleaved call by call (baseline: "
            f"in-process, torch threads 1 in this process):"
        )
        for p, m in lo.items():
            print(f"  {p:11s} median {m['median_ms']:6.2f} ms, p90 {m['p90_ms']:6.2f} ms, {m['mismatches']} mismatches")
        print(
            f"  overhead: ray/in-process = {rp / ip:.2f}x (+{rp - ip:.2f} ms); target ray <= {TARGET_FACTOR} x "
            f"in-process + {TARGET_ADD_MS:g} ms = {limit:.2f} ms: {'PASS' if over_ok else 'MISS'}\n",
            flush=True,
        )

        # 1. throughput, 1 against 2 replicas, alternating 1,2,2,1,...
        order = [n for r in range(args.rounds) for n in ((1, 2) if r % 2 == 0 else (2, 1))]
        runs: list[dict] = []
        print(
            f"throughput: {args.callers} callers calling fill-mask in a loop, {args.warmup:g} s warm-up + "
            f"{args.duration:g} s counted per run; replicas in the order {', '.join(map(str, order))} "
            "(baseline: 1 replica)"
        )

        def show(label: str, m: dict) -> None:
            print(
                f"  {label}: {m['thr']:7.1f} requests/s ({m['requests']} in {m['seconds']:.1f} s), "
                f"{m['per_forward']:.1f} requests per forward (largest {m['largest_batch']}), "
                f"{m['mismatches']} mismatches",
                flush=True,
            )

        for n in order:
            m = throughput(lm, cfgs, ref, deps.with_replicas(n), args.callers, args.warmup, args.duration)
            m["replicas"] = n
            runs.append(m)
            show(f"{n} replica{'s' if n > 1 else ' '}", m)
        backend.use(inproc)
        here = throughput(lm, cfgs, ref, inproc, args.callers, args.warmup, args.duration)
        show("in-process (reference, no target)", here)
        thr1 = statistics.median(r["thr"] for r in runs if r["replicas"] == 1)
        thr2 = statistics.median(r["thr"] for r in runs if r["replicas"] == 2)
        ratio = thr2 / thr1 if thr1 else float("nan")  # nan: 1 replica served nothing (a starved machine)
        scale_ok = ratio >= TARGET_SCALE
        gpu = " (replica_gpus 1 against 0.5 each, one GPU)" if args.device == "cuda" else ""
        print(
            f"  1 replica {thr1:.1f} requests/s, 2 replicas {thr2:.1f} requests/s{gpu}, medians of "
            f"{args.rounds} runs each"
        )
        print(
            f"  scale-out: 2 replicas / 1 replica = {ratio:.2f}x throughput; target >= {TARGET_SCALE}x: "
            f"{'PASS' if scale_ok else 'MISS'}"
        )
        print(
            f"  (deploying took {', '.join(f'{s:.1f}' for s in deps.deploy_s)} s; load average now "
            f"{os.getloadavg()[0]:.1f})",
            flush=True,
        )
        out = dict(
            device=args.device,
            model=lm.spec.checkpoint,
            callers=args.callers,
            duration_s=args.duration,
            warmup_s=args.warmup,
            rounds=args.rounds,
            ray_cpus=res.get("CPU"),
            ray_gpus=res.get("GPU", 0),
            torch_threads_here=torch.get_num_threads(),
            replica_threads=1,
            ray_start_s=ray_start_s,
            deploy_s=deps.deploy_s,
            replicas_seen=deps.where,
            throughput=dict(
                runs=runs,
                one_replica=thr1,
                two_replicas=thr2,
                ratio=ratio,
                target=TARGET_SCALE,
                passed=scale_ok,
                inprocess_reference=here,
            ),
            overhead=dict(
                inprocess_median_ms=ip,
                ray_median_ms=rp,
                ratio=rp / ip,
                limit_ms=limit,
                target=f"ray <= {TARGET_FACTOR} x in-process + {TARGET_ADD_MS:g} ms",
                passed=over_ok,
                paths=lo,
            ),
        )
    finally:
        backend.use(None)
        ray.shutdown()  # the whole local Ray, Serve and its replicas with it
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2))
        print(f"numbers written to {args.json}")


if __name__ == "__main__":
    main()

"""The room: how long a follower takes to see a presenter's change, and what each follower costs, at N = 10 and 50.

One presenter thread publishes a new state (page + query parameters, as app/room/lifecycle.end does) every 1.5-2.5 s;
N follower threads each run the follower's poll at the default poll interval (core.runtime.room.limits().poll_s, what
st.fragment(run_every=...) uses): core.runtime.room.follow_step against the same store, and on APPLY what the page does
after switching (PresenterState.of + diverged, app/room/lifecycle.end). Followers start at random phases, as browsers
joining at different moments do. The delay of a change is the time from its publish to a follower seeing it.

Baseline, from the same run: an ideal poller with the same interval and no work (its delay is uniform on
[0, poll_s]: median poll_s / 2, p95 0.95 poll_s); CPU baseline: a thread that only sleeps at the same interval.
The ratios say how much the store and the follow path add on top of polling itself. What this does not measure is
Streamlit's own fragment rerun and the switch to the presenter's page in the browser (tests/e2e/test_room_e2e.py
checks that end to end within its bound).

Run: .venv/bin/python bench/room.py  [BENCH_CHANGES=n] [BENCH_N=10,50] [--quick]
``--quick``: 3 changes at N = 2 and 10, a poll interval of 0.2 s and changes 0.3-0.5 s apart (the same code, time
scaled down; seconds; tests/test_bench_quick.py runs it).
Target: p95 <= 1.5 s at N = 50 with the default poll interval.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.runtime import room as R  # noqa: E402
from core.runtime.room_store import InProcessStore  # noqa: E402

CHANGES = int(os.environ.get("BENCH_CHANGES", "12"))
NS = tuple(int(n) for n in os.environ.get("BENCH_N", "10,50").split(","))
TARGET_P95 = 1.5


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def run(n: int, poll_s: float, changes: int, seed: int = 0, gap_s: tuple[float, float] = (1.5, 2.5)) -> dict:
    rng = random.Random(seed)
    store = InProcessStore()
    made = store.create()
    members = [f"follower-{i}" for i in range(n)]
    for m in members:
        store.join(made.code, m)
    published: dict[int, float] = {}
    seen_at: dict[tuple[str, int], float] = {}
    cpu: dict[str, float] = {}
    polls: dict[str, int] = {}
    stop = threading.Event()

    def follower(member: str, phase: float) -> None:
        time.sleep(phase)
        seen, landed, c, k = (0, 0), None, 0.0, 0
        nxt = time.monotonic()
        while not stop.is_set():
            t0 = time.thread_time()
            step = R.follow_step(store, made.code, member, seen, True)
            if step.action == R.APPLY:
                now = time.monotonic()
                seen = (step.view.state_version, step.view.shared_version)
                seen_at[(member, seen[0])] = now
                params = {**step.view.state.as_dict(), R.ROOM_PARAM: made.code, "lang": "en"}
                landed = R.PresenterState.of(step.view.state.page, params)  # app/room/lifecycle.end after the switch
                R.diverged(landed, step.view.state.page, params)
            elif step.action == R.REFRESH:
                seen = (seen[0], step.view.shared_version)
            c += time.thread_time() - t0
            k += 1
            nxt += poll_s
            time.sleep(max(0.0, nxt - time.monotonic()))
        cpu[member], polls[member] = c, k

    def idle(member: str, phase: float) -> None:  # the CPU baseline: the same wake-ups, no work
        time.sleep(phase)
        t0, nxt = time.thread_time(), time.monotonic()
        while not stop.is_set():
            nxt += poll_s
            time.sleep(max(0.0, nxt - time.monotonic()))
        cpu[member] = time.thread_time() - t0

    threads = [threading.Thread(target=follower, args=(m, rng.uniform(0, poll_s)), daemon=True) for m in members]
    threads.append(threading.Thread(target=idle, args=("idle", rng.uniform(0, poll_s)), daemon=True))
    for th in threads:
        th.start()
    time.sleep(2 * poll_s)  # everyone polling
    wall0 = time.monotonic()
    pages = ("walkthrough", "fill-mask", "attention")
    for i in range(changes):
        state = R.PresenterState.of(
            pages[i % 3],
            {
                "walkthrough.step": str(i % 7 + 1),
                "family": "bert",
                "fill_mask.text": f"Change {i} of the [MASK].",
                "lang": "en",
            },
        )
        v = store.publish(made.code, made.key, state)
        published[v] = time.monotonic()
        time.sleep(rng.uniform(*gap_s))
    time.sleep(2 * poll_s)
    stop.set()
    for th in threads:
        th.join()
    wall = time.monotonic() - wall0
    delays = [seen_at[(m, v)] - t for v, t in published.items() for m in members if (m, v) in seen_at]
    missed = n * len(published) - len(delays)
    follower_cpu = statistics.mean(cpu[m] for m in members)
    return {
        "n": n,
        "delays": delays,
        "missed": missed,
        "cpu_per_s": follower_cpu / wall,
        "idle_cpu_per_s": cpu["idle"] / wall,
        "polls_per_s": statistics.mean(polls[m] for m in members) / wall,
        "cpu_per_poll_us": 1e6 * follower_cpu / max(1, statistics.mean(polls[m] for m in members)),
    }


def main() -> None:
    global CHANGES, NS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 changes, N = 2,10, time scaled down: seconds")
    quick = ap.parse_args().quick
    poll_s, gap_s = R.limits().poll_s, (1.5, 2.5)
    if quick:
        CHANGES, NS, poll_s, gap_s = 3, (2, 10), 0.2, (0.3, 0.5)
    print(
        f"room bench: default poll interval {poll_s:.2f} s (ENCODERLAB_ROOM_POLL_S), {CHANGES} presenter changes "
        f"{gap_s[0]}-{gap_s[1]} s apart, followers at random phases; {os.cpu_count()} CPUs"
    )
    print(f"baseline 'ideal poller' (same interval, no work): median {poll_s / 2:.3f} s, p95 {0.95 * poll_s:.3f} s")
    ok = True
    for n in NS:
        r = run(n, poll_s, CHANGES, gap_s=gap_s)
        med, hi = statistics.median(r["delays"]), p95(r["delays"])
        ok &= hi <= TARGET_P95 and r["missed"] == 0
        print(
            f"N={n:>3}: {len(r['delays'])} follows ({r['missed']} missed)  delay median {med:.3f} s "
            f"({med / (poll_s / 2):.2f}x baseline)  p95 {hi:.3f} s ({hi / (0.95 * poll_s):.2f}x baseline)  "
            f"max {max(r['delays']):.3f} s  [target p95 <= {TARGET_P95} s: {'met' if hi <= TARGET_P95 else 'MISSED'}]"
        )
        print(
            f"        CPU per follower: {1e3 * r['cpu_per_s']:.3f} ms per second ({100 * r['cpu_per_s']:.4f}% of a "
            f"core; {r['cpu_per_poll_us']:.0f} us per poll, {r['polls_per_s']:.2f} polls/s)  vs idle poller "
            f"{1e3 * r['idle_cpu_per_s']:.3f} ms/s ({r['cpu_per_s'] / max(r['idle_cpu_per_s'], 1e-9):.1f}x)"
        )
    print("all targets met" if ok else "TARGET MISSED")


if __name__ == "__main__":
    main()

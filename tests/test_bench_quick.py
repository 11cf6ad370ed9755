"""Every benchmark script (bench/*.py) runs in its --quick mode: tiny models, few repeats, seconds each.

The benches rot unnoticed otherwise (a renamed module, a family without a bundled model): each one runs here as a
subprocess from the repository root, must exit 0 and must print a ratio line. A new bench is picked up by the glob
and must have ``--quick`` in its argparse. They share one xdist group: they time things, and two at once on a
2-core machine would fight for the CPU.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHES = sorted((ROOT / "bench").glob("*.py"))
TIMEOUT_S = 300
# benches whose quick mode is long by design: the soak drives a real server with three browser sessions for 2 minutes
TIMEOUTS = {"soak": 480}

# what each bench's result line looks like; a bench not named here must print some "1.23x" / "1.23×" ratio
RESULT = {
    "ablation": r"speed-up \d+\.\d+x",
    "attention": r"ours/bertviz = \d+\.\d+x",
    "attribution": r"ours/floor .* = \d+\.\d+x",
    "counterfactuals": r"flips found MLM/HotFlip = \d+\.\d+x",
    "concurrency": r"\| 4, batching on \|.*\(\d+\.\d+×\)",
    "engines": r"fill-mask latency at batch 1.*ours/ORT = \d+\.\d+x",
    "faithfulness": r"faithfulness/attribution = \d+\.\d+x",
    "fill_mask": r"ours/pipeline = \d+\.\d+x",
    "finetune": r"ours/Trainer = \d+\.\d+x",
    "lens": r"lens / fill-mask = \d+\.\d+x",
    "patching": r"exact/attribution = \d+\.\d+x",
    "pretrain": r"bf16 is \d+\.\d+x faster",
    "probes": r"\d+\.\d+x a bare forward",
    "projector": r"payload \d+\.\d+x",
    "quantize": r"int8 speedup +\d+\.\d+x",
    "representations": r"ours/bare forward = \d+\.\d+x",
    "room": r"p95 .*\(\d+\.\d+x baseline\)",
    "sae": r"SAE/PCA-\d+ = \d+\.\d+x",
    "scalar_mix": r"scalar_mix \d+\.\d+x",
    "soak": r"p95 last/first = \d+\.\d+x",
    "scaleout": r"2 replicas / 1 replica = \d+\.\d+x",
    "speed": r"measured speedup \d+\.\d+x",
    "zoo": r"new/old \d+\.\d+x",
}
ANY_RATIO = r"\d+\.\d+\s?[x×]"
# benches that need an optional dependency: (module to import, why the bench is skipped without it)
NEEDS = {"scaleout": ("ray", "ray is not installed (requirements-ray.txt; `make test` installs it)")}


def test_benches_found():
    assert len(BENCHES) >= 17, [b.name for b in BENCHES]


@pytest.mark.xdist_group("bench")
def test_xdist_groups_hold(request):
    """Under `--dist loadgroup` (make test) pytest-xdist adds the group to a grouped test's id, and schedules by it:
    with pytest 9 and pytest-xdist 3.8 the id never changed, so the groups (one local Ray at a time, the benches one
    after another) silently did not hold (requirements-test.txt pins pytest 8 for this)."""
    if not request.config.getoption("loadgroup", default=False):
        pytest.skip("not an xdist worker under --dist loadgroup")
    assert request.node.nodeid.endswith("@bench"), request.node.nodeid


@pytest.mark.xdist_group("bench")  # one at a time, beside the other worker's tests
@pytest.mark.timeout(max(TIMEOUTS.values()) + 60)  # outlasts the subprocess's own timeout, so its output is reported
@pytest.mark.parametrize("bench", BENCHES, ids=[b.stem for b in BENCHES])
def test_bench_quick(bench: Path):
    src = bench.read_text()
    assert "--quick" in src and "add_argument" in src, f"{bench.name} has no --quick option in its argparse"
    need = NEEDS.get(bench.stem)
    if need and importlib.util.find_spec(need[0]) is None:
        pytest.skip(need[1])
    # one torch thread by default (a bench that compares thread counts sets its own): make test runs this beside the
    # other xdist worker's tests on a 2-core machine, where a second thread only spin-waits
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    try:
        run = subprocess.run(
            [sys.executable, str(bench), "--quick"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUTS.get(bench.stem, TIMEOUT_S),
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{bench.name} --quick ran past its time limit; its output so far:\n{e.stdout}\n{e.stderr}")
    out = run.stdout + run.stderr
    assert run.returncode == 0, f"{bench.name} --quick exited {run.returncode}:\n{out[-6000:]}"
    if re.search(r"^bench/\S+ skipped: ", run.stdout, re.M):  # a missing browser or dependency, said by the bench
        pytest.skip(run.stdout.strip().splitlines()[-1])
    pattern = RESULT.get(bench.stem, ANY_RATIO)
    assert re.search(pattern, run.stdout), f"{bench.name} --quick printed no result line /{pattern}/:\n{out[-6000:]}"

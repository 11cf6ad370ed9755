#!/usr/bin/env bash
# The GPU check (issue 22): everything about EncoderLab's GPU path that a CPU machine cannot check, in one run of
# under 10 minutes on one GPU, ending in ONE summary table. Run it from the repository root on a GPU machine:
#
#   bash scripts/gpu_check.sh             # installs .venv first if needed (make install + the test requirements)
#   bash scripts/gpu_check.sh --dry-run   # prints what it would run; works anywhere, runs nothing on a GPU
#   bash scripts/gpu_check.sh --zoo       # instead: retrain the four bundled minis on the GPU (bf16), a longer
#                                         # schedule than the CPU's (ZOO_SCALE x every stage's steps, default 2, at
#                                         # batch ZOO_BATCH, default 64) into runs/gpu-check/zoo, then one table of
#                                         # their probe, held-out and NSP/SOP numbers against the committed cards.
#                                         # ZOO_EXPORT=DIR also writes each model's files there in 15 MiB parts
#                                         # (`cat model.safetensors.part-* > model.safetensors` joins them).
#   bash scripts/gpu_check.sh --zh        # instead: rebuild the Chinese-capable xlmr-e5-small by its recipe on the GPU
#                                         # (bf16; ZH_STEPS scales the schedule, default the recipe's own) into
#                                         # runs/gpu-check/xlmr-e5-small, its card measured on the CPU, then one row
#                                         # against the committed card. ZOO_EXPORT=DIR exports it as for --zoo.
#
# Steps: the environment (nvidia-smi, torch's CUDA build), the tests marked gpu (memory back at its baseline after
# a finished / cancelled / failed fine-tune, out of memory, a bf16 fine-tune, two seeded fine-tunes interleaved,
# the CUDA generator in checkpoints, one model for "auto" and "cuda"), the fill-mask, attribution and fine-tune
# benchmarks on CUDA (each side at the same precision), two users at once on one GPU (a fine-tune and
# fill-mask on the shared model), many sessions on one GPU, and scale-out on Ray (1 against 2 model replicas
# sharing the GPU, and the Ray path's cost for one call). Logs: runs/gpu-check/<step>.log. Exit status: 0 when
# every step passed, 1 when one failed, 2 when there is no usable CUDA device.
set -uo pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
ZOO=0
ZH=0
case "${1:-}" in
  --dry-run) DRY_RUN=1 ;;
  --zoo) ZOO=1 ;;
  --zh) ZH=1 ;;
  "") ;;
  *) echo "usage: bash scripts/gpu_check.sh [--dry-run | --zoo | --zh]" >&2; exit 64 ;;
esac

VENV=${VENV:-.venv}
PY="$VENV/bin/python"
LOGS=${GPU_CHECK_LOGS:-runs/gpu-check}
RESULTS="$LOGS/summary.tsv"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
T0=$(date +%s)
mkdir -p "$LOGS"
: > "$RESULTS"

record() {  # step, status, detail, seconds
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$RESULTS"
}

summary() {
  local total=$(( $(date +%s) - T0 ))
  echo
  echo "== EncoderLab GPU check: summary ($(date -u '+%Y-%m-%d %H:%M UTC'), ${total}s in all) =="
  "${PY_FOR_TABLE:-python3}" - "$RESULTS" <<'PY'
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
head = ("step", "result", "measured / detail", "s")
w = [max(len(r[i]) for r in rows + [list(head)]) for i in range(4)]
w[2] = min(w[2], 110)
line = "+-" + "-+-".join("-" * x for x in w) + "-+"
print(line)
print("| " + " | ".join(h.ljust(x) for h, x in zip(head, w)) + " |")
print(line)
for r in rows:
    detail = r[2]
    chunks = [detail[i:i + w[2]] for i in range(0, len(detail), w[2])] or [""]
    for k, c in enumerate(chunks):
        cells = (r[0], r[1], c, r[3]) if k == 0 else ("", "", c, "")
        print("| " + " | ".join(str(v).ljust(x) for v, x in zip(cells, w)) + " |")
print(line)
PY
}

# run_step NAME LIMIT_S CMD...: runs CMD with a time limit, its output in $LOGS/NAME.log; sets STEP_RC, STEP_S
run_step() {
  local name=$1 limit=$2
  shift 2
  local t=$(date +%s)
  echo "-- $name (at most ${limit}s): $*"
  timeout --kill-after=10 "$limit" "$@" > "$LOGS/$name.log" 2>&1
  STEP_RC=$?
  STEP_S=$(( $(date +%s) - t ))
  if [ "$STEP_RC" = 124 ] || [ "$STEP_RC" = 137 ]; then
    echo "   timed out after ${limit}s (log: $LOGS/$name.log)"
  else
    echo "   exit $STEP_RC in ${STEP_S}s (log: $LOGS/$name.log)"
  fi
}

status_of() { if [ "$1" = 0 ]; then echo PASS; elif [ "$1" = 124 ] || [ "$1" = 137 ]; then echo TIMEOUT; else echo FAIL; fi; }

# The last line of a log matching a pattern (for the table), or a placeholder.
grab() { grep -E "$2" "$LOGS/$1.log" 2>/dev/null | tail -n 1 | sed -E 's/^[[:space:]]+//' || true; }

STEPS=(
  "environment: nvidia-smi, torch's CUDA build, the device"
  "gpu tests: pytest -m gpu (memory release, OOM, bf16 fine-tune, two seeded runs interleaved, CUDA RNG, one model for auto/cuda)"
  "bench fill-mask on CUDA: BENCH_DEVICE=cuda:0 bench/fill_mask.py (ours and the pipeline, fp32 both; cuda:0 is timed with a synchronize too)"
  "bench attribution on CUDA: BENCH_DEVICE=cuda bench/attribution.py (LayerIG vs its floor, fp32 both)"
  "bench engines on CUDA: bench/engines.py --device cuda (fill-mask, 1 text and 32 x 128: ours fp32 against ours bf16 with SDPA, top-1 agreement; ONNX Runtime's CUDA provider where installed)"
  "bench fine-tune on CUDA: bench/finetune.py (ours vs Trainer at fp32, then at bf16; bert-base bf16 vs fp32)"
  "two users on one GPU: a fine-tune and fill-mask on the shared model at once, each equal to its solo run"
  "many sessions on one GPU: bench/concurrency.py --device cuda --n 1,8,50 --base-size (target: p95 at N=50 <= 2x a lone caller)"
  "scale-out on Ray, one GPU: bench/scaleout.py --device cuda (2 replicas at replica_gpus=0.5 vs 1 at 1: target >= 1.6x throughput; one call: ray <= 1.5x in-process + 5 ms)"
)

if [ "$DRY_RUN" = 1 ]; then
  echo "dry run: the GPU check would run these steps (nothing is run on a GPU):"
  for s in "${STEPS[@]}"; do echo "  - $s"; done
  if [ -x "$PY" ]; then
    PY_FOR_TABLE="$PY"
    "$PY" -c "import torch; print(f'torch {torch.__version__}, CUDA build {torch.version.cuda}, cuda available: {torch.cuda.is_available()}')"
    "$PY" -m core.models.devices
    n=$("$PY" -m pytest -q -m gpu --collect-only -p no:cacheprovider tests 2>/dev/null | grep -c '::' || true)
    record "gpu tests (collected)" "DRY" "$n tests marked gpu collected" 0
  else
    echo "  ($VENV is missing: the real run creates it with 'make install' and installs requirements-test.txt)"
  fi
  for s in "${STEPS[@]}"; do record "${s%%:*}" "NOT RUN" "dry run" 0; done
  summary
  exit 0
fi

# ---------------------------------------------------------------------------------------------- 0. the venv
if ! [ -x "$PY" ] || ! "$PY" -c "import pytest, torch, transformers" 2>/dev/null; then
  echo "-- installing $VENV (make install, then requirements-test.txt)"
  make install VENV="$VENV" && "$VENV/bin/pip" install -q -r requirements-test.txt || {
    echo "installing $VENV failed" >&2; exit 1; }
fi
PY_FOR_TABLE="$PY"

# ---------------------------------------------------------------------------------------------- 1. environment
t=$(date +%s)
smi=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
env_line=$("$PY" - <<'PY' 2>&1
import torch
ok = torch.cuda.is_available()
name = torch.cuda.get_device_name(0) if ok else "-"
print(f"torch {torch.__version__} (CUDA build {torch.version.cuda}); cuda available: {ok}; device 0: {name}; "
      f"bf16: {ok and torch.cuda.is_bf16_supported()}")
PY
)
if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"; then
  diag=$("$PY" -m core.models.devices 2>&1 | tail -n 1)
  echo "no CUDA: torch cannot use a GPU here. $env_line. nvidia-smi: ${smi:-not found}. $diag" >&2
  record "environment" "FAIL" "no CUDA: $env_line; nvidia-smi: ${smi:-not found}; $diag" $(( $(date +%s) - t ))
  summary
  exit 2
fi
record "environment" "PASS" "nvidia-smi: $smi; $env_line" $(( $(date +%s) - t ))

# ---------------------------------------------------------------------------------------- the Chinese model (--zh)
if [ "$ZH" = 1 ]; then
  ZH_OUT="$LOGS/xlmr-e5-small"
  rm -rf "$ZH_OUT" "$LOGS/zh-work"
  run_step zh "${ZH_LIMIT:-560}" "$PY" -m core.train.pretrain chinese --device cuda --work "$LOGS/zh-work" \
    --out "$ZH_OUT" ${ZH_STEPS:+--steps "$ZH_STEPS"}
  "$PY" - "$ZH_OUT" "$RESULTS" "$STEP_S" "$(status_of $STEP_RC)" <<'PY'
"""One row: the GPU-built model's card (measured on the CPU) beside the committed one."""
import json
import sys
from pathlib import Path

out, results, secs, status = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
path = out / "encoderlab_card.json"
old = json.loads(Path("assets/models/xlmr-e5-small/encoderlab_card.json").read_text())


def nums(c):
    z, h = c["probe_zh"], c.get("heldout_zh_everyday", {})
    return f"Chinese probe {z['top1']:.1%} / {z['top5']:.1%}, everyday held-out top-5 {h.get('mlm_top5', float('nan')):.1%}"


if path.exists():
    new = json.loads(path.read_text())
    t = new["training"]
    row = ("zh: xlmr-e5-small", status, f"GPU ({t['wall_s'] / 60:.1f} min, {t['steps']} steps, bf16 {t['bf16']}): "
           f"{nums(new)}; committed: {nums(old)}", secs)
else:
    row = ("zh: xlmr-e5-small", status, "no card written: see zh.log", secs)
with open(results, "a") as f:
    f.write("\t".join(row) + "\n")
PY
  if [ -n "${ZOO_EXPORT:-}" ]; then
    mkdir -p "$ZOO_EXPORT/xlmr-e5-small"
    for f in "$ZH_OUT"/*; do [ -f "$f" ] && split -b 15M -d "$f" "$ZOO_EXPORT/xlmr-e5-small/$(basename "$f").part-"; done
  fi
  summary
  exit $(( STEP_RC != 0 ))
fi

# ---------------------------------------------------------------------------------------------- the zoo (--zoo)
if [ "$ZOO" = 1 ]; then
  ZOO_OUT="$LOGS/zoo"
  rm -rf "$ZOO_OUT" && mkdir -p "$ZOO_OUT"
  run_step zoo "${ZOO_LIMIT:-560}" "$PY" -m core.train.pretrain zoo --out "$ZOO_OUT" --scale "${ZOO_SCALE:-2}" \
    --batch-size "${ZOO_BATCH:-64}" --threads 4
  "$PY" - "$ZOO_OUT" "$RESULTS" "$STEP_S" "$(status_of $STEP_RC)" <<'PY'
"""One row per retrained mini: its card's numbers beside the committed card's (assets/models)."""
import json
import sys
from pathlib import Path

out, results, secs, status = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
rows = []
for card_path in sorted(out.glob("*/encoderlab_card.json")):
    new = json.loads(card_path.read_text())
    old_path = Path("assets/models") / card_path.parent.name / "encoderlab_card.json"
    old = json.loads(old_path.read_text()) if old_path.exists() else {}

    def nums(c):
        h, p = c.get("heldout", {}), c.get("probe", {})
        pair = f", pair {h['pair_acc']:.1%}" if "pair_acc" in h else ""
        return f"probe top-5 {p.get('top5', float('nan')):.1%}, held-out top-5 {h.get('mlm_top5', float('nan')):.1%}{pair}"

    t = new.get("training", {})
    rows.append((f"zoo: {card_path.parent.name}", "PASS",
                 f"GPU ({t.get('hardware', '?')}, {t.get('wall_s', 0) / 60:.1f} min, {t.get('steps')} steps x "
                 f"{t.get('batch_size')}): {nums(new)}; committed (CPU): {nums(old)}", ""))
with open(results, "a") as f:
    for r in rows or [("zoo", status, "no card written: see zoo.log", secs)]:
        f.write("\t".join(r) + "\n")
PY
  if [ -n "${ZOO_EXPORT:-}" ]; then
    for d in "$ZOO_OUT"/*/; do
      n=$(basename "$d"); mkdir -p "$ZOO_EXPORT/$n"
      for f in "$d"*; do [ -f "$f" ] && split -b 15M -d "$f" "$ZOO_EXPORT/$n/$(basename "$f").part-"; done
    done
  fi
  summary
  if grep -qP '\t(FAIL|TIMEOUT)\t' "$RESULTS"; then exit 1; fi
  exit 0
fi

# ---------------------------------------------------------------------------------------------- 2. gpu tests
run_step gpu_tests 300 "$PY" -m pytest -q -s -rA -m gpu -p no:cacheprovider tests
counts=$(grep -E "[0-9]+ (passed|failed)" "$LOGS/gpu_tests.log" | tail -n 1 | sed -E 's/=//g; s/^ +| +$//g')
record "gpu tests (pytest -m gpu)" "$(status_of $STEP_RC)" "${counts:-no pytest summary: see log}" "$STEP_S"

test_row() {  # table row for one gpu test: PASS/FAIL from pytest's -rA lines, plus what it printed
  local label=$1 test=$2 printed=$3
  local st="NOT RUN"
  grep -qE "^PASSED .*::$test" "$LOGS/gpu_tests.log" && st=PASS
  grep -qE "^(FAILED|ERROR) .*::$test" "$LOGS/gpu_tests.log" && st=FAIL
  grep -qE "^SKIPPED .*$test" "$LOGS/gpu_tests.log" && st=SKIP
  local detail
  detail=$(grep -E "$printed" "$LOGS/gpu_tests.log" | sed -E 's/^[[:space:]]+//' | paste -sd ';' -)
  record "$label" "$st" "${detail:-(see gpu_tests.log)}" ""
}
test_row "  memory release" "test_gpu_memory_is_back_at_its_baseline_after_a_finetune" "memory_allocated\(\)"
test_row "  out of memory" "test_gpu_out_of_memory_gives_the_memory_back" "Out of memory|GiB free"
test_row "  bf16 fine-tune" "test_bf16_finetune_on_the_gpu_learns" "bf16 fine-tune on"
test_row "  two seeded fine-tunes at once" "test_two_seeded_gpu_finetunes_interleaved_in_threads_match_each_alone" "^$^"
test_row "  CUDA RNG in checkpoints" "test_gpu_pretrain_checkpoint_restores_the_cuda_stream" "^$^"
test_row "  auto and cuda: one model" "test_auto_and_cuda_load_one_model_on_the_gpu" "^$^"

# ---------------------------------------------------------------------------------------------- 3-5. benchmarks
run_step bench_fill_mask 180 env BENCH_DEVICE=cuda:0 BENCH_ROUNDS=5 "$PY" bench/fill_mask.py
record "bench fill-mask (cuda, fp32)" "$(status_of $STEP_RC)" \
  "$(grab bench_fill_mask 'ours/pipeline' | head -c 80); $(grab bench_fill_mask 'ours/bare encoder' | head -c 80); $(grab bench_fill_mask 'batch of 64 / ours one')" "$STEP_S"

run_step bench_attribution 120 env BENCH_DEVICE=cuda BENCH_ROUNDS=5 "$PY" bench/attribution.py
record "bench attribution (cuda, fp32)" "$(status_of $STEP_RC)" \
  "$(grab bench_attribution 'ours/floor'); $(grab bench_attribution 'ours/captum')" "$STEP_S"

run_step bench_engines 180 "$PY" bench/engines.py --device cuda --rounds 5
record "bench engines (cuda, fp32 vs bf16)" "$(status_of $STEP_RC)" \
  "$(grab bench_engines '^\| fill-mask, 1 text' | cut -d'|' -f3-6); $(grab bench_engines '^\| fill-mask, 32' | cut -d'|' -f3-6)" "$STEP_S"

run_step bench_finetune 300 "$PY" bench/finetune.py --rounds 2 --steps 12 --precisions fp32,bf16
record "bench fine-tune (cuda)" "$(status_of $STEP_RC)" \
  "$(grab bench_finetune '^\[cuda fp32\] ours/Trainer' | cut -d'(' -f1); $(grab bench_finetune '^\[cuda bf16\] ours/Trainer' | cut -d'(' -f1); $(grep -E 'bert-base size' "$LOGS/bench_finetune.log" | paste -sd ';' -)" "$STEP_S"

# ---------------------------------------------------------------------------------------------- 6. two users
run_step two_users 180 "$PY" - <<'PY'
"""Two users on one GPU, as two sessions of one server: user A fine-tunes the bundled BERT on CUDA while user B
runs fill-mask on the shared cached model. Each must get what it gets alone; the GPU memory of A's run is back
afterwards."""
import gc
import sys
import threading
import time

import numpy as np
import torch

sys.path.insert(0, ".")
from core.data.datasets_local import load_bundled
from core.predict.fill_mask import FillMaskConfig, examples, fill_mask
from core.train.finetune import train
from core.train.finetune_config import FinetuneConfig
from core.models.loading import ModelSpec, load
from core.registry import bundled_id

lm = load(ModelSpec("bert", bundled_id("bert"), "cuda"), "mlm")  # the app's shared model
texts = [s for s in examples("en") if "[MASK]" in s][:6]


def predict():
    return [[(c.token_id, c.prob) for c in fill_mask(lm, FillMaskConfig(s, top_k=5)).masks[0].candidates] for s in texts]


solo_b = predict()
data = load_bundled("drugreview").subset(256, 64)
cfg = FinetuneConfig("bert", bundled_id("bert"), max_steps=40, batch_size=16, max_length=128, device="cuda",
                     precision="bf16", patience=0, seed=1)
solo_a = train(cfg, data, "runs/gpu-check/two-users/solo")


def allocated():  # tensors on the GPU, less cuBLAS's per-thread workspaces (kept for good by design)
    torch.cuda.synchronize()
    gc.collect()
    torch._C._cuda_clearCublasWorkspaces()
    return torch.cuda.memory_allocated()


base = allocated()

out, errors = {}, []


def user_a():
    try:
        out["a"] = train(cfg, data, "runs/gpu-check/two-users/together")
    except Exception as e:  # noqa: BLE001
        errors.append(e)


t = threading.Thread(target=user_a)
t.start()
calls, mismatches, t0 = 0, 0, time.time()
while t.is_alive() or calls == 0:
    got = predict()
    calls += 1
    for g, s in zip(got, solo_b):
        if [i for i, _ in g] != [i for i, _ in s] or not np.allclose([p for _, p in g], [p for _, p in s], atol=1e-4):
            mismatches += 1
t.join()
after = allocated()
assert not errors, errors
a = out["a"]
same_a = np.allclose([h["loss"] for h in a.history], [h["loss"] for h in solo_a.history], atol=2e-2)
print(f"user B: {calls} fill-mask rounds ({calls * len(texts)} calls) during user A's bf16 fine-tune, "
      f"{mismatches} differing from solo; user A: {a.steps} steps, accuracy {a.accuracy:.3f} "
      f"(solo {solo_a.accuracy:.3f}), losses as solo: {same_a}; memory_allocated {base} B before, {after} B after")
sys.exit(0 if mismatches == 0 and same_a and after == base else 1)
PY
record "two users on one GPU" "$(status_of $STEP_RC)" "$(grab two_users 'user B:')" "$STEP_S"

# ---------------------------------------------------------------------------------------------- 7. many sessions
run_step concurrency 240 "$PY" bench/concurrency.py --device cuda --n 1,8,50 --rounds 10 --base-size
record "50 sessions on one GPU (bert-base size)" "$(status_of $STEP_RC)" \
  "$(grab concurrency '^\| 50, batching on' | cut -d'|' -f2-5)" "$STEP_S"

# ---------------------------------------------------------------------------------------------- 8. scale-out on Ray
run_step scaleout 300 "$PY" bench/scaleout.py --device cuda --json "$LOGS/scaleout.json"
record "scale-out on Ray, one GPU (bert-mini)" "$(status_of $STEP_RC)" \
  "$(grab scaleout '^ *1 replica [0-9.]+ requests/s, 2 replicas'); $(grab scaleout '^ *scale-out:'); $(grab scaleout '^ *overhead:')" "$STEP_S"

summary
if grep -qP '\t(FAIL|TIMEOUT)\t' "$RESULTS"; then exit 1; fi
exit 0

"""The bundled minis against an earlier version of themselves (issue #16): the everyday-English probe and the
held-out metrics, measured the same way on both.

    .venv/bin/python bench/zoo.py [--baseline REV] [--only bert-mini ...] [--quick]

Baseline: the bundled models at git revision REV (default: the last commit before the newest one that changed a
bundled model's weights), taken out with `git archive` into a temporary folder. Both versions go through
core.train.pretrain.zoo.measure: each model on its own tokenization, its held-out instances built with its own run's
settings and one fixed seed, the probe through Fill-mask. Prints each number for both and the ratio new / old;
the held-out split heldout.txt is the same file for both (the first three sources'), so "held-out must not fall"
reads off the ratio directly. The probe's reference (the offline MiniLM with a fresh MLM head) is printed too.
``--quick``: the first bundled model only, against the committed models (HEAD; the checkout itself when git cannot
give them), so the ratios are ~1.00x unless assets/models is modified; held-out on the first 40 held-out documents
with the unigram baseline from those (core's measure tokenizes the whole training corpus for it: minutes), no
everyday held-out split; the probe as in the full run (tests/test_bench_quick.py runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from core.data.corpus import CORPUS_DIR, HELDOUT_FILE, load_documents  # noqa: E402
from core.models.loading import ModelSpec, load  # noqa: E402
from core.predict.everyday_probe import score  # noqa: E402
from core.registry import FAMILIES  # noqa: E402
from core.train.pretrain.data import make_instances, tokenize_documents  # noqa: E402
from core.train.pretrain.evaluate import evaluate, unigram_top  # noqa: E402
from core.train.pretrain.train import LOG_FILE  # noqa: E402
from core.train.pretrain.zoo import HELDOUT_SEED, RECIPES, measure, probe_reference  # noqa: E402


def default_baseline() -> str:
    """The commit before the newest change to a bundled model's weights."""
    out = subprocess.run(
        ["git", "log", "-2", "--format=%H", "--", "assets/models/*/model.safetensors"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if len(out) < 2:
        raise SystemExit("No earlier version of the bundled weights in this checkout's history: pass --baseline.")
    return out[0] + "~1"


def extract(rev: str, dest: Path) -> Path:
    raw = subprocess.run(
        ["git", "archive", "--format=tar", rev, "assets/models"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(raw)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "assets" / "models"


def quick_measure(folder: Path, family: str, docs: int = 40) -> dict:
    """core.train.pretrain.zoo.measure on a slice, for --quick: held-out instances of the first ``docs`` held-out
    documents (built as measure builds them), the unigram baseline from those same instances, and the probe."""
    loaded = load(ModelSpec(family, str(folder), device="cpu"), task="pretraining")
    cfg_d = json.loads((folder / LOG_FILE).read_text())["config"]
    held = load_documents(CORPUS_DIR / HELDOUT_FILE)[:docs]
    kw = dict(pair=cfg_d.get("pair_objective"), max_len=cfg_d["max_len"], use_types=FAMILIES[family].token_types)
    inst = make_instances(tokenize_documents(held, loaded.tokenizer, family), loaded.tokenizer, seed=HELDOUT_SEED, **kw)
    ev = evaluate(loaded.model, family, loaded.tokenizer, inst, unigram_top(inst, loaded.tokenizer))
    return {"heldout": ev, "heldout_everyday": None, "probe": score(loaded)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default=None, help="git revision of the baseline models")
    ap.add_argument("--only", nargs="*", default=list(RECIPES), choices=list(RECIPES))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="the first model against HEAD's copy: seconds")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.quick:
        a.only = a.only[:1]
    rev = a.baseline or ("HEAD" if a.quick else default_baseline())
    ref = probe_reference()
    print(f"baseline: the bundled models at {rev}; new: assets/models in this checkout")
    print(f"probe reference: {ref['label']}: top-1 {ref['top1']:.1%}, top-5 {ref['top5']:.1%}")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            old_root = extract(rev, Path(tmp))
        except (OSError, subprocess.CalledProcessError) as e:
            if not a.quick:
                raise
            print(f"(git gave no models at {rev}: {e}; --quick compares the checkout with itself)")
            old_root = ROOT / "assets" / "models"
        for name in a.only:
            family = RECIPES[name]["family"]
            t = time.perf_counter()
            rows = []
            for root in (old_root, ROOT / "assets" / "models"):
                m = quick_measure(root / name, family) if a.quick else measure(root / name, family)
                h, e, p = m["heldout"], m["heldout_everyday"], m["probe"]
                rows.append(
                    {
                        "probe top-1": p.top1,
                        "probe top-5": p.topk,
                        "held-out top-1": h["mlm_top1"],
                        "held-out top-5": h["mlm_top5"],
                        "everyday held-out top-5": e["mlm_top5"] if e else float("nan"),
                        **(
                            {"pair accuracy": h["pair_acc"], "pair majority": h["pair_majority"]}
                            if "pair_acc" in h
                            else {}
                        ),
                    }
                )
            print(f"\n{name} ({time.perf_counter() - t:.0f} s)")
            for k in rows[0]:
                o, n = rows[0][k], rows[1][k]
                ratio = f"{n / o:.2f}x" if o == o and o > 0 else "-"
                print(f"  {k:24s} old {o:7.1%}   new {n:7.1%}   new/old {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Short fine-tunes for text classification: one linear, step-commented training function on `accelerate`.

The command line of core.train.finetune.train (that module holds the loop).

Command line::

    python -m core.train.finetune_cli --family bert --checkpoint /path/to/model --data drugreview --epochs 2 --out runs/x

Several processes: ``accelerate launch --multi_gpu --num_processes 2 -m core.train.finetune_cli ... --device cpu``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from core.base.fields import add_argument
from core.data.datasets_local import BUNDLED, from_table, load_bundled, read_table
from core.data.token_data import load_bundled_tokens, read_tokens
from core.registry import FAMILIES
from core.train.finetune import StepInfo, train
from core.train.finetune_config import POOLINGS, PRECISIONS, TASKS, FinetuneConfig, FinetuneError


def _load_data(args):
    if args.task == "token":
        path = Path(args.data)
        data = (
            load_bundled_tokens()
            if args.data in ("tokens", "drugreview")
            else read_tokens(path.read_bytes(), path.name)
        )
        return data.subset(args.train_rows, args.test_rows) if (args.train_rows or args.test_rows) else data
    if args.data in BUNDLED:
        data = load_bundled(args.data)
    else:
        path = Path(args.data)
        df = read_table(path.read_bytes(), path.name)
        data = from_table(df, args.text_col, args.label_col, args.text_col_b, name=path.name)
    if args.train_rows or args.test_rows:
        data = data.subset(args.train_rows, args.test_rows)
    return data


def parser() -> argparse.ArgumentParser:
    """The command line's arguments (numeric ones take their defaults and ranges from FinetuneConfig's fields)."""
    ap = argparse.ArgumentParser(prog="python -m core.train.finetune_cli", description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", required=True, choices=list(FAMILIES))
    ap.add_argument("--checkpoint", required=True, help="Hub id, encoderlab/<name> or a local folder")
    ap.add_argument(
        "--data",
        default="drugreview",
        help="a bundled set (drugreview, wordnet; tokens for --task token) "
        "or a .csv/.tsv/.jsonl file (.conll/.iob/.jsonl for --task token)",
    )
    ap.add_argument("--text-col", default="text")
    ap.add_argument("--text-col-b", default=None)
    ap.add_argument("--label-col", default="label")
    ap.add_argument("--train-rows", type=int, default=0)
    ap.add_argument("--test-rows", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--resume", action="store_true")
    # defaults and ranges from FinetuneConfig's fields (core.base.fields): argparse refuses an out-of-range value itself
    add_argument(ap, FinetuneConfig, "lr", help="None: 3e-5, or 5e-5 for --task token")
    for f in (
        "epochs",
        "max_steps",
        "batch_size",
        "max_length",
        "warmup_ratio",
        "weight_decay",
        "grad_clip",
        "seed",
        "freeze_layers",
        "patience",
        "evals_per_epoch",
    ):
        add_argument(ap, FinetuneConfig, f)
    for f, choices in (
        ("pooling", POOLINGS),
        ("device", ("auto", "cpu", "cuda")),
        ("precision", PRECISIONS),
        ("task", TASKS),
    ):
        add_argument(ap, FinetuneConfig, f, choices=choices)
    ap.add_argument("--freeze-embeddings", action="store_true")
    ap.add_argument("--gradient-checkpointing", action="store_true")
    add_argument(ap, FinetuneConfig, "dropout", help="encoder + head dropout; None: the checkpoint's")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    try:
        cfg = FinetuneConfig(
            args.family,
            args.checkpoint,
            **{
                k: getattr(args, k)
                for k in (
                    "epochs",
                    "max_steps",
                    "lr",
                    "batch_size",
                    "max_length",
                    "warmup_ratio",
                    "weight_decay",
                    "grad_clip",
                    "seed",
                    "freeze_embeddings",
                    "freeze_layers",
                    "pooling",
                    "patience",
                    "evals_per_epoch",
                    "device",
                    "precision",
                    "task",
                    "gradient_checkpointing",
                    "dropout",
                )
            },
        )
        data = _load_data(args)
    except ValueError as e:
        ap.error(str(e))

    def show(info: StepInfo) -> None:
        print(info.message(), flush=True)

    try:
        r = train(cfg, data, args.out, on_step=show, resume=args.resume)
    except (ValueError, FinetuneError) as e:
        print(f"error: {e}", flush=True)
        return 2
    # initialised by train()'s Accelerator (multi-CPU under `accelerate launch`)
    from accelerate import PartialState  # lazy: accelerate loads torch

    if PartialState().is_main_process:
        extra = {} if r.token_metrics is None else dict(entity_f1=round(r.token_metrics.f1, 4))
        if r.layer_weights is not None:
            extra["layer_weights"] = [round(w, 4) for w in r.layer_weights]
        outline = {}  # the data map's outline (core.train.datamap), last on the line
        if r.data_map is not None:
            dm = r.data_map
            outline["data_map"] = dict(
                epochs=dm.epochs,
                examples=len(dm),
                min_confidence=round(float(dm.confidence.min()), 4),
                regions=dm.region_counts(),
            )
        print(
            json.dumps(
                dict(
                    **extra,
                    accuracy=round(r.accuracy, 4),
                    macro_f1=round(r.macro_f1, 4),
                    majority_rate=round(r.majority_rate, 4),
                    steps=r.steps,
                    stop=r.stop_reason,
                    samples_per_s=round(r.samples_per_s, 2),
                    processes=_num_processes(),
                    model_dir=r.model_dir,
                    **outline,
                )
            ),
            flush=True,
        )
    return 0


def _num_processes() -> int:
    from accelerate import PartialState  # lazy: accelerate loads torch

    return PartialState().num_processes


if __name__ == "__main__":
    raise SystemExit(main())

"""Fine-tuning throughput: core.train.finetune.train against transformers' Trainer, same model, data and settings.

    .venv/bin/python bench/finetune.py [--rows 320] [--rounds 3] [--steps 12] [--max-length 128] [--hidden 128] [--layers 4]
                                       [--parts seq,token,ckpt,map] [--quick]

Prints samples/s for both and the ratio ("ours/Trainer"), then the padding that dynamic padding and length-grouped
batches save on the bundled drug reviews (variable length). The model is a small BERT (real bert-base-uncased
WordPiece vocab, random weights): throughput does not depend on what the weights mean, and a small model keeps
this to a couple of minutes on a CPU. Both sides run at the same precision, printed on every line: fp32 on a
CPU; on a GPU fp32 and then bf16 autocast (Trainer's bf16=True against ours with precision "bf16"). accelerate
keeps one device/precision state per process, which Trainer and ours both build on: it is reset before every
run, and each line prints the precision the run really used. On a GPU it also compares bf16 with fp32 for a
bert-base-size model (samples/s, peak memory).

Three more parts (``--parts seq,token,ckpt,map``, all by default):
- token: a token-classification fine-tune (task "token", the bundled tagged sample) against transformers' Trainer
  with ``DataCollatorForTokenClassification``, the same model, data, labels aligned the same way (first piece of
  each word labelled, the rest -100: core.data.token_data.align_batch), batch, schedule, clipping and precision.
  Target: ours/Trainer >= 1.0x.
- ckpt: gradient checkpointing on against off, each run in a fresh process (core.train.remedies): peak memory (the
  process's peak RSS on a CPU, minus what it held before training; max_memory_allocated on a GPU) and steps/s,
  printed as ratios to the run without it. A BERT 4x256 at max length 256 on the drug reviews, so that activations
  (what checkpointing saves) are a real share of the memory.
- map: the data map (core.train.datamap: each training example's gold-label probability from the training forward,
  every epoch) recorded against the same run without it (``FinetuneConfig.data_map`` off, the baseline): two whole
  epochs (the epoch-end merge timed too) on half the seq part's rows, the same model and settings, in alternating
  rounds; training seconds per run and the ratio, and the recorder's own calls timed inside the recording runs (the
  two runs' difference on a shared CPU is mostly load). Target: recording costs at most 10% (with/without <= 1.10x).

``--quick``: every part, small: a BERT 1x32, 32 rows, 1 round of 2 steps, max length 64; the checkpointing part on a
BERT 2x32 at max length 64, 2 steps per run; the map part one round of 2 epochs of 1 step; no GPU bert-base part
(seconds; tests/test_bench_quick.py runs it).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def fresh_accelerate_state() -> None:
    """Forget accelerate's process-wide state, so the next run sets its own device and precision (a Trainer
    after a bf16 run would otherwise inherit bf16, or raise)."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)


def precision_of(mixed_precision: str) -> str:
    return {"no": "fp32", "bf16": "bf16", "fp16": "fp16"}[str(mixed_precision)]


def trainer_samples_per_s(folder: Path, data, cfg, group_by_length: bool, out: Path) -> tuple[float, str]:
    """transformers.Trainer with the same model, data, batch size, lr schedule, decay, clipping and precision;
    returns (samples/s, the precision its accelerator used)."""
    import transformers
    from torch.utils.data import Dataset

    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.BertForSequenceClassification.from_pretrained(
        str(folder), num_labels=data.num_labels, ignore_mismatched_sizes=True
    )
    enc = tok(list(data.train.texts), truncation=True, max_length=cfg.max_length)

    class DS(Dataset):
        def __len__(self):
            return len(data.train)

        def __getitem__(self, i):
            return {
                "input_ids": enc["input_ids"][i],
                "token_type_ids": enc["token_type_ids"][i],
                "attention_mask": enc["attention_mask"][i],
                "labels": data.train.labels[i],
            }

    args = transformers.TrainingArguments(
        output_dir=str(out),
        per_device_train_batch_size=cfg.batch_size,
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps or -1,
        learning_rate=cfg.lr,
        warmup_steps=cfg.warmup_ratio,
        weight_decay=cfg.weight_decay,  # float < 1 = ratio
        max_grad_norm=cfg.grad_clip,
        seed=cfg.seed,
        eval_strategy="no",
        save_strategy="no",
        report_to=[],
        logging_strategy="no",
        use_cpu=cfg.device == "cpu",
        bf16=cfg.precision == "bf16",
        train_sampling_strategy="group_by_length" if group_by_length else "random",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = transformers.Trainer(
        model=model,
        args=args,
        train_dataset=DS(),
        processing_class=tok,
        data_collator=transformers.DataCollatorWithPadding(tok),
    )
    out_ = trainer.train()
    return float(out_.metrics["train_samples_per_second"]), precision_of(trainer.accelerator.mixed_precision)


def trainer_token_samples_per_s(folder: Path, data, cfg, group_by_length: bool, out: Path) -> tuple[float, str]:
    """Trainer + DataCollatorForTokenClassification on the same pre-split sentences, labels aligned as ours."""
    import transformers
    from torch.utils.data import Dataset

    from core.data.token_data import align_batch, words_tokenizer

    tok = words_tokenizer(transformers.AutoTokenizer.from_pretrained(str(folder)))
    model = transformers.BertForTokenClassification.from_pretrained(
        str(folder), num_labels=data.num_labels, ignore_mismatched_sizes=True
    )
    rows = align_batch(tok, data.train.words, data.train.tags, data.label2id, cfg.max_length)
    keys = ("input_ids", "labels", "token_type_ids")

    class DS(Dataset):
        def __len__(self):
            return len(rows)

        def __getitem__(self, i):
            return {k: rows[i][k] for k in keys if k in rows[i]}

    args = transformers.TrainingArguments(
        output_dir=str(out),
        per_device_train_batch_size=cfg.batch_size,
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps or -1,
        learning_rate=cfg.lr,
        warmup_steps=cfg.warmup_ratio,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.grad_clip,
        seed=cfg.seed,
        eval_strategy="no",
        save_strategy="no",
        report_to=[],
        logging_strategy="no",
        use_cpu=cfg.device == "cpu",
        bf16=cfg.precision == "bf16",
        train_sampling_strategy="group_by_length" if group_by_length else "random",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = transformers.Trainer(
        model=model,
        args=args,
        train_dataset=DS(),
        processing_class=tok,
        data_collator=transformers.DataCollatorForTokenClassification(tok),
    )
    out_ = trainer.train()
    return float(out_.metrics["train_samples_per_second"]), precision_of(trainer.accelerator.mixed_precision)


def token_part(folder: Path, device: str, rounds: int, steps: int, tmp: Path) -> None:
    from core.data.token_data import load_bundled_tokens
    from core.train.finetune_config import FinetuneConfig

    data = load_bundled_tokens()
    cfg = FinetuneConfig(
        "bert",
        str(folder),
        task="token",
        epochs=1,
        lr=5e-5,
        batch_size=16,
        max_length=128,
        patience=0,
        device=device,
        precision="fp32",
        max_steps=steps,
    )
    print(
        f"\n# token classification · {data.name}: {len(data.train)} sentences · batch {cfg.batch_size} · "
        f"{steps} steps per round · {device} fp32"
    )
    got: dict[str, list[float]] = {"trainer": [], "trainer_grouped": [], "ours": []}
    for k in range(rounds):
        for name, fn, a in (
            ("trainer", trainer_token_samples_per_s, (folder, data, cfg, False, tmp / f"tt{k}")),
            ("ours", ours_samples_per_s, (cfg, data, tmp / f"ot{k}")),
            ("trainer_grouped", trainer_token_samples_per_s, (folder, data, cfg, True, tmp / f"tg{k}")),
        ):
            sps, used = measured(fn, *a)
            if used != "fp32":
                raise SystemExit(f"precision mismatch: {name} ran in {used}; the comparison is void")
            got[name].append(sps)
    best = {k: max(v) for k, v in got.items()}
    fmt = lambda v: " ".join(f"{x:6.1f}" for x in v)  # noqa: E731
    print(
        f"  Trainer + DataCollatorForTokenClassification                  {fmt(got['trainer'])}   best "
        f"{best['trainer']:6.1f}"
    )
    print(
        f"  Trainer + DataCollatorForTokenClassification, group_by_length {fmt(got['trainer_grouped'])}   best "
        f"{best['trainer_grouped']:6.1f}"
    )
    print(
        f"  core.train.finetune task 'token' (dynamic padding, grouped)          {fmt(got['ours'])}   best "
        f"{best['ours']:6.1f}"
    )
    print(
        f"[token] ours/Trainer = {best['ours'] / best['trainer']:.2f}x (best rounds; target >= 1.0x)   "
        f"ours/Trainer(group_by_length) = {best['ours'] / best['trainer_grouped']:.2f}x"
    )


def checkpointing_part(device: str, tmp: Path, steps: int = 6, quick: bool = False) -> None:
    from core.data.datasets_local import load_bundled
    from core.models.tiny import make_tiny
    from core.train.finetune_config import FinetuneConfig
    from core.train.remedies import measure_remedies

    hidden, layers, max_length, batch = (32, 2, 64, 8) if quick else (256, 4, 256, 16)
    folder = make_tiny(
        "bert", tmp / "ckpt-model", task="base", hidden=hidden, layers=layers, heads=4, ffn=4 * hidden, max_pos=512
    )
    cfg = FinetuneConfig(
        "bert",
        str(folder),
        epochs=1,
        lr=5e-5,
        batch_size=batch,
        max_length=max_length,
        patience=0,
        device=device,
        precision="fp32",
    )
    res = measure_remedies(cfg, load_bundled("drugreview"), steps=steps, names=("gradient_checkpointing",))
    base, ck = res.rows
    for r in (base, ck):
        if r.error:
            raise SystemExit(f"{r.name} failed: {r.error}")
    print(
        f"\n# gradient checkpointing · BERT {layers}x{hidden} · drug reviews, batch {batch}, max length {max_length} · "
        f"{steps} steps per run, "
        f"each in a fresh process · {res.device} · memory: {res.memory_kind}"
    )
    for r in (base, ck):
        extra = f" (training added {r.train_mb:,.0f} MB)" if res.device == "cpu" else ""
        print(f"  {r.name:<24} peak {r.peak_mb:8,.0f} MB{extra} · {r.steps_per_s:6.2f} steps/s")
    print(
        f"[ckpt] checkpointing/off: memory {ck.memory_ratio:.2f}x (of what training added) · speed "
        f"{ck.speed_ratio:.2f}x (baseline: the same run without checkpointing)"
    )


def map_part(data, cfg, rounds: int, tmp: Path) -> None:
    """Training time with the data map recorded against the same run without it (the baseline), best rounds; and
    the recorder's own time inside the runs that record (its calls timed where they happen: on a shared CPU the
    difference of two runs is mostly the load's)."""
    from core.train import finetune as ft

    cfgs = {
        "without": dataclasses.replace(cfg, epochs=2, max_steps=0, data_map=False),
        "with": dataclasses.replace(cfg, epochs=2, max_steps=0, data_map=True),
    }
    spent = [0.0]

    class TimedRecorder(ft.Recorder):
        def record(self, idx, logits, labels) -> None:
            t = time.perf_counter()
            super().record(idx, logits, labels)
            spent[0] += time.perf_counter() - t

        def end_epoch(self, acc):
            t = time.perf_counter()
            try:
                return super().end_epoch(acc)
            finally:
                spent[0] += time.perf_counter() - t

    print(
        f"\n# data map · {len(data.train)} examples · 2 epochs of {-(-len(data.train) // cfg.batch_size)} steps · "
        f"batch {cfg.batch_size} · {cfg.device} · {rounds} rounds, the two runs alternating"
    )
    got: dict[str, list[float]] = {"without": [], "with": []}
    share: list[float] = []
    plain, ft.Recorder = ft.Recorder, TimedRecorder
    try:
        for k in range(rounds):
            for name, c in cfgs.items():
                fresh_accelerate_state()
                spent[0] = 0.0
                r = ft.train(c, data, tmp / f"map-{name}{k}")
                got[name].append(r.train_seconds)
                if name == "with":
                    share.append(spent[0] / r.train_seconds)
                if (r.data_map is not None) != (name == "with"):
                    raise SystemExit(f"the run {name} the data map recorded {r.data_map is not None}")
    finally:
        ft.Recorder = plain
    best = {k: min(v) for k, v in got.items()}
    fmt = lambda v: " ".join(f"{x:6.2f}" for x in v)  # noqa: E731
    print(f"  without the data map (baseline) {fmt(got['without'])} s   best {best['without']:6.2f} s")
    print(f"  with the data map               {fmt(got['with'])} s   best {best['with']:6.2f} s")
    print(f"  the recorder's own calls, share of each recording run's training time: {fmt([100 * x for x in share])} %")
    print(
        f"[map] with/without = {best['with'] / best['without']:.2f}x training time (best rounds; baseline: the same "
        f"run without the data map; target <= 1.10x); the recorder itself {100 * max(share):.2f}% at most"
    )


def ours_samples_per_s(cfg, data, out: Path) -> tuple[float, str]:
    from core.train.finetune import train

    r = train(cfg, data, out)
    return r.samples_per_s, r.precision


def measured(fn, *a) -> tuple[float, str]:
    fresh_accelerate_state()
    return fn(*a)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=320)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--precisions", default="", help="comma-separated: fp32,bf16 (default: fp32 on CPU, both on GPU)")
    ap.add_argument("--skip-gpu-base", action="store_true", help="skip the bert-base-size bf16 vs fp32 part")
    ap.add_argument(
        "--parts",
        default="seq,token,ckpt,map",
        help="seq: sequence classification vs Trainer; token: token classification vs Trainer; "
        "ckpt: gradient checkpointing on vs off; map: the data map recorded vs not",
    )
    ap.add_argument("--quick", action="store_true", help="every part on tiny models, 1 round of 2 steps: seconds")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.rounds, args.steps, args.max_length, args.hidden, args.layers = 32, 1, 2, 64, 32, 1
        args.skip_gpu_base = True
    parts = set(args.parts.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="bench-finetune-"))
    try:
        run(args, parts, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args, parts: set[str], tmp: Path) -> None:
    import torch
    import transformers

    from core.data.datasets_local import load_bundled
    from core.models.tiny import make_tiny
    from core.train.finetune_config import FinetuneConfig
    from core.train.finetune_data import LengthGroupedBatches, padding_saved

    transformers.logging.set_verbosity_error()
    folder = make_tiny(
        "bert",
        tmp / "model",
        task="base",
        hidden=args.hidden,
        layers=args.layers,
        heads=4,
        ffn=4 * args.hidden,
        max_pos=512,
    )
    data = load_bundled("drugreview").subset(args.rows, 16 if args.quick else 64)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    precisions = [p for p in (args.precisions or ("fp32,bf16" if device == "cuda" else "fp32")).split(",") if p]
    cfg = FinetuneConfig(
        "bert", str(folder), epochs=1, lr=5e-5, batch_size=16, max_length=args.max_length, patience=0, device=device
    )
    print(
        f"# fine-tune throughput · BERT {args.layers}x{args.hidden} (bert-base-uncased vocab) · "
        f"{len(data.train)} drug reviews · batch {cfg.batch_size} · max length {cfg.max_length} · "
        f"torch threads {torch.get_num_threads()} · {device} · precision {', '.join(precisions)}"
    )

    # The CPU here is shared, so load swings between runs: alternate the three in rounds of the same step budget
    # and compare each one's best round (the least disturbed), plus the median of the per-round ratios.
    if "token" in parts:
        token_part(folder, device, args.rounds, args.steps, tmp)
    if "ckpt" in parts:
        checkpointing_part(device, tmp, steps=2 if args.quick else 6, quick=args.quick)
    if "map" in parts:  # half the seq part's rows: two whole epochs (the end-of-epoch merge timed too) in seconds
        map_part(data.subset(max(2, len(data.train) // 2)), cfg, args.rounds, tmp)
    if "seq" not in parts:
        return
    for prec in precisions:
        t = time.perf_counter()
        rounds: dict[str, list[float]] = {"trainer": [], "trainer_grouped": [], "ours": []}
        used: dict[str, set[str]] = {k: set() for k in rounds}
        for k in range(args.rounds):
            c = FinetuneConfig(**{**cfg.__dict__, "max_steps": args.steps, "precision": prec})
            for name, fn, a in (
                ("trainer", trainer_samples_per_s, (folder, data, c, False, tmp / f"trainer{prec}{k}")),
                ("ours", ours_samples_per_s, (c, data, tmp / f"ours{prec}{k}")),
                ("trainer_grouped", trainer_samples_per_s, (folder, data, c, True, tmp / f"trainer-g{prec}{k}")),
            ):
                sps, p = measured(fn, *a)
                rounds[name].append(sps)
                used[name].add(p)
        if any(u != {prec} for u in used.values()):  # a run that did not get the precision asked for: say so
            raise SystemExit(f"precision mismatch: asked {prec}, the runs used {used}; the comparison is void")
        best = {k: max(v) for k, v in rounds.items()}
        med = sorted(o / t_ for o, t_ in zip(rounds["ours"], rounds["trainer"]))[len(rounds["ours"]) // 2]
        fmt = lambda v: " ".join(f"{x:6.1f}" for x in v)  # noqa: E731
        tag = f"[{device} {prec}]"
        print(f"{tag} {args.rounds} rounds of {args.steps} steps each, samples/s per round:")
        print(
            f"  {tag} Trainer (dynamic padding)                  {fmt(rounds['trainer'])}   best {best['trainer']:6.1f}"
        )
        print(
            f"  {tag} Trainer (dynamic padding, group_by_length) {fmt(rounds['trainer_grouped'])}   "
            f"best {best['trainer_grouped']:6.1f}"
        )
        print(
            f"  {tag} core.train.finetune (dynamic padding, grouped)   {fmt(rounds['ours'])}   best {best['ours']:6.1f}"
        )
        print(
            f"{tag} ours/Trainer = {best['ours'] / best['trainer']:.2f}x (best rounds; median per-round ratio "
            f"{med:.2f}x)   ours/Trainer(group_by_length) = {best['ours'] / best['trainer_grouped']:.2f}x   "
            f"({time.perf_counter() - t:.0f}s)"
        )

    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    full = load_bundled("drugreview")
    print(
        "\n# padding on variable-length data: all 600 training reviews, batch 16 (share of pad tokens avoided "
        "against padding every batch to max length)"
    )
    for max_len in (128, 256, 512):
        lengths = [len(x) for x in tok(list(full.train.texts), truncation=True, max_length=max_len)["input_ids"]]
        plain = padding_saved(lengths, 16, max_len, group=False)
        grouped = padding_saved(lengths, 16, max_len, group=True)
        real = sum(lengths)
        grouped_tokens = sum(len(b) * max(lengths[i] for i in b) for b in LengthGroupedBatches(lengths, 16, 0))
        print(
            f"max length {max_len:3d}: dynamic padding saves {plain:5.1%}, + length grouping saves {grouped:5.1%} "
            f"(pad share of the grouped batches: {1 - real / grouped_tokens:5.1%})"
        )

    if not torch.cuda.is_available() or args.skip_gpu_base:
        print(
            "\n# GPU bert-base part skipped: "
            + ("asked to" if args.skip_gpu_base else "no CUDA device here")
            + " (on a GPU it compares bf16 with fp32 for a bert-base-size model)."
        )
        return
    print("\n# GPU: bert-base-size (12x768) on 2,000 examples, bf16 autocast vs fp32")
    big = make_tiny("bert", tmp / "base", task="base", hidden=768, layers=12, heads=12, ffn=3072, max_pos=512)
    rows = load_bundled("drugreview")
    texts = (rows.train.texts + rows.test.texts) * 3
    labels = (rows.train.labels + rows.test.labels) * 3
    from core.data.datasets_local import LabelledData, Split

    d2 = LabelledData(
        "drugreview x3", Split(texts[:2000], labels[:2000]), rows.test, rows.label_names, rows.source, rows.licence
    )
    for prec in ("fp32", "bf16"):
        torch.cuda.reset_peak_memory_stats()
        c = FinetuneConfig(
            "bert", str(big), epochs=1, batch_size=32, max_length=256, precision=prec, device="cuda", patience=0
        )
        sps, used = measured(ours_samples_per_s, c, d2, tmp / f"gpu-{prec}")
        print(
            f"[cuda {used}] core.train.finetune bert-base size: {sps:8.1f} samples/s · peak memory "
            f"{torch.cuda.max_memory_allocated() / 2**30:.2f} GiB"
        )


if __name__ == "__main__":
    main()

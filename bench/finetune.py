"""Fine-tuning throughput: core.finetune.train against transformers' Trainer, same model, data and settings.

    .venv/bin/python bench/finetune.py [--rows 320] [--rounds 3] [--steps 12] [--max-length 128] [--hidden 128] [--layers 4]

Prints samples/s for both and the ratio ("ours/Trainer"), then the padding that dynamic padding and length-grouped
batches save on the bundled drug reviews (variable length). The model is a small BERT (real bert-base-uncased
WordPiece vocab, random weights): throughput does not depend on what the weights mean, and a small model keeps
this to a couple of minutes on a CPU. On a GPU it also compares bf16 autocast with fp32 (samples/s, peak memory).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def trainer_samples_per_s(folder: Path, data, cfg, group_by_length: bool, out: Path) -> float:
    """transformers.Trainer with the same model, data, batch size, lr schedule, decay and clipping."""
    import torch
    import transformers
    from torch.utils.data import Dataset

    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.BertForSequenceClassification.from_pretrained(
        str(folder), num_labels=data.num_labels, ignore_mismatched_sizes=True)
    enc = tok(list(data.train.texts), truncation=True, max_length=cfg.max_length)

    class DS(Dataset):
        def __len__(self):
            return len(data.train)

        def __getitem__(self, i):
            return {"input_ids": enc["input_ids"][i], "token_type_ids": enc["token_type_ids"][i],
                    "attention_mask": enc["attention_mask"][i], "labels": data.train.labels[i]}

    args = transformers.TrainingArguments(
        output_dir=str(out), per_device_train_batch_size=cfg.batch_size, num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps or -1,
        learning_rate=cfg.lr, warmup_steps=cfg.warmup_ratio, weight_decay=cfg.weight_decay,  # float < 1 = ratio
        max_grad_norm=cfg.grad_clip, seed=cfg.seed, eval_strategy="no", save_strategy="no", report_to=[],
        logging_strategy="no", use_cpu=not torch.cuda.is_available(),
        train_sampling_strategy="group_by_length" if group_by_length else "random",
        disable_tqdm=True, dataloader_num_workers=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=DS(), processing_class=tok,
                                   data_collator=transformers.DataCollatorWithPadding(tok))
    out_ = trainer.train()
    return float(out_.metrics["train_samples_per_second"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=320)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()

    import torch
    import transformers

    from core.datasets_local import load_bundled
    from core.finetune import FinetuneConfig, LengthGroupedBatches, padding_saved, train
    from core.tiny import make_tiny

    transformers.logging.set_verbosity_error()
    tmp = Path(tempfile.mkdtemp(prefix="bench-finetune-"))
    folder = make_tiny("bert", tmp / "model", task="base", hidden=args.hidden, layers=args.layers, heads=4,
                       ffn=4 * args.hidden, max_pos=512)
    data = load_bundled("drugreview").subset(args.rows, 64)
    cfg = FinetuneConfig("bert", str(folder), epochs=1, lr=5e-5, batch_size=16, max_length=args.max_length,
                         patience=0, device="cpu" if not torch.cuda.is_available() else "auto")
    print(f"# fine-tune throughput · BERT {args.layers}x{args.hidden} (bert-base-uncased vocab) · "
          f"{len(data.train)} drug reviews · batch {cfg.batch_size} · max length {cfg.max_length} · "
          f"torch threads {torch.get_num_threads()} · {'cuda' if torch.cuda.is_available() else 'cpu'}")

    # The CPU here is shared, so load swings between runs: alternate the three in rounds of the same step budget
    # and compare each one's best round (the least disturbed), plus the median of the per-round ratios.
    t = time.perf_counter()
    rounds: dict[str, list[float]] = {"trainer": [], "trainer_grouped": [], "ours": []}
    for k in range(args.rounds):
        c = FinetuneConfig(**{**cfg.__dict__, "max_steps": args.steps})
        rounds["trainer"].append(trainer_samples_per_s(folder, data, c, False, tmp / f"trainer{k}"))
        rounds["ours"].append(train(c, data, tmp / f"ours{k}").samples_per_s)
        rounds["trainer_grouped"].append(trainer_samples_per_s(folder, data, c, True, tmp / f"trainer-g{k}"))
    best = {k: max(v) for k, v in rounds.items()}
    med = sorted(o / t_ for o, t_ in zip(rounds["ours"], rounds["trainer"]))[len(rounds["ours"]) // 2]
    fmt = lambda v: " ".join(f"{x:6.1f}" for x in v)  # noqa: E731
    print(f"{args.rounds} rounds of {args.steps} steps each, samples/s per round:")
    print(f"  Trainer (dynamic padding)                  {fmt(rounds['trainer'])}   best {best['trainer']:6.1f}")
    print(f"  Trainer (dynamic padding, group_by_length) {fmt(rounds['trainer_grouped'])}   best {best['trainer_grouped']:6.1f}")
    print(f"  core.finetune (dynamic padding, grouped)   {fmt(rounds['ours'])}   best {best['ours']:6.1f}")
    print(f"ours/Trainer = {best['ours'] / best['trainer']:.2f}x (best rounds; median per-round ratio {med:.2f}x)   "
          f"ours/Trainer(group_by_length) = {best['ours'] / best['trainer_grouped']:.2f}x   "
          f"({time.perf_counter() - t:.0f}s)")

    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    full = load_bundled("drugreview")
    print("\n# padding on variable-length data: all 600 training reviews, batch 16 (share of pad tokens avoided "
          "against padding every batch to max length)")
    for max_len in (128, 256, 512):
        lengths = [len(x) for x in tok(list(full.train.texts), truncation=True, max_length=max_len)["input_ids"]]
        plain = padding_saved(lengths, 16, max_len, group=False)
        grouped = padding_saved(lengths, 16, max_len, group=True)
        real = sum(lengths)
        grouped_tokens = sum(len(b) * max(lengths[i] for i in b) for b in LengthGroupedBatches(lengths, 16, 0))
        print(f"max length {max_len:3d}: dynamic padding saves {plain:5.1%}, + length grouping saves {grouped:5.1%} "
              f"(pad share of the grouped batches: {1 - real / grouped_tokens:5.1%})")

    if not torch.cuda.is_available():
        print("\n# GPU part skipped: no CUDA device here (run this on a GPU for bert-base bf16 vs fp32).")
        return
    print("\n# GPU: bert-base-size (12x768) on 2,000 examples, bf16 autocast vs fp32")
    big = make_tiny("bert", tmp / "base", task="base", hidden=768, layers=12, heads=12, ffn=3072, max_pos=512)
    rows = load_bundled("drugreview")
    texts = (rows.train.texts + rows.test.texts) * 3
    labels = (rows.train.labels + rows.test.labels) * 3
    from core.datasets_local import LabelledData, Split

    d2 = LabelledData("drugreview x3", Split(texts[:2000], labels[:2000]), rows.test, rows.label_names, rows.source,
                      rows.licence)
    for prec in ("fp32", "bf16"):
        torch.cuda.reset_peak_memory_stats()
        c = FinetuneConfig("bert", str(big), epochs=1, batch_size=32, max_length=256, precision=prec, device="cuda",
                           patience=0)
        r = train(c, d2, tmp / f"gpu-{prec}")
        print(f"{prec}: {r.samples_per_s:8.1f} samples/s · peak memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()

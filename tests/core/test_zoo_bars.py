"""Issue #16's bars on the committed minis, measured live: the everyday-English probe (top-5) and the pair heads
(NSP, SOP) on held-out pairs.

Each number is measured on the committed weights and must equal what the model's card says (a stale card, or a
model that changed without its card, fails). A model must not fall below its card (a regression fails). A bar the
committed model does not meet is reported as an expected failure with the numbers (pytest -rx shows it): the
README and the cards say the same; the day a retrained model meets it, the test passes.
"""
from __future__ import annotations

import json

import pytest
import torch

from core.predict.everyday_probe import score
from core.models.loading import ModelSpec, load
from core.registry import bundled_id
from core.base.paths import ASSETS
from core.data.corpus import CORPUS_DIR, HELDOUT_FILE, load_documents
from core.train.pretrain.data import make_instances, tokenize_documents
from core.train.pretrain.evaluate import evaluate
from core.train.pretrain.zoo import HELDOUT_SEED, RECIPES
from core.registry import bundled_families

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("zoo_bars")]  # one worker: the probe fixture runs once

# the zoo's minis (core.train.pretrain.zoo); the bundled XLM-R is not trained by the zoo: tests/core/test_xlmr_e5.py
FAMILIES = [f.key for f in bundled_families() if f.key in {r["family"] for r in RECIPES.values()}]


def _card(family: str) -> dict:
    return json.loads((ASSETS / "models" / RECIPES_BY_FAMILY[family] / "encoderlab_card.json").read_text())


RECIPES_BY_FAMILY = {r["family"]: name for name, r in RECIPES.items()}


@pytest.fixture(scope="module")
def probe_scores():
    torch.set_num_threads(2)
    return {fam: score(load(ModelSpec(fam, bundled_id(fam), "cpu"), "mlm")) for fam in FAMILIES}


def _pair_acc(family: str) -> tuple[float, float, int]:
    lm = load(ModelSpec(family, bundled_id(family), "cpu"), "pretraining")
    cfg = json.loads((ASSETS / "models" / RECIPES_BY_FAMILY[family] / "pretrain_log.json").read_text())["config"]
    docs = tokenize_documents(load_documents(CORPUS_DIR / HELDOUT_FILE), lm.tokenizer, family)
    inst = make_instances(docs, lm.tokenizer, pair=cfg["pair_objective"], max_len=cfg["max_len"], seed=HELDOUT_SEED,
                          use_types=lm.family.token_types)
    ev = evaluate(lm.model, family, lm.tokenizer, inst, [0] * 5)
    return ev["pair_acc"], ev["pair_majority"], ev["pairs"]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_probe_score_is_the_cards(family, probe_scores):
    s, card = probe_scores[family], _card(family)["probe"]
    assert s.items == card["items"] >= 150
    assert abs(s.topk - card["top5"]) < 0.5 / s.items and abs(s.top1 - card["top1"]) < 0.5 / s.items


@pytest.mark.parametrize("family", FAMILIES)
def test_the_probe_bar(family, probe_scores):
    bar = RECIPES[RECIPES_BY_FAMILY[family]]["bars"]["probe_top5"]
    got = probe_scores[family].topk
    if got < bar:
        pytest.xfail(f"{bundled_id(family)}: everyday-probe top-5 {got:.1%}, bar {bar:.0%}: missed")
    assert got >= bar


@pytest.mark.parametrize("family", [f for f in FAMILIES if "pair_acc" in RECIPES[RECIPES_BY_FAMILY[f]].get("bars", {})])
def test_the_pair_head_bar(family):
    acc, majority, pairs = _pair_acc(family)
    held = _card(family)["heldout"]
    assert pairs == held["pairs"] and abs(acc - held["pair_acc"]) < 0.5 / pairs  # the card tells the truth
    bar = RECIPES[RECIPES_BY_FAMILY[family]]["bars"]["pair_acc"]
    if acc <= majority:  # the head did not learn (the app warns instead of showing its verdicts)
        pytest.xfail(f"{bundled_id(family)}: held-out pair accuracy {acc:.1%}, no better than always guessing the "
                     f"commoner label ({majority:.1%}); bar {bar:.0%}: missed")
    if acc < bar:
        pytest.xfail(f"{bundled_id(family)}: held-out pair accuracy {acc:.1%} (majority {majority:.1%}), bar "
                     f"{bar:.0%}: missed")
    assert acc >= bar


def test_every_bundled_recipe_has_a_probe_bar():
    assert {RECIPES[RECIPES_BY_FAMILY[f]]["bars"]["probe_top5"] for f in FAMILIES} <= {0.4, 0.6}

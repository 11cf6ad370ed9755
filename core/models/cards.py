"""The bundled models' cards (encoderlab_card.json, written by core.train.pretrain.zoo), and the one rule for a pair
head that learned nothing."""

from __future__ import annotations

import json

from core.base.paths import zoo_dir


def bundled_card(checkpoint: str) -> dict:
    """The model card (encoderlab_card.json, written by core.train.pretrain.zoo) of a bundled ``encoderlab/NAME``
    checkpoint; {} for any other checkpoint or a folder without a readable card."""
    if not checkpoint.startswith("encoderlab/"):
        return {}
    try:
        return json.loads((zoo_dir() / checkpoint.split("/", 1)[1] / "encoderlab_card.json").read_text())
    except (OSError, ValueError):
        return {}


PAIR_CHANCE_MARGIN = 0.02  # a pair head within 2 points of its majority guess (or of 50%) learned nothing


def pair_head_learned(held: dict) -> bool:
    """Whether a card's held-out NSP/SOP accuracy (``held``: its "heldout" part, with "pair_acc") is above always
    guessing the commoner label (or 50%) by more than PAIR_CHANCE_MARGIN: the one rule the app's notes, the
    walkthrough and the cards themselves apply."""
    return held["pair_acc"] > max(held.get("pair_majority", 0.5), 0.5) + PAIR_CHANCE_MARGIN

"""The held-out fraction of an upload has one range (core.data.datasets_local.HELD_OUT_FRACTION): both loaders check
it there, and the Fine-tune page's boxes and URL fields read it (app/views/train/finetune.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from core.data.datasets_local import HELD_OUT_FRACTION, DataError, from_table
from core.data.token_data import from_sentences

B = HELD_OUT_FRACTION
TABLE = pd.DataFrame({"text": [f"row {i}" for i in range(40)], "label": [i % 2 for i in range(40)]})
SENTS = [(["word", str(i)], ["O", "B-X"]) for i in range(40)]
LOADERS = {
    "table": lambda f: from_table(TABLE, "text", "label", test_fraction=f),
    "tokens": lambda f: from_sentences(SENTS, "x", "test", "none", test_fraction=f),
}


@pytest.mark.parametrize("which", LOADERS)
def test_both_loaders_take_the_edges_and_refuse_one_step_past(which):
    load = LOADERS[which]
    load(B.low), load(B.high), load(B.default)
    for past in (B.low - B.step, B.high + B.step, float("nan")):
        with pytest.raises(DataError, match=f"use {B.low:g} to {B.high:g}"):
            load(past)


def test_the_loaders_and_the_page_share_the_declaration(monkeypatch):
    import core.data.datasets_local as dl
    from app.views.train import finetune as view

    assert view.bounds_of("test_frac") is B and view.bounds_of("tok_test_frac") is B
    monkeypatch.setattr(dl, "HELD_OUT_FRACTION", dl.Bounds(0.2, 0.1, 0.3, float, step=0.05))
    for load in LOADERS.values():  # a narrower declaration narrows both loaders: neither keeps its own copy
        with pytest.raises(DataError, match="use 0.1 to 0.3"):
            load(0.4)

"""Fill-mask on a checkpoint without an MLM head names what the checkpoint is and suggests one that can be had
here (issue 14: a fine-tuned classifier was called "e.g. a sentence-embedding model")."""

from __future__ import annotations

import pytest

from core.models.loading import ModelSpec, load
from core.predict.fill_mask import FillMaskError, check_mlm


def test_fine_tuned_classifier_is_named_and_a_bundled_mini_suggested(tiny_models, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = tmp_path / "classifier"
    AutoModelForSequenceClassification.from_pretrained(tiny_models["bert"], num_labels=2).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_models["bert"]).save_pretrained(folder)
    lm = load(ModelSpec("bert", str(folder), "cpu"), "mlm")
    with pytest.raises(FillMaskError) as e:
        check_mlm(lm)
    msg = str(e.value)
    assert "fine-tuned classifier (BertForSequenceClassification)" in msg
    assert "sentence-embedding" not in msg
    assert "encoderlab/bert-mini" in msg
    from core.models.loading import resolve

    if resolve("bert-base-uncased").source == "unavailable":
        assert "bert-base-uncased" not in msg  # only what can be had here is suggested

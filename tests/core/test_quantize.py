"""int8 dynamic quantization (core/compare/int8.py): smaller, agrees with fp32 on most of the probe, works on Fill-mask,
refused on CUDA and for training."""

from __future__ import annotations

import pytest
import torch

from core.compare.int8 import QuantConfig, measure_quantization
from core.models.int8 import (
    QuantizeError,
    check_mode,
    disk_bytes,
    is_quantized,
    memory_bytes,
    quantize_int8,
    quantized_linears,
)
from core.models.loading import ModelSpec, load
from core.models.masked_forward import masked_logits
from core.models.packed_linear import packed_modules
from core.predict.fill_mask import FillMaskConfig, fill_mask_batch
from core.registry import ModelLoadError, bundled_id, mlm_head


@pytest.fixture(scope="module")
def bert_result():
    """The bundled bert-mini (real weights), fp32 against int8, at a tiny shape (1 x 16, one round)."""
    return measure_quantization(
        ModelSpec("bert", bundled_id("bert"), "cpu"), QuantConfig(seq_len=16, batch=1, repeats=1, heldout=16)
    )


def test_int8_is_smaller_and_agrees_with_fp32_on_most_of_the_probe(bert_result):
    r = bert_result
    assert r.quantized_linears >= 36  # 6 layers x 6 linears, + the MLM transform (the tied decoder stays fp32)
    assert r.int8.disk_bytes < 0.8 * r.fp32.disk_bytes
    assert r.int8.memory_bytes < 0.8 * r.fp32.memory_bytes
    assert r.n_examples >= 12 and r.n_heldout >= 10
    print(
        f"top-1 agreement: {r.agreement:.0%} of {r.n_examples + r.n_heldout} masks "
        f"(examples {r.agree_examples:.0%}, held-out {r.agree_heldout:.0%})"
    )
    assert r.agreement > 0.6, r.disagreements
    assert 0.0 < r.fp32.heldout_top5 <= 1.0 and r.int8.heldout_top5 >= r.fp32.heldout_top5 - 0.15
    assert r.fp32.latency_ms > 0 and r.int8.latency_ms > 0


def test_memory_counts_the_packed_int8_weights(tiny_models):
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), "mlm")
    fp32 = memory_bytes(lm.model)
    emb = sum(p.numel() * 4 for n, p in lm.model.named_parameters() if "embeddings" in n)
    q = quantize_int8(lm.model)  # a copy: the fp32 model is left as it was
    assert not is_quantized(lm.model) and is_quantized(q)
    assert emb < memory_bytes(q) < fp32  # the int8 linears count, at a quarter of their fp32 size
    assert disk_bytes(q) < disk_bytes(lm.model)


def test_a_quantized_spec_fills_masks_through_the_masked_forward(tiny_zoo, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_ZOO", str(tiny_zoo))
    lm = load(ModelSpec("distilbert", bundled_id("distilbert"), "cpu", quant="int8"), "mlm")
    assert is_quantized(lm.model) and quantized_linears(lm.model) > 0
    (res,) = fill_mask_batch(lm, [FillMaskConfig("The cat sat on the [MASK] all day.", top_k=3)])
    assert len(res.masks) == 1 and len(res.masks[0].candidates) == 3
    assert packed_modules(lm.model) == 0  # the int8 linears run their own kernels, never the fp32 packs
    tok = lm.tokenizer
    enc = tok(["a cat sat on the " + tok.mask_token + " ."], return_tensors="pt")
    rows, cols = (enc["input_ids"] == tok.mask_token_id).nonzero(as_tuple=True)
    with torch.inference_mode():
        fast = masked_logits(lm.model, mlm_head(lm.model), enc["input_ids"], None, rows, cols)
        full = lm.model(**enc).logits[rows, cols]
    # the same int8 model both ways; activations are quantized per call, so the two agree closely, not exactly
    assert torch.corrcoef(torch.stack([fast[0], full[0]]))[0, 1] > 0.99


def test_int8_is_refused_on_cuda_and_for_training(tiny_models):
    with pytest.raises(ModelLoadError, match="CPU only"):
        ModelSpec("bert", "encoderlab/bert-mini", "cuda", quant="int8")
    with pytest.raises(ModelLoadError, match="quantization"):
        ModelSpec("bert", "encoderlab/bert-mini", "cpu", quant="int4")
    with pytest.raises(QuantizeError, match="CPU only"):
        check_mode("int8", "cuda")
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), "mlm")
    with pytest.raises(QuantizeError, match="cannot be trained"):
        quantize_int8(lm.model.train())
    with pytest.raises(QuantizeError, match="fp32"):
        quantize_int8(lm.model.eval().to(torch.bfloat16))


def test_quant_config_checks_itself():
    with pytest.raises(ValueError, match="Sequence length"):
        QuantConfig(seq_len=4)
    with pytest.raises(ValueError, match="Held-out"):
        QuantConfig(heldout=-1)


def test_gradient_attributions_are_not_offered_for_an_int8_model(tiny_models):
    from core.inspect.attribution_methods import unavailable_methods

    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu", quant="int8"), "mlm")
    blocked = unavailable_methods(lm.model)
    assert {"lig", "saliency", "ixg", "deeplift"} <= set(blocked) and "occlusion" not in blocked
    assert "int8" in blocked["lig"]

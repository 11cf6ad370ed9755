"""Inputs fuzzed (#34 §3): property-based tests over core's model entry points, on tiny real models.

What is fuzzed: fill-mask (core.predict.fill_mask: FillMaskConfig and fill_mask, typed masks and whole-word masking),
pair scoring (core.predict.sentence_pair: PairConfig and predict_pair, NSP and SOP), attention
(core.inspect.attention: AttentionConfig and compute_attention, one sentence and pairs) and attribution preparation
(core.inspect.attribution_inputs: AttributionConfig and prepare, the mask and pair targets). Texts mix random Unicode
with CJK, right-to-left scripts, combining marks, zero-width characters, emoji, control characters and typed special
tokens of every family ([MASK], <mask>, [CLS], </s>, ...), and run from empty to 10x the models' 128-token limit.

The property: a call returns a well-formed result, or raises one of the module's documented error types (every one of
them a ValueError: FillMaskError, PairError, AttentionUnavailable, NotApplicable, or ValueError itself), with a
message from the catalogue (core.base.messages), not a library's own text. Any other exception is a bug. Hypothesis
runs derandomized with no example database, so every run draws the same examples: 60 per property, 240 in all, over
all seven families' tiny models (about 11 s). ``ENCODERLAB_FUZZ_EXAMPLES=1000`` searched 1,000 per property (4,000,
72 s) when this was written and found nothing to fix.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from core.base.messages import Message
from core.inspect.attention import AttentionConfig, compute_attention
from core.inspect.attribution_inputs import AttributionConfig, prepare
from core.models.loading import ModelSpec, load
from core.predict.fill_mask import FillMaskConfig, fill_mask, words
from core.predict.sentence_pair import PairConfig, predict_pair
from core.registry import FAMILIES

# 60 in make test; ENCODERLAB_FUZZ_EXAMPLES=2000 searches longer (the same properties, still derandomized)
EXAMPLES = int(os.environ.get("ENCODERLAB_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=EXAMPLES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PIECES = [
    "[MASK]",
    "<mask>",
    "[mask]",
    "[CLS]",
    "[SEP]",
    "[PAD]",
    "[UNK]",
    "<s>",
    "</s>",
    "<pad>",
    "\u200b",
    "\u200d",
    "\ufeff",
    "\u0301",
    "e\u0301",
    "中文",
    "北京是中国的首都",
    "مرحبا بالعالم",
    "שלום",
    "😀",
    "👩‍👩‍👧",
    " ",
    "\n",
    "\t",
    "\x00",
    "\x7f",
    "the cat sat on the mat",
    ".",
    "##ing",
    "▁the",
]
LIMIT = 128  # the tiny models' position table (core.registry.types.TINY)


@st.composite
def texts(draw, mask: bool = False) -> str:
    """Mostly short mixes of the pieces above and random text; now and then up to 10x the model's limit. ``mask``:
    most texts get a [MASK] somewhere, so fill-mask gets past its first check."""
    if draw(st.integers(0, 9)) == 0:
        n = draw(st.integers(0, 10 * LIMIT))
        at = draw(st.integers(0, n))
        words_ = ["word"] * n
        words_.insert(at, draw(st.sampled_from(["[MASK]", "<mask>", "北京", ""])))
        return " ".join(words_)
    parts = draw(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=12)), max_size=12))
    if mask and draw(st.integers(0, 9)) < 7:
        parts.insert(draw(st.integers(0, len(parts))), "[MASK]")
    return draw(st.sampled_from(["", " "])).join(parts)


_MODELS: dict[tuple[str, str, bool], object] = {}


def _model(tiny_models, family: str, task: str, attentions: bool = False):
    key = (family, task, attentions)
    if key not in _MODELS:
        _MODELS[key] = load(ModelSpec(family, str(tiny_models[family]), "cpu"), task=task, attentions=attentions)
    return _MODELS[key]


def _allowed(e: BaseException, record: bool = True) -> None:
    """The only errors allowed: a ValueError (the modules' own types all are one) raised with a message of the
    catalogue (core.base.messages.msg: one the page shows in English or 中文), not a library's own text."""
    assert isinstance(e, ValueError), f"{type(e).__name__}: {e}"
    assert e.args and isinstance(e.args[0], Message), f"{type(e).__name__} not from the catalogue: {e}"
    assert str(e).strip(), f"{type(e).__name__} without a message"
    if record:  # hypothesis's statistics (--hypothesis-show-statistics): which errors the properties met
        event(f"refused: {type(e).__name__}")


@pytest.fixture(scope="module")
def models(tiny_models):
    return lambda family, task, attentions=False: _model(tiny_models, family, task, attentions)


@FUZZ
@given(
    text=texts(mask=True), family=st.sampled_from(["bert", "xlm-roberta"]), word=st.one_of(st.none(), st.integers(0, 6))
)
def test_fill_mask(models, text, family, word):
    if word is not None:  # whole-word masking takes a text without typed masks
        text = text.replace("[MASK]", "")
    try:
        cfg = FillMaskConfig(text, word=word)
        res = fill_mask(models(family, "mlm"), cfg)
    except Exception as e:
        _allowed(e)
        return
    event("answered")
    assert res.masks and len(res.masks) == len(res.mask_positions)
    assert len(res.tokens) <= LIMIT
    for m in res.masks:
        assert len(m.candidates) == cfg.top_k and all(0.0 <= c.prob <= 1.0 for c in m.candidates)
    if word is not None:
        assert res.masked_word == words(cfg.text)[word].text


@FUZZ
@given(a=texts(), b=texts(), family=st.sampled_from(["bert", "albert"]))
def test_pair_scoring(models, a, b, family):
    try:
        res = predict_pair(models(family, "pretraining"), PairConfig(a, b))
    except Exception as e:
        _allowed(e)
        return
    event("answered")
    for s in res.scores:
        assert 0.0 <= s.prob <= 1.0 and len(s.tokens) <= LIMIT


@FUZZ
@given(a=texts(), b=texts(), pair=st.booleans(), family=st.sampled_from(sorted(FAMILIES)))
def test_attention(models, a, b, pair, family):
    try:
        res = compute_attention(models(family, "base", True), AttentionConfig(a, b if pair else "", pair=pair))
    except Exception as e:
        _allowed(e)
        return
    event("answered")
    assert 0 < res.n_tokens <= LIMIT
    sums = res.attentions.astype(np.float32).sum(-1)
    np.testing.assert_allclose(sums, 1.0, atol=1e-2)


@FUZZ
@given(
    a=texts(mask=True),
    b=texts(),
    target=st.sampled_from(["mask", "pair"]),
    word=st.sampled_from(["", "the", "中", "two words", "[MASK]"]),
)
def test_attribution_preparation(models, a, b, target, word):
    try:
        cfg = AttributionConfig(target=target, text=a, text_b=b, word=word if target == "mask" else "")
        prep = prepare(models("bert", "pretraining"), cfg)
    except Exception as e:
        _allowed(e)
        return
    event("answered")
    assert prep is not None


def test_the_property_rejects_what_it_must():
    """The check every property ends in can fail: another exception type, and a ValueError in a library's words."""
    from core.base.messages import msg

    _allowed(ValueError(msg("fill_mask.no_mask_in_text")), record=False)
    for bad in (KeyError("x"), IndexError("list index out of range"), ValueError("Input is not valid.")):
        with pytest.raises(AssertionError):
            _allowed(bad, record=False)

"""A typed [MASK] is the model's own mask token on every page (issue #46): one rule, core.base.text.with_mask_token,
behind Fill-mask (and Layer lens and head ablation, which encode through it), Attention and its word view,
Attributions, and the walkthrough's steps 1 and 2. On RoBERTa and XLM-R (<mask>) the tokenizer used to read a typed
[MASK] as the pieces '[', 'M', 'AS', 'K', ']'; BERT's [MASK] stays as it was."""

from __future__ import annotations

import pytest

from core import registry
from core.base.text import with_mask_token
from core.inspect.attention import AttentionConfig, compute_attention
from core.inspect.attention_views import word_view
from core.inspect.attribution_inputs import AttributionConfig, prepare
from core.models.loading import ModelSpec, load
from core.predict.fill_mask import FillMaskConfig, encode
from core.walkthrough.embeddings import embedding_parts
from core.walkthrough.masking_view import corrupt

CHOPSTICKS = "我们用筷[MASK]吃饭。"  # the browser walk's sentence (#46)
TEXTS = {"roberta": "The capital of France is [MASK].", "xlm-roberta": CHOPSTICKS}
BROKEN = ("[", "M", "AS", "K", "]", "MASK")  # what a typed [MASK] became without the rule


def test_the_rule_maps_either_spelling_in_any_case_and_leaves_bert_as_it_was():
    assert with_mask_token("A [MASK] and a <mask> and a [mask].", "<mask>") == "A <mask> and a <mask> and a <mask>."
    assert with_mask_token("A <MASK> b [MASK].", "[MASK]") == "A [MASK] b [MASK]."
    assert with_mask_token("The [MASK] sat.", "[MASK]") == "The [MASK] sat."  # BERT: unchanged
    assert with_mask_token("The [MASK] sat.", None) == "The [MASK] sat."  # no mask token: nothing to map to
    assert with_mask_token("[ MASK ] [MASKS]", "<mask>") == "[ MASK ] [MASKS]"  # only the marker itself


@pytest.fixture(scope="module", params=sorted(TEXTS))
def bundled(request):
    fam = request.param
    return load(ModelSpec(fam, registry.bundled_id(fam), "cpu"), "mlm", attentions=True), TEXTS[fam]


def _fill_mask_tokens(lm, text: str) -> tuple[str, ...]:
    """The tokens Fill-mask (and Layer lens and head ablation, which encode as it does) reads, specials included."""
    return tuple(lm.tokenizer.convert_ids_to_tokens(list(encode(lm, FillMaskConfig(text)).ids)))


def test_attention_reads_a_typed_mask_as_the_models_own(bundled):
    lm, text = bundled
    mask = lm.tokenizer.mask_token
    assert mask == "<mask>"
    r = compute_attention(lm, AttentionConfig(text))
    assert r.tokens.count(mask) == 1 and not set(BROKEN) & {t.lstrip("▁Ġ") for t in r.tokens}, r.tokens
    assert r.tokens == _fill_mask_tokens(lm, text)  # the tokens Fill-mask reads
    words = word_view(lm.tokenizer, AttentionConfig(text), r.attentions).words  # the same encoding, by words
    assert mask in words and not any("[" in w for w in words), words
    pair = compute_attention(lm, AttentionConfig(text, "And a [mask] in B.", pair=True))
    assert pair.tokens.count(mask) == 2


def test_attributions_accept_a_typed_mask_and_target_it(bundled):
    lm, text = bundled
    p = prepare(lm, AttributionConfig(target="mask", text=text))
    ids = p.ids[0].tolist()
    assert ids.count(lm.tokenizer.mask_token_id) == 1 and ids[p.mask_pos] == lm.tokenizer.mask_token_id
    assert tuple(lm.tokenizer.convert_ids_to_tokens(ids)) == _fill_mask_tokens(lm, text)
    if text == CHOPSTICKS:  # refused with "写 <mask>" before #46; 筷子: the model reads a mask there
        assert "子" in [w for w, _ in p.candidates], p.candidates


def test_the_walkthroughs_steps_1_and_2_read_a_typed_mask_as_the_models_own(bundled):
    lm, text = bundled
    mask = lm.tokenizer.mask_token
    step1 = embedding_parts(lm, text, "And a [MASK] in B.")
    assert step1.tokens.count(mask) == 2 and not set(BROKEN) & {t.lstrip("▁Ġ") for t in step1.tokens}
    assert [s for t, s in zip(step1.tokens, step1.special) if t == mask] == [True, True]
    step2 = corrupt(lm, text, seed=1)
    assert step2.tokens == _fill_mask_tokens(lm, text)
    i = step2.tokens.index(mask)
    assert step2.special[i] and not step2.actions[i]  # the typed mask is never one of the 15% drawn


def test_bert_reads_its_mask_as_before(tiny_models):
    lm = load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), "mlm", attentions=True)
    r = compute_attention(lm, AttentionConfig("The cat sat on the [MASK]."))
    assert r.tokens.count("[MASK]") == 1
    assert embedding_parts(lm, "The cat sat on the [MASK].").tokens == r.tokens
    assert prepare(lm, AttributionConfig(target="mask", text="The cat sat on the [MASK].")).mask_pos == (
        r.tokens.index("[MASK]")
    )

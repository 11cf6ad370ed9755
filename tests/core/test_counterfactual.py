"""core.inspect.counterfactual: edits written by a masked LM that flip a prediction. On the planted-trigger classifier
(tests/planted.py: the word PLANT decides class 1) one edit must replace the trigger and flip the label; a budget of
0 finds nothing; special tokens and word pieces are never proposed, on every family's tokenizer; the [MASK] and NSP
targets work on the bundled model; HotFlip, the reference, runs through the same search."""

from __future__ import annotations

import pytest

from core.inspect import counterfactual as C
from core.inspect import counterfactual_proposals as P
from core.models.loading import ModelSpec, load
from core.registry import FAMILIES, bundled_id
from tests.planted import PLANT


@pytest.fixture(scope="module")
def mini_mlm():
    """The bundled BERT mini with its MLM head: the planted classifier's family's MLM, as the page would pass it."""
    return load(ModelSpec("bert", bundled_id("bert"), "cpu"), task="mlm")


@pytest.mark.parametrize("text", [f"the actors were {PLANT} in the long movie", f"{PLANT} music for people"])
def test_one_edit_replaces_the_trigger_and_flips_the_label(planted, mini_mlm, text):
    r = C.counterfactuals(planted, C.CounterfactualConfig(target="class", text=text), mini_mlm)
    assert r.original == "LABEL_1" and r.p_original > 0.95
    assert r.words[0][3] == PLANT  # Occlusion ranks the trigger first, so it is tried first
    assert r.found and all(c.flipped and len(c.edits) == 1 for c in r.found)  # goal "flip": the fewest edits
    for c in r.found:
        (e,) = c.edits
        assert e.old == PLANT and e.new != PLANT and c.prediction == "LABEL_0" and c.p_original < 0.5
        assert c.texts[0] == text.replace(PLANT, e.new)
    assert r.proposer == f"mlm: {bundled_id('bert')}"


def test_a_budget_of_zero_finds_nothing(planted, mini_mlm):
    r = C.counterfactuals(planted, C.CounterfactualConfig(text=f"it was {PLANT} music", budget=0), mini_mlm)
    assert r.found == () and r.evaluated == 0


def test_lowering_keeps_going_to_the_budget(planted, mini_mlm):
    cfg = C.CounterfactualConfig(text=f"the actors were {PLANT} in the long movie", goal="lower", budget=2, beam=2)
    r = C.counterfactuals(planted, cfg, mini_mlm)
    assert r.found and min(c.p_original for c in r.found) < r.p_original
    left = [c.p_original for c in r.found]
    assert left == sorted(left)  # the lowest probability left first, however many edits it took
    assert {len(c.edits) for c in r.found} == {2}  # two edits lower it further than any one (the trigger and another)
    assert len({c.texts for c in r.found}) == len(r.found)  # the same text reached twice is one result


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_special_tokens_and_word_pieces_are_never_proposed(tiny_models, fam):
    """Random weights rank every piece at random, specials and continuations included: the filter must drop them."""
    lm = load(ModelSpec(fam, str(tiny_models[fam]), "cpu"), task="mlm")
    text = "the quick brown fox jumps over the lazy dog near the river bank"
    spans = [(0, s, e) for s, e in ((4, 9), (10, 15), (20, 25), (35, 39))]
    proposals = P.mlm_proposals(lm, [(text,)] * len(spans), spans, 32)
    tok = lm.tokenizer
    specials = {str(s) for s in tok.all_special_tokens} | {display_form for display_form in ("", " ")}
    for (_, s, e), cands in zip(spans, proposals):
        assert len(cands) == len(set(cands)) > 0
        for c in cands:
            assert c not in specials and not c.startswith("##") and c.isalnum(), (fam, c)
            assert c.lower() != text[s:e].lower()


def test_a_masked_word_and_the_nsp_decision():
    mlm = load(ModelSpec("bert", bundled_id("bert"), "cpu"), task="mlm")
    r = C.counterfactuals(mlm, C.CounterfactualConfig(target="mask", text="The capital of France is [MASK]."))
    assert r.original == "france" and all("[MASK]" not in w[3] and w[3] != "MASK" for w in r.words)
    assert r.found and r.found[0].flipped and r.found[0].prediction != "france"
    assert all("[MASK]" in c.texts[0] for c in r.found)  # the mask is never edited
    assert any(e.new[:1].isupper() for c in r.found for e in c.edits if e.old[:1].isupper())  # "France" -> "Egypt"
    pre = load(ModelSpec("bert", bundled_id("bert"), "cpu"), task="pretraining")
    cfg = C.CounterfactualConfig(target="pair", text="She opened the door.", text_b="It creaked loudly.")
    r = C.counterfactuals(pre, cfg)
    assert r.original == "B follows A" and r.found and r.found[0].prediction == "B is random"


def test_hotflip_the_reference_runs_through_the_same_search(planted, mini_mlm):
    text = f"the actors were {PLANT} in the long movie"
    r = C.counterfactuals(planted, C.CounterfactualConfig(text=text, proposer="hotflip"), mini_mlm)
    assert r.proposer == "hotflip" and r.found and r.found[0].edits[0].old == PLANT
    assert all(p.grad is None for p in planted.model.parameters())  # the gradient at the input only: the shared model


def test_a_word_after_the_mask_gets_the_mlms_guesses_at_its_own_place(mini_mlm):
    import torch

    from core.inspect.attribution_inputs import target_logits

    text = "paris is the [MASK] of france ."
    at = text.index("france")
    (got,) = P.mlm_proposals(mini_mlm, [(text,)], [(0, at, at + len("france"))], 5)
    batch = P.encode_rows(mini_mlm, [("paris is the [MASK] of [MASK] .",)])
    second = int((batch["input_ids"][0] == mini_mlm.tokenizer.mask_token_id).nonzero().flatten()[1])
    with torch.no_grad():
        logits = target_logits(mini_mlm.model, "mask", batch, [second])[0]
    words = P.word_pieces(mini_mlm.tokenizer)
    ranked = [words[i] for i in torch.argsort(logits, descending=True).tolist() if i in words]
    assert got == [w for w in ranked if w != "france"][:5]


def test_fluency_is_higher_for_a_sentence_than_for_its_words_shuffled(mini_mlm):
    pll = P.pseudo_log_likelihood(mini_mlm, [("the cat sat on the mat .",), ("mat the on sat . cat the",)])
    assert pll[0] > pll[1] + 5


def test_edits_apply_on_the_original_spans():
    texts = ("the cat sat on the mat",)
    edits = (C.Edit(0, 4, 7, "cat", "tiger"), C.Edit(0, 19, 22, "mat", "rug"))
    assert C.apply(texts, edits) == ("the tiger sat on the rug",)
    assert C.apply(("ab", "cd"), (C.Edit(1, 0, 2, "cd", "xyz"),)) == ("ab", "xyz")


@pytest.mark.parametrize(
    "kw, fragment",
    [
        (dict(text=""), "no text to edit"),
        (dict(text="a", target="token"), "not for"),
        (dict(text="a", budget=9), "not between 0 and 5"),
        (dict(text="a", target="pair"), "no text to edit"),
    ],
)
def test_bad_settings_say_what_to_fix(kw, fragment):
    with pytest.raises(ValueError, match=fragment):
        C.CounterfactualConfig(**kw)


def test_a_masked_word_needs_a_mask(mini_mlm):
    with pytest.raises(ValueError, match="has no"):
        C.counterfactuals(mini_mlm, C.CounterfactualConfig(target="mask", text="no mask here"))


def test_hotflip_on_a_masked_word_and_a_classifier_without_an_mlm(planted, mini_mlm):
    r = C.counterfactuals(
        mini_mlm,
        C.CounterfactualConfig(target="mask", text="Paris is the [MASK] of France.", proposer="hotflip", budget=1),
    )
    assert r.found and all(len(c.edits) == 1 for c in r.found) and all(c.pll == c.pll for c in r.found)
    r = C.counterfactuals(planted, C.CounterfactualConfig(text=f"it was {PLANT} music", proposer="hotflip", budget=1))
    assert r.found and all(c.pll != c.pll for c in r.found)  # no MLM to score fluency: NaN, not a made-up number
    with pytest.raises(ValueError, match="no masked LM of its own"):
        C.counterfactuals(planted, C.CounterfactualConfig(text=f"it was {PLANT} music"))

"""core.inspect.faithfulness: comprehensiveness and sufficiency beside every attribution, against a random and a
reversed ranking. On a classifier trained here so that one planted word decides its label, the methods that find
the word (Integrated Gradients, Occlusion) must beat random by a wide margin; random's own numbers must match their
expectation, computed exactly by enumerating every subset; and the rows the metrics run must be the inputs they
claim to be (the mask token in place of a token, or the token deleted, on every family)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
import torch

from core.inspect import faithfulness as F
from core.inspect.attribution import attribute, attribute_batch, read_batch_csv
from core.inspect.attribution_inputs import AttributionConfig, prepare
from core.models.loading import ModelSpec, load
from core.registry import FAMILIES
from tests.planted import PLANT, planted_sentences


def test_ig_and_occlusion_beat_random_by_a_wide_margin(planted):
    rows = "text,class\n" + "".join(f"{s},1\n" for s in planted_sentences(12, seed=1))
    batch = attribute_batch(planted, read_batch_csv(rows), dict(target="class", methods=("lig", "occlusion")))
    measured = [r.faithfulness for r in batch.results if r is not None]
    assert len(measured) == 12
    ranking = F.rank_methods(measured)
    for m in ranking.methods:
        # removing the planted word removes the class: IG and Occlusion rank it first, random finds it by chance
        assert m.comp > m.random_comp + 0.4, m
        assert m.suff < m.random_suff - 0.4, m
    for f in measured:  # each method's reversed ranking removes the planted word last: less comprehensive
        for key in ("lig", "occlusion"):
            assert f.method(key).aopc_comp > f.reversed_of(key).aopc_comp
    assert ranking.inputs == 12 and {ranking.most_comprehensive, ranking.most_sufficient} <= {"lig", "occlusion"}


@pytest.mark.parametrize("removal", ["mask", "delete"])
def test_randoms_comprehensiveness_matches_its_expectation(planted, removal):
    text = planted_sentences(1, seed=3)[0]
    cfg = AttributionConfig(target="class", text=text, class_index=1, methods=("saliency",))
    prep = prepare(planted, cfg)
    seeds = 400
    f = F.measure(planted, prep, {"saliency": np.zeros(prep.ids.shape[1])}, removal, seeds=seeds, seed=7)
    fixed = prep.special
    cand = np.flatnonzero(~fixed)
    whole = np.ones(len(fixed), bool)
    for li, k in enumerate(f.ks):  # the exact expectation: every subset of k removable tokens, equally likely
        subsets = [list(c) for c in combinations(cand, k)]
        without, only = [], []
        for sub in subsets:
            w = whole.copy()
            w[sub] = False
            o = fixed.copy()
            o[sub] = True
            without.append(w)
            only.append(o)
        p_without = F.probabilities(planted, prep, without, removal)
        p_only = F.probabilities(planted, prep, only, removal)
        exact_comp, exact_suff = f.p_x - p_without.mean(), f.p_x - p_only.mean()
        se_comp, se_suff = (np.std(f.p_x - p) / np.sqrt(seeds) for p in (p_without, p_only))
        # the random ranking's mean over 400 seeds is within 4 standard errors of the exact expectation
        assert abs(f.random.comp[li] - exact_comp) <= 4 * se_comp + 1e-9, (k, f.random.comp[li], exact_comp)
        assert abs(f.random.suff[li] - exact_suff) <= 4 * se_suff + 1e-9, (k, f.random.suff[li], exact_suff)
    assert max(f.random.comp) > 0.1  # the planted word is found by chance at some level: not a trivial zero


def test_one_batched_forward_per_level_at_most(planted):
    text = "the movie was long and the actors were there with some music " + PLANT
    cfg = AttributionConfig(target="class", text=text, class_index=1, methods=("lig", "saliency"))
    res = attribute(planted, cfg)
    prep = prepare(planted, cfg)
    seen = []  # the model's own forward calls, counted by a hook (not by the module's arithmetic)
    hook = planted.model.register_forward_hook(lambda *_: seen.append(1))
    try:
        f = F.measure(planted, prep, {m.method: m.scores for m in res.methods})
    finally:
        hook.remove()
    assert len(seen) == f.forwards
    assert f.ks == F.counts(F.LEVELS, f.removable) == (1, 1, 2, 3, 7)  # 13 tokens
    assert f.forwards == len(set(f.ks))  # a level that removes as many tokens as the one before runs nothing new
    # every ranking's two rows per level, the whole input once, identical rows run once
    assert f.rows <= 2 * (2 * 2 + F.RANDOM_SEEDS) * len(F.LEVELS) + 1


def test_levels_round_up_so_a_short_input_still_loses_a_token():
    assert F.counts(F.LEVELS, 7) == (1, 1, 1, 2, 4)
    assert F.counts(F.LEVELS, 100) == (1, 5, 10, 20, 50)
    assert F.counts((0.5,), 1) == (1,)


@pytest.fixture(scope="module")
def loaded(tiny_models):
    cache: dict = {}

    def get(fam: str):
        if fam not in cache:
            cache[fam] = load(ModelSpec(fam, str(tiny_models[fam]), "cpu"), task="pretraining")
        return cache[fam]

    return get


@pytest.mark.parametrize("fam", list(FAMILIES))
def test_the_rows_are_the_inputs_they_claim_to_be(loaded, fam):
    """A row with tokens masked is the plain input with the mask token there; a row with tokens deleted (and padded to
    the batch's longest) gives what the shorter input alone gives, with the explained mask where it moved to."""
    lm = loaded(fam)
    text = f"the capital of france is {FAMILIES[fam].mask_token} and it is big ."
    prep = prepare(lm, AttributionConfig(target="mask", text=text, methods=("saliency",)))
    ids = prep.ids[0]
    n = len(ids)
    keeps = []
    for drop in ([1], [2, 3], [n - 2]):  # rows of different lengths once deleted
        keep = np.ones(n, bool)
        keep[[d for d in drop if not prep.special[d]]] = False
        keeps.append(keep)
    for removal in ("mask", "delete"):
        got = F.probabilities(lm, prep, keeps, removal)
        for keep, p in zip(keeps, got):
            if removal == "mask":
                row = torch.where(torch.as_tensor(keep), ids, torch.full_like(ids, lm.tokenizer.mask_token_id))
                pos = prep.target_pos
            else:
                row = ids[torch.as_tensor(keep)]
                pos = int(keep[: prep.target_pos].sum())
            extra = {
                k: (v[0] if removal == "mask" else v[0][torch.as_tensor(keep)])[None] for k, v in prep.extra.items()
            }
            with torch.no_grad():
                out = lm.model(input_ids=row[None], **extra)
                logits = getattr(out, "prediction_logits", None)  # a pretraining model's MLM logits
                logits = (out.logits if logits is None else logits)[0, pos]
            want = float(torch.softmax(logits.float(), -1)[prep.target_index])
            assert p == pytest.approx(want, rel=1e-4, abs=1e-6), (removal, keep)


def test_a_contrast_is_measured_on_what_its_map_explains(loaded):
    lm = loaded("bert")
    cfg = AttributionConfig(text="paris is the [MASK] of france .", word="the", contrast_word="a", methods=("lig",))
    f = attribute(lm, cfg)
    # the map explains logit(the) - logit(a): its probability is p(the) / (p(the) + p(a)), the sigmoid of that
    assert f.faithfulness.p_x == pytest.approx(1 / (1 + np.exp(-f.f_x)), rel=1e-4)


def test_every_target_is_measured(loaded, planted):
    lm = loaded("bert")
    pair = attribute(
        lm, AttributionConfig(target="pair", text="the cat sat on the mat .", text_b="it was warm .", methods=("lig",))
    )
    assert pair.faithfulness is not None and pair.faithfulness.removable == 11
    word = attribute(lm, AttributionConfig(target="mask", text="paris is the [MASK] of france .", methods=("lig",)))
    assert word.faithfulness.removal == "mask" and word.faithfulness.removable == 6  # the [MASK] is never removed
    off = attribute(planted, AttributionConfig(target="class", text=f"it was {PLANT}", faithfulness=False))
    assert off.faithfulness is None


def test_bad_removal_and_nothing_to_remove_say_so(loaded):
    with pytest.raises(ValueError, match="Unknown way to remove a token"):
        AttributionConfig(text="a [MASK] b", removal="blank")
    lm = loaded("bert")
    prep = prepare(lm, AttributionConfig(target="mask", text="paris is the [MASK] .", methods=("saliency",)))
    prep.fixed[:] = True  # as if every token were special: there is nothing left to remove
    with pytest.raises(F.NotApplicable, match="needs a word to remove"):
        F.measure(lm, prep, {"saliency": np.zeros(len(prep.special))})

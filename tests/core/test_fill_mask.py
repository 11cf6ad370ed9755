"""core.predict.fill_mask on tiny random models of every family (shapes and bookkeeping), plus one meaning test."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from core.base.paths import zoo_dir
from core.models import packed_linear
from core.models.loading import ModelSpec, load
from core.predict.fill_mask import (
    FillMaskConfig,
    FillMaskError,
    check_mlm,
    compare,
    configs_from_lines,
    fill_mask,
    fill_mask_batch,
    words,
)
from tests.conftest import FAMILIES as FAMS  # every registered family


@pytest.fixture(scope="module")
def mlm(tiny_models):
    """family -> LoadedModel of the tiny model with its MLM head (loaded once per module)."""
    return {f: load(ModelSpec(f, str(tiny_models[f]), "cpu"), "mlm") for f in FAMS}


def _normal(s: str) -> str:
    return s.replace("##", "").replace("Ġ", "").replace("▁", "").replace(" ", "").lower()


@pytest.mark.parametrize("typed", ["[MASK]", "<mask>", "[mask]"])
def test_user_mask_maps_to_model_mask(mlm, family, typed):
    lm = mlm[family]
    r = fill_mask(lm, FillMaskConfig(f"The cat sat on the {typed} all afternoon.", top_k=7))
    assert len(r.masks) == 1 and len(r.masks[0].candidates) == 7
    assert [r.tokens[p] for p in r.mask_positions] == [lm.tokenizer.mask_token]
    assert r.tokens.count(lm.tokenizer.mask_token) == 1
    assert r.tokens[0] == lm.tokenizer.cls_token and r.tokens[-1] == lm.tokenizer.sep_token
    assert lm.tokenizer.mask_token in r.model_text and "[MASK]" not in r.text.replace(typed, "")
    probs = [c.prob for c in r.masks[0].candidates]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6


def test_family_pieces_are_visible(mlm):
    text = "The embedding of [MASK] was wonderful."
    pieces = {f: fill_mask(mlm[f], FillMaskConfig(text)).tokens for f in FAMS}
    assert any(p.startswith("##") for p in pieces["bert"])
    assert any(p.startswith("Ġ") for p in pieces["roberta"])
    assert any(p.startswith("▁") for p in pieces["albert"])


def test_projection_only_at_masked_positions_and_matches_full_forward(mlm, family, monkeypatch):
    lm = mlm[family]
    decoder = lm.model.get_output_embeddings()
    rows: list[int] = []

    def recording(call):  # every linear of the fill-mask path goes through one of these two (packed or not)
        def lin(mod, x):
            if mod is decoder:
                rows.append(x.shape[0])
            return call(mod, x)

        return lin

    for name in ("_packed_linear", "_module_call"):
        monkeypatch.setattr(packed_linear, name, recording(getattr(packed_linear, name)))
    # a head the registry does not write out (ModernBERT's) runs as the model's own module: watch it there
    hook = None if lm.family.head_parts else decoder.register_forward_hook(lambda m, i, o: rows.append(i[0].shape[0]))
    try:
        r = fill_mask(lm, FillMaskConfig("A [MASK] walked into the old [MASK] last night.", top_k=5))
    finally:
        if hook is not None:
            hook.remove()
    assert rows == [2]  # one pass, two masked rows, never the whole sequence
    ids = torch.tensor([lm.tokenizer.convert_tokens_to_ids(list(r.tokens))])
    with torch.inference_mode():
        full = lm.model(input_ids=ids).logits[0].float().softmax(-1)  # (T, V)
    lone = [
        i for i in lm.tokenizer.convert_tokens_to_ids(["Ġ", "▁"]) if i is not None and i != lm.tokenizer.unk_token_id
    ]
    full = full.clone()
    full[:, lone] = 0.0  # a lone word-start marker is never offered at a typed mask (core.predict.fill_mask._fill_step)
    for m in r.masks:
        p, i = full[m.position].topk(5)
        assert [c.token_id for c in m.candidates] == i.tolist()
        assert [c.prob for c in m.candidates] == pytest.approx(p.tolist(), rel=1e-4, abs=1e-7)


def test_whole_word_mask_covers_all_subtokens(mlm, family):
    lm = mlm[family]
    text = "The embedding of unbelievable words"
    ws = words(text)
    assert [w.text for w in ws] == ["The", "embedding", "of", "unbelievable", "words"]
    plain = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    for k in (1, 3):
        r = fill_mask(lm, FillMaskConfig(text, word=k))
        assert r.masked_word == ws[k].text
        originals = [m.original.token_id for m in r.masks]
        assert _normal(lm.tokenizer.decode(originals)) == ws[k].text.lower()
        # every other token is untouched, and the masked ones sit where the word's pieces were
        assert len(r.tokens) == len(plain) + 2
        kept = [t for i, t in enumerate(r.tokens[1:-1], start=1) if i not in r.mask_positions]
        assert kept == [
            t for i, t in enumerate(lm.tokenizer.convert_ids_to_tokens(plain), start=1) if i not in r.mask_positions
        ]
        assert all(m.original_rank is not None and m.original_rank >= 0 for m in r.masks)
        before = lm.tokenizer.convert_ids_to_tokens(plain)[r.mask_positions[0] - 2]
        assert before not in ("▁", "Ġ")  # a lone word-start marker belongs to the word: it is masked too
    r = fill_mask(lm, FillMaskConfig(text, word=1))
    if family in ("bert", "distilbert"):  # real bert-base-uncased vocab: em ##bed ##ding
        assert [m.original.piece for m in r.masks] == ["em", "##bed", "##ding"]
    if family == "albert":  # the tiny Unigram vocab spells it ▁ e m b e d d ing
        assert r.masks[0].original.piece == "▁"


def test_independent_and_iterative(mlm, family):
    lm = mlm[family]
    text = "My [MASK] plays the [MASK] every evening."
    ind = fill_mask(lm, FillMaskConfig(text, strategy="independent"))
    assert ind.fill_pieces == tuple(m.candidates[0].piece for m in ind.masks)
    assert ind.joint_prob == pytest.approx(ind.masks[0].candidates[0].prob * ind.masks[1].candidates[0].prob)
    it = fill_mask(lm, FillMaskConfig(text, strategy="iterative"))
    first = max(range(2), key=lambda m: it.masks[m].candidates[0].prob)
    assert it.fill_order[0] == first and sorted(it.fill_order) == [0, 1]
    assert it.fill_pieces[first] == it.masks[first].candidates[0].piece
    assert lm.tokenizer.mask_token not in it.filled_text
    # the second mask was re-predicted with the first one filled in
    ids = list(lm.tokenizer.convert_tokens_to_ids(list(it.tokens)))
    ids[it.mask_positions[first]] = lm.tokenizer.convert_tokens_to_ids(it.fill_pieces[first])
    second = 1 - first
    with torch.inference_mode():
        p = lm.model(input_ids=torch.tensor([ids])).logits[0, it.mask_positions[second]].float().softmax(-1)
    assert it.fill_probs[second] == pytest.approx(float(p.max()), rel=1e-4)


def test_batch_equals_one_at_a_time(mlm, family):
    lm = mlm[family]
    cfgs = [
        FillMaskConfig(t, strategy=s)
        for t, s in [
            ("The [MASK] is blue.", "independent"),
            ("Children were playing [MASK] in the park after [MASK] today.", "iterative"),
            ("[MASK] fell all night.", "iterative"),
        ]
    ]
    batch = fill_mask_batch(lm, cfgs)
    for c, b in zip(cfgs, batch):
        one = fill_mask(lm, c)
        assert one.fill_pieces == b.fill_pieces and one.fill_order == b.fill_order
        for m1, m2 in zip(one.masks, b.masks):
            assert [x.token_id for x in m1.candidates] == [x.token_id for x in m2.candidates]
            assert [x.prob for x in m1.candidates] == pytest.approx([x.prob for x in m2.candidates], rel=1e-3)


def test_configs_from_lines():
    cfgs = configs_from_lines("a [MASK] b\n\n  \nc [MASK] d\n", top_k=3, strategy="iterative")
    assert [c.text for c in cfgs] == ["a [MASK] b", "c [MASK] d"] and cfgs[1].top_k == 3
    with pytest.raises(ValueError, match="Line 3: The text has no \\[MASK\\]"):
        configs_from_lines("a [MASK]\nb [MASK]\nno mask here")
    with pytest.raises(ValueError, match="at most 64"):
        configs_from_lines("a [MASK] b\n" * 65)
    with pytest.raises(ValueError, match="empty"):
        configs_from_lines(" \n ")


@pytest.mark.parametrize(
    "text, word, fragment",
    [
        ("", None, "empty"),
        ("   ", None, "empty"),
        ("The cat sat on the mat.", None, "no [MASK]"),
        (" ".join(["word [MASK]"] * 30), None, "30 masks"),
        ("[MASK] [MASK] <mask>", None, "only masks"),
        ("[MASK] . [MASK] !", None, "only masks"),
        ("The [MASK] sat.", 0, "plain sentence"),
        ("The cat sat.", 9, "3 words"),
        ("!!! ???", 0, "no words"),
    ],
)
def test_bad_text_is_refused_with_a_reason(text, word, fragment):
    with pytest.raises(ValueError, match=r"(?i)" + __import__("re").escape(fragment)):
        FillMaskConfig(text, word=word)


@pytest.mark.parametrize("k", [0, 51, 2.5])
def test_top_k_range(k):
    with pytest.raises(ValueError, match="1 to 50"):
        FillMaskConfig("a [MASK] b", top_k=k)


def test_typed_special_tokens_are_removed_with_a_note(mlm, family):
    lm = mlm[family]
    r = fill_mask(lm, FillMaskConfig("[CLS] The cat [SEP] sat on the [MASK] . </s> <s>"))
    assert any("Removed" in n and "[CLS]" in n and "<s>" in n for n in r.notes)
    assert r.tokens.count(lm.tokenizer.cls_token) == 1 and r.tokens.count(lm.tokenizer.sep_token) == 1
    with pytest.raises(FillMaskError, match="only masks"):
        fill_mask(lm, FillMaskConfig("[CLS] [MASK] [SEP]"))


def test_unusual_scripts_do_not_crash_and_are_explained(mlm, family):
    lm = mlm[family]
    text = "Café\u0301 😀 北京 שלום [MASK] e\u0301te\u0301."
    r = fill_mask(lm, FillMaskConfig(text))
    assert len(r.masks) == 1
    joined = " ".join(r.notes)
    assert "CJK" in joined and "Right-to-left" in joined and "Combining" in joined
    assert ("unknown" in joined) or ("byte-level" in joined)


def test_long_text_keeps_masks_inside_the_window(mlm, family):
    lm = mlm[family]
    limit = lm.max_tokens
    filler = " ".join(["the river flows slowly through the old town"] * 60)
    r = fill_mask(lm, FillMaskConfig(filler + " and the [MASK] sat by the window " + filler))
    assert len(r.tokens) == limit and r.tokens[r.mask_positions[0]] == lm.tokenizer.mask_token
    assert r.truncation and f"at most {limit}" in r.truncation and "window around the masks" in r.truncation
    with pytest.raises(FillMaskError, match="Move the masks closer"):
        fill_mask(lm, FillMaskConfig("[MASK] " + filler + " [MASK] end"))


def test_checkpoint_without_mlm_head_is_refused():
    from core.models.tokenizer_build import minilm_folder

    lm = load(ModelSpec("bert", str(minilm_folder()), "cpu"), "mlm")
    assert lm.head_missing
    with pytest.raises(FillMaskError, match="no trained MLM head"):
        check_mlm(lm)
    with pytest.raises(FillMaskError, match="Pick a checkpoint pretrained with MLM"):
        fill_mask(lm, FillMaskConfig("The capital of France is [MASK]."))


def test_compare_two_to_four_models(mlm):
    res = compare([mlm["bert"], mlm["roberta"], mlm["albert"]], FillMaskConfig("The [MASK] is here."))
    assert [r.family for r in res.results] == ["bert", "roberta", "albert"]
    assert all(r.latency_ms > 0 for r in res.results)
    with pytest.raises(FillMaskError, match="2 to 4"):
        compare([mlm["bert"]], FillMaskConfig("The [MASK] is here."))


def test_result_is_frozen(mlm):
    r = fill_mask(mlm["bert"], FillMaskConfig("The [MASK] is here."))
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.top_k = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "fam,name", [("bert", "bert-mini"), ("distilbert", "distilbert-mini"), ("roberta", "roberta-mini")]
)
def test_meaning_on_bundled_models(fam, name):
    """A pretrained (bundled) model puts the masked word of plain held-out sentences in its top 5."""
    if not (zoo_dir() / name).is_dir():
        pytest.skip(f"bundled {name} not built (make models)")
    lm = load(ModelSpec(fam, f"encoderlab/{name}", "cpu"), "mlm")
    sentences = [
        ("He put the book on the table and went to bed.", "the"),
        ("She opened the door and walked into the kitchen.", "the"),
        ("We went to the park in the afternoon.", "to"),
    ]
    hits = []
    for text, target in sentences:
        k = [w.text.lower() for w in words(text)].index(target)
        r = fill_mask(lm, FillMaskConfig(text, word=k, top_k=5))
        assert len(r.masks) == 1
        top5 = [c.text.lower().strip().lstrip("Ġ▁") for c in r.masks[0].candidates]
        hits.append((text, target in top5, top5))
    # Small CPU-trained models: at least two of three plain sentences right (a random model gets ~none).
    assert sum(h for _, h, _ in hits) >= 2, hits


def test_typed_mask_has_no_lone_word_marker_beside_it(mlm, family):
    """ALBERT's [MASK] (like RoBERTa's <mask>) swallows the space before it, and no "▁" is prepended after it: a
    typed mask stands for one whole "▁word" piece, as the masks did in pretraining."""
    r = fill_mask(mlm[family], FillMaskConfig("The lord is my [MASK]. And [MASK] was here.", top_k=3))
    for p in r.mask_positions:
        assert r.tokens[p - 1] not in ("▁", "Ġ") and r.tokens[p + 1] not in ("▁", "Ġ"), r.tokens


def test_bundled_albert_reads_a_typed_mask_as_one_word(monkeypatch):
    monkeypatch.delenv("ENCODERLAB_ZOO", raising=False)
    if not (zoo_dir() / "albert-mini" / "model.safetensors").exists():
        pytest.skip("bundled zoo not built (make models)")
    lm = load(ModelSpec("albert", "encoderlab/albert-mini", "cpu"), "mlm")
    r = fill_mask(lm, FillMaskConfig("The lord is my [MASK].", top_k=5))
    assert r.tokens == ("[CLS]", "▁the", "▁lord", "▁is", "▁my", "[MASK]", ".", "[SEP]")
    assert all(c.piece.startswith("▁") for c in r.masks[0].candidates[:3])  # whole words, not word endings

"""core/inspect/patching on tiny random models of every family: patching the whole clean residual at the last layer
restores the clean metric exactly, patching nothing leaves the corrupted one, attribution patching equals exact
patching on a model made linear, each grid's entries are the single patched forwards they stand for, other forwards of
the same model are untouched while a patching runs, and bad inputs get their messages."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
import torch
from transformers import activations

from core.inspect.patching import PatchConfig, PatchError, count_rows, patch, patched_metrics, swap_word
from core.inspect.patching_sites import sites
from core.models.loading import ModelSpec, load
from core.models.tiny import example_texts
from core.registry import family, family_of_model, qk_modules
from core.registry.shape import shape
from tests.conftest import FAMILIES, GENERIC_KEY

PAIR_FAMILIES = [f for f in FAMILIES if family(f).pair_head]


def fresh(tiny_models, fam, task="mlm"):
    """The tiny model in float64: a random model's clean and corrupted metrics are close, and float32's batch-size
    rounding would show in the normalised numbers."""
    lm = load(ModelSpec(fam, str(tiny_models[fam]), "cpu"), task)
    lm.model.double()
    return lm


def masked_pair(lm) -> tuple[str, str]:
    """A clean text with one mask and a corrupted one: a word swapped for another of the same token length."""
    mask = lm.tokenizer.mask_token
    clean = f"the cat sat on the {mask} today"
    words = sorted({w.strip(".,!?;:\"'").lower() for t in example_texts() for w in t.split()} - {"cat", ""})
    for w in words:
        try:
            return clean, swap_word(lm.tokenizer, clean, "cat", w)
        except PatchError:
            continue
    raise AssertionError("no word of the example texts has the length of 'cat'")


def config(lm, **kw) -> PatchConfig:
    clean, corrupted = masked_pair(lm)
    return PatchConfig(clean, corrupted, **kw)


@pytest.mark.parametrize("direction", ["denoise", "noise"])
@pytest.mark.parametrize("fam", FAMILIES)
def test_the_whole_other_residual_at_the_last_layer_gives_the_other_metric(fam, direction, tiny_models):
    lm = fresh(tiny_models, fam)
    cfg = config(lm, direction=direction)
    L = sites(lm.model).n_layers
    got = patched_metrics(lm, cfg, [("resid", L, None, None), ()])
    clean, nothing = (1.0, 0.0) if direction == "denoise" else (0.0, 1.0)
    np.testing.assert_allclose(got, [clean, nothing], atol=1e-5)


@pytest.mark.parametrize("fam", FAMILIES)
def test_the_grids_are_the_single_patched_forwards(fam, tiny_models):
    lm = fresh(tiny_models, fam)
    cfg = config(lm)
    r = patch(lm, cfg)
    L, n = r.n_layers, len(r.tokens)
    assert r.exact["resid"].shape == (L + 1, n) and r.rows == count_rows(n, sites(lm.model), cfg)
    # the mask's own position after the last layer carries everything the MLM head reads
    assert r.exact["resid"][L, r.position] == pytest.approx(1.0, abs=1e-5)
    # a position after the last layer other than the mask's changes nothing
    assert r.exact["resid"][L, 1 if r.position != 1 else 2] == pytest.approx(0.0, abs=1e-5)
    picks = [("resid", 1, 2, None), ("mlp", L - 1, None, None), ("heads", 0, 1, 2)]
    picks = [p for p in picks if p[0] == "resid" or p[0] in sites(lm.model).modules]
    single = patched_metrics(lm, cfg, picks)
    grid = {"resid": r.exact["resid"][1, 2]}
    if "mlp" in r.exact:
        grid["mlp"] = r.exact["mlp"][L - 1]
    if "heads_pos" in r.exact:
        grid["heads"] = r.exact["heads_pos"][0, 2, 1]
    np.testing.assert_allclose(single, [grid[p[0]] for p in picks], atol=1e-5)
    assert r.answers[0] != r.answers[1] and r.clean_metric != r.corrupted_metric
    assert np.isfinite(r.correlation()) and r.exact_seconds > 0 and r.attribution_seconds > 0
    small = abs(r.clean_metric - r.corrupted_metric) < 1.0  # a random model's metrics are close: said in a note
    assert ("patching.small_difference" in [n.kind for n in r.notes]) == small


def linearise(model, monkeypatch) -> None:
    """Make ``model`` linear in every activation: layer norms and activations become the identity (also an
    activation a modelling module calls by its module-level name, as RoBERTa's MLM head calls ``gelu``), queries and
    keys are zeroed (uniform attention), and a gated unit's gate half is zeroed (its product would be quadratic)."""
    act_types = (torch.nn.GELU, torch.nn.ReLU, torch.nn.Tanh, torch.nn.SiLU)
    for code in {sys.modules[type(m).__module__] for m in model.modules()}:
        for name, value in list(vars(code).items()):
            if isinstance(value, torch.nn.Module) and type(value).__module__ == activations.__name__:
                monkeypatch.setattr(code, name, torch.nn.Identity())
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            is_act = isinstance(child, act_types) or type(child).__module__ == activations.__name__
            if is_act or "Norm" in type(child).__name__:
                setattr(parent, name, torch.nn.Identity())
    fam = family_of_model(model)
    qk = qk_modules(model)
    sh = shape(model.base_model.config)
    hidden, ffn = sh.hidden, sh.ffn
    with torch.no_grad():
        for name, m in model.base_model.named_modules():
            if not isinstance(m, torch.nn.Linear):
                continue
            rows = None
            if qk and name.rsplit(".", 1)[-1] in qk:
                rows = slice(None)
            elif qk is None and fam.value_proj and name.endswith(fam.value_proj[0]):  # fused q|k|v
                width = m.out_features // fam.value_proj[2]
                rows = slice(0, fam.value_proj[1] * width)
            elif m.in_features == hidden and m.out_features == 2 * ffn:  # a gated unit: input | gate
                rows = slice(ffn, None)
            if rows is not None:
                m.weight[rows] = 0
                if m.bias is not None:
                    m.bias[rows] = 0


@pytest.mark.parametrize("direction", ["denoise", "noise"])
@pytest.mark.parametrize("fam", FAMILIES)
def test_attribution_patching_is_exact_on_a_linear_model(fam, direction, tiny_models, monkeypatch):
    lm = fresh(tiny_models, fam)
    linearise(lm.model, monkeypatch)
    r = patch(lm, config(lm, direction=direction))
    assert set(r.exact) == set(r.attribution)
    for key in r.exact:
        np.testing.assert_allclose(r.attribution[key], r.exact[key], atol=1e-6, err_msg=key)
    assert r.correlation() == pytest.approx(1.0, abs=1e-6)


def test_on_a_real_nonlinear_model_the_estimate_differs_but_follows(tiny_models):
    """The linear check can fail: on the model as trained, attribution patching is an estimate."""
    lm = fresh(tiny_models, FAMILIES[0])
    r = patch(lm, config(lm))
    assert max(np.abs(r.attribution[k] - r.exact[k]).max() for k in r.exact) > 1e-4


@pytest.mark.parametrize("fam", PAIR_FAMILIES)
def test_the_pair_head_is_a_target(fam, tiny_models):
    lm = fresh(tiny_models, fam, task="pretraining")
    cfg = PatchConfig(
        "the cat sat on the mat.",
        "the mat sat on the cat.",
        target="pair",
        clean_b="it was warm.",
        corrupted_b="it was warm.",
        kinds=("resid",),
    )
    r = patch(lm, cfg)
    L = r.n_layers
    # the pair head reads the first token's pooled state: the first position after the last layer restores it
    assert r.exact["resid"][L, 0] == pytest.approx(1.0, abs=1e-5) and r.position == -1
    assert set(r.exact) == {"resid"}


def test_other_forwards_of_the_model_are_untouched_while_patching_runs(tiny_models):
    lm = fresh(tiny_models, FAMILIES[0])
    enc = lm.tokenizer("the cat sat on the mat", return_tensors="pt")
    with torch.no_grad():
        want = lm.model(**enc).logits
    seen = []

    def other():
        with torch.no_grad():
            seen.append(torch.equal(lm.model(**enc).logits, want))

    def progress(_fraction, _message):  # between two patched forwards, with the call's hooks on the model
        t = threading.Thread(target=other)
        t.start()
        t.join()

    patch(lm, config(lm), progress=progress)
    assert seen and all(seen)
    hooks = [m for m in lm.model.modules() if m._forward_hooks or m._forward_pre_hooks]
    assert not hooks, "a hook was left on the model"


def test_the_generic_family_patches_what_the_registry_locates(tiny_models):
    lm = fresh(tiny_models, GENERIC_KEY)
    r = patch(lm, config(lm))
    assert "heads" not in r.exact and {"resid", "mlp"} <= set(r.exact)
    assert [n.kind for n in r.notes if n.kind != "patching.small_difference"] == ["patching.no_heads"]


def test_bad_inputs_get_their_messages(tiny_models):
    lm = fresh(tiny_models, FAMILIES[0])
    mask = lm.tokenizer.mask_token
    cases = {
        "patching.lengths_differ": PatchConfig(f"the cat sat on the {mask}", f"the cat sat on the old red {mask}"),
        "patching.one_mask": PatchConfig("the cat sat on the mat", "the dog sat on the mat"),
        "patching.same_answers": PatchConfig(
            f"the cat sat on the {mask}", f"the dog sat on the {mask}", clean_answer="mat", corrupted_answer="mat"
        ),
    }
    for kind, cfg in cases.items():
        with pytest.raises(PatchError) as e:
            patch(lm, cfg)
        assert e.value.kind == kind
    for kind, kw in {
        "patching.empty_text": dict(clean=" ", corrupted="x"),
        "patching.unknown_direction": dict(clean="a", corrupted="b", direction="sideways"),
        "patching.unknown_kinds": dict(clean="a", corrupted="b", kinds=("attn",)),
        "patching.pair_needs_both": dict(clean="a", corrupted="b", target="pair"),
    }.items():
        with pytest.raises(PatchError) as e:
            PatchConfig(**kw)
        assert e.value.kind == kind
    with pytest.raises(PatchError) as e:
        swap_word(lm.tokenizer, "the cat sat", "dog", "cat")
    assert e.value.kind == "patching.word_not_found"
    with pytest.raises(PatchError) as e:
        swap_word(lm.tokenizer, "the cat sat", "cat", "internationalisation")
    assert e.value.kind == "patching.swap_lengths_differ"
    with pytest.raises(PatchError) as e:  # a whole word only: "cat" is not a word of "concatenate"
        swap_word(lm.tokenizer, "concatenate it", "cat", "dog")
    assert e.value.kind == "patching.word_not_found"


def test_a_chinese_character_swaps_inside_its_word():
    """Chinese has no spaces: a character or a 词 swaps wherever it stands (a \\w boundary would refuse it). On the
    bundled XLM-R's tokenizer, as the Patching tab's Chinese example uses it."""
    from transformers import AutoTokenizer

    from core.base.paths import ASSETS

    tok = AutoTokenizer.from_pretrained(ASSETS / "models" / "xlmr-e5-small")
    text = "他每天早上喝一杯咖<mask>。"
    out = swap_word(tok, text, "咖", "可")
    assert out == "他每天早上喝一杯可<mask>。" and len(tok(out)["input_ids"]) == len(tok(text)["input_ids"])
    with pytest.raises(PatchError) as e:  # 咖啡 is one piece, 可啡 two: refused, as the tab says
        swap_word(tok, "他每天早上喝一杯咖啡。", "咖", "可")
    assert e.value.kind == "patching.swap_lengths_differ"
    assert swap_word(tok, "我住在上海。", "上海", "北京") == "我住在北京。"
    with pytest.raises(PatchError) as e:
        swap_word(tok, text, "茶", "水")
    assert e.value.kind == "patching.word_not_found"

"""core/inspect/sae, sae_store and sae_features on tiny random models: the states are the model's hidden states, the SAE
keeps at most k features per token with unit-norm decoder rows and learns (its unexplained variance falls), the
layer-replacing hook is exact (an identity edit gives the clean loss), a saved SAE loads as it was, steering to a
feature's own activation changes nothing while switching a strong feature off does, the browser's lookups agree
with its data, and bad settings get their messages."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.inspect import sae as S
from core.inspect import sae_features as SF
from core.inspect import sae_store as SS
from core.models.loading import ModelSpec, load
from core.models.tiny import example_texts
from core.registry import final_norm
from tests.conftest import FAMILIES

TEXTS = tuple(f"{a} {b.lower()}" for a in example_texts()[:10] for b in example_texts()[10:16])  # 60 sentences


def fresh(tiny_models, fam="bert"):
    return load(ModelSpec(fam, str(tiny_models[fam]), "cpu"), "mlm")


def cfg(**kw) -> S.SAEConfig:
    return S.SAEConfig(
        **{"layer": 1, "expansion": 4, "k": 8, "steps": 60, "batch_tokens": 256, "lr": 1e-3, "texts": TEXTS, **kw}
    )


@pytest.mark.parametrize("fam", FAMILIES)
def test_the_states_are_the_models_hidden_states(fam, tiny_models):
    """At every layer, the last included: there, where the base model normalises after its last layer (the
    registry's final_norm), the state is the norm's input, which the MLM head reads through that norm."""
    lm = fresh(tiny_models, fam)
    enc = lm.tokenizer(
        list(TEXTS[:5]),
        padding=True,
        truncation=True,
        max_length=S.MAX_LENGTH,
        return_tensors="pt",
        return_special_tokens_mask=True,
    )
    special = enc.pop("special_tokens_mask")
    enc = {k: v for k, v in enc.items() if k in lm.tokenizer.model_input_names}
    norm = final_norm(lm.model)
    seen = []
    hook = norm.register_forward_pre_hook(lambda _m, args: seen.append(args[0])) if norm is not None else None
    try:
        with torch.no_grad():
            hs = lm.model.base_model(**enc, output_hidden_states=True).hidden_states
    finally:
        if hook is not None:
            hook.remove()
    n_layers = len(hs) - 1
    for layer in range(1, n_layers + 1):
        states, sent, pos = S.layer_states(lm, TEXTS[:5], layer, seed=0)
        want = seen[0] if layer == n_layers and seen else hs[layer]
        assert len(states) == int(((enc["attention_mask"] == 1) & (special == 0)).sum())
        torch.testing.assert_close(states, want[sent, pos].float(), atol=1e-5, rtol=1e-4)


@pytest.fixture(scope="module")
def trained(tiny_models, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENCODERLAB_SAE_DIR", str(tmp_path_factory.mktemp("sae")))
        lm = fresh(tiny_models)
        seen = []
        sae, report, browse = SS.train_and_save(lm, cfg(), progress=lambda f, m, **k: seen.append((f, m, k)))
        yield lm, sae, report, browse, seen


def test_training_learns_and_reports(trained):
    lm, sae, report, browse, seen = trained
    steps = [k for _, _, k in seen if "mse" in k]
    assert steps[-1]["mse"] < steps[0]["mse"]  # it learns
    assert 0 < report.quality["variance_explained"] <= 1 and report.features == 4 * report.hidden
    assert report.quality["l0"] <= 8 and np.isfinite([report.quality[k] for k in ("loss_zero", "loss_sae")]).all()
    assert seen[-1][0] == 1.0 and seen[-1][1].kind == "progress.sae.saved"
    x, _, _ = S.layer_states(lm, TEXTS[:4], 1, seed=1)
    codes = sae.encode(x)
    assert int((codes > 0).sum(1).max()) <= sae.k
    torch.testing.assert_close(sae.w_dec.norm(dim=1), torch.ones(sae.features), atol=1e-5, rtol=0)
    assert browse.ctx_activation.shape == (sae.features, SS.TOP_CONTEXTS) and len(browse.sentences) == 12


def test_an_identity_edit_gives_the_clean_loss_and_zeros_do_not(trained):
    lm = trained[0]
    clean, same, zero = S.mlm_losses(lm, lambda h: h, 1, TEXTS[:8], seed=0)
    assert same == pytest.approx(clean, abs=1e-6) and zero != pytest.approx(clean, abs=1e-3)


def test_a_saved_sae_loads_as_it_was(trained):
    lm, sae, report, browse, _ = trained
    SS._forget_all()
    got = SS.load_sae(lm, cfg())
    assert got is not None
    sae2, report2, browse2 = got
    x = torch.randn(5, report.hidden)
    torch.testing.assert_close(sae2(x), sae(x))
    assert report2.to_json() == report.to_json() and browse2.sentences == browse.sentences  # NaN != NaN: as text
    np.testing.assert_array_equal(browse2.ctx_token, browse.ctx_token)
    assert SS.load_sae(lm, cfg())[0] is sae2  # kept: a second visit loads at once
    assert SS.load_sae(lm, cfg(k=4)) is None  # other settings: not trained


def test_steering_a_silent_feature_to_zero_changes_nothing_and_a_push_does(trained):
    lm, sae, _, browse, _ = trained
    mask = lm.tokenizer.mask_token
    text = f"the cat sat on the {mask} ."
    enc = lm.tokenizer(text, return_tensors="pt")
    enc = {k: v for k, v in enc.items() if k in lm.tokenizer.model_input_names}
    acts = sae.encode(S.states_at(lm, enc, 1)[0])
    silent = int(torch.nonzero(acts.max(0).values == 0)[0])  # fires on no token of this text
    same = SF.steer(lm, sae, 1, text, silent, 0.0)
    assert same.before == same.after and same.masks and len(same.before[0]) == len(same.words[0]) >= 5
    push = SF.steer(lm, sae, 1, text, silent, 50.0)
    # before's top five come first, the same either way; the push moves the probabilities
    assert push.words[0][:5] == same.words[0][:5] and push.before[0][:5] == same.before[0][:5]
    assert push.after != push.before


def test_a_features_direction_is_what_one_unit_of_it_adds_and_clamping_sets_it(trained):
    """The units steering rests on: decoding one more unit of feature f adds direction(f) (the scale undone), and
    the clamp edit moves each chosen token by (value - its activation) x direction(f), and no other token."""
    lm, sae, _, _, _ = trained
    x, _, _ = S.layer_states(lm, TEXTS[:2], 1, seed=3)
    codes = sae.encode(x)
    f = int(codes[0].argmax())
    bumped = codes.clone()
    bumped[:, f] += 2.5
    torch.testing.assert_close(sae.decode(bumped) - sae.decode(codes), 2.5 * sae.direction(f).expand_as(x))
    h = x[None, :6]
    on = torch.tensor([[True, False, True, True, False, True]])
    edited = SF.clamp_edit(sae, f, 7.0, on)(h)
    a = sae.encode(h[0])[:, f]
    want = h + ((7.0 - a)[:, None] * sae.direction(f) * on[0, :, None])[None]
    torch.testing.assert_close(edited, want)
    assert torch.equal(edited[0, 1], h[0, 1]) and not torch.equal(edited[0, 0], h[0, 0])


def test_the_browsers_lookups_agree_with_its_data(trained):
    lm, sae, _, browse, _ = trained
    f = int(np.argmax(browse.ctx_activation[:, 0]))
    ctx = SF.contexts(lm, sae, browse, f)
    assert ctx and ctx[0].activation == pytest.approx(float(browse.ctx_activation[f, 0]))
    piece = ctx[0].pieces[ctx[0].position]
    hits = SF.search(lm, browse, piece)
    assert f in [h[0] for h in hits]
    up, down = SF.logit_effects(lm, sae, browse, f)
    assert len(up) == SF.TOP_TOKENS and up[0][1] >= up[-1][1] and down[0][1] <= 0
    pieces, rows = SF.token_features(lm, sae, 1, TEXTS[0])
    assert len(pieces) == len(rows) and all(len(r) <= 5 for r in rows)


def test_bad_settings_and_requests_get_their_messages(trained):
    lm, sae, _, browse, _ = trained
    for kw, kind in (
        (dict(layer=0), "sae.layer_out_of_range"),
        (dict(expansion=99), "sae.expansion_out_of_range"),
        (dict(steps=0), "sae.steps_out_of_range"),
        (dict(texts=("one sentence",) * 3), "sae.too_few_texts"),
    ):
        with pytest.raises(S.SAEError) as e:
            cfg(**kw)
        assert e.value.kind == kind
    with pytest.raises(S.SAEError) as e:
        cfg(layer=9).check(lm)
    assert e.value.kind == "sae.layer_out_of_range"
    with pytest.raises(S.SAEError) as e:
        SF.contexts(lm, sae, browse, sae.features)
    assert e.value.kind == "sae.feature_out_of_range"
    with pytest.raises(S.SAEError) as e:
        SF.steer(lm, sae, 1, "no mask here", 0, 0.0)
    assert e.value.kind == "sae.no_mask"

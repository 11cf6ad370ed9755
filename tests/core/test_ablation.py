"""core/inspect/ablation: head switches through our own hooks (transformers 5 has no head_mask), for all four families on
tiny random models: exactness with no head off, depth-local effects (ALBERT's shared layer too), zero vs mean,
the packed fill-mask path, thread isolation, the text format, and the three recomputed predictions."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from core.base.text import display_piece
from core.inspect import ablation as ab
from core.inspect.ablation import AblationConfig, AblationError, ablated
from core.inspect.ablation_predict import PAIR_LABELS, ablate_classify, ablate_fill_mask, ablate_pair
from core.models.loading import ModelSpec, load
from core.predict.fill_mask import FillMaskConfig
from core.predict.sentence_pair import PairConfig, PairError

_LOADED: dict = {}
TEXT = "the cat sat on the mat and looked at the dog"
MEAN_TEXTS = ["the cat sat on the mat", "a dog ran in the park today", "it was a good day"]


def rel_change(a, b) -> float:
    return max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a, b))


def loaded(tiny_models, family):
    if family not in _LOADED:
        _LOADED[family] = load(ModelSpec(family, str(tiny_models[family]), "cpu"), "pretraining")
    return _LOADED[family]


def forward(lm, text=TEXT):
    enc = lm.tokenizer(text, return_tensors="pt")
    with torch.inference_mode():
        out = lm.model(
            **{k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")}, output_hidden_states=True
        )
    logits = out.logits if "logits" in out else out.prediction_logits
    return logits, out.hidden_states


def test_no_head_off_is_exactly_the_normal_forward(family, tiny_models):
    lm = load(ModelSpec(family, str(tiny_models[family]), "cpu"), "pretraining")  # a fresh model: no hooks yet
    plain_logits, plain_hidden = forward(lm)
    ab.layout(lm.model)  # hooks installed
    with ablated(lm, AblationConfig(())):
        logits, hidden = forward(lm)
    assert torch.equal(logits, plain_logits)
    assert all(torch.equal(a, b) for a, b in zip(hidden, plain_hidden))
    logits, hidden = forward(lm)  # outside any block, hooks installed
    assert torch.equal(logits, plain_logits) and all(torch.equal(a, b) for a, b in zip(hidden, plain_hidden))


def test_a_head_off_changes_its_depth_on_only_and_zero_differs_from_mean(family, tiny_models):
    lm = loaded(tiny_models, family)
    base_logits, base_hidden = forward(lm)
    with ablated(lm, AblationConfig(((1, 2),), "zero")):
        z_logits, z_hidden = forward(lm)
    with ablated(lm, AblationConfig(((1, 2),), "mean"), means=ab.head_means(lm, MEAN_TEXTS)):
        m_logits, m_hidden = forward(lm)
    # depth 1 (the second layer) is switched: the embeddings and the first layer's output are untouched, even for
    # ALBERT, whose one shared layer runs at both depths
    assert torch.equal(z_hidden[1], base_hidden[1]) and torch.equal(m_hidden[1], base_hidden[1])
    assert (z_hidden[2] - base_hidden[2]).abs().max() > 1e-4
    assert (z_logits - base_logits).abs().max() > 1e-5
    assert (z_logits - m_logits).abs().max() > 1e-6
    with ablated(lm, AblationConfig(((0, 2),))):
        first, _ = forward(lm)
    with ablated(lm, AblationConfig(((0, 2), (1, 2)))):
        both, _ = forward(lm)
    assert (first - both).abs().max() > 1e-6 and (first - z_logits).abs().max() > 1e-6


def test_mean_ablation_uses_the_head_means(tiny_models):
    lm = loaded(tiny_models, "bert")
    texts = ["the cat sat on the mat", "a dog ran in the park today"]
    means = ab.head_means(lm, texts)
    assert means.shape == (2, 4, 8) and np.isfinite(means).all()
    assert ab.head_means(lm, texts) is means  # cached
    with pytest.raises(AblationError, match="shape"):
        with ablated(lm, AblationConfig(((0, 0),), "mean"), means=np.zeros((3, 4, 8))):
            pass
    # mean-ablation with all-zero means is zero-ablation
    with ablated(lm, AblationConfig(((1, 1),), "mean"), means=np.zeros_like(means)):
        a, _ = forward(lm)
    with ablated(lm, AblationConfig(((1, 1),), "zero")):
        b, _ = forward(lm)
    assert torch.allclose(a, b, atol=1e-6)


def test_another_threads_forward_at_the_same_time_is_unaffected(tiny_models):
    lm = loaded(tiny_models, "albert")
    normal, _ = forward(lm)
    with ablated(lm, AblationConfig(((0, 0), (1, 3)))):
        off, _ = forward(lm)
    assert (normal - off).abs().max() > 1e-5
    inside, done, errors = threading.Event(), threading.Event(), []
    seen = {"ablated": [], "normal": []}

    def ablating():
        try:
            with ablated(lm, AblationConfig(((0, 0), (1, 3)))):
                inside.set()
                while not done.is_set():  # forwards keep running while the other thread runs its own
                    seen["ablated"].append(forward(lm)[0])
                seen["ablated"].append(forward(lm)[0])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def normal_thread():
        try:
            assert inside.wait(30)
            for _ in range(20):
                seen["normal"].append(forward(lm)[0])
        except Exception as e:  # pragma: no cover
            errors.append(e)
        finally:
            done.set()

    threads = [threading.Thread(target=ablating), threading.Thread(target=normal_thread)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(seen["normal"]) == 20 and len(seen["ablated"]) >= 1
    assert all(torch.equal(x, normal) for x in seen["normal"])
    assert all(torch.allclose(x, off, atol=1e-6) for x in seen["ablated"])


@pytest.mark.parametrize(
    "spec,expected",
    [
        ("L3H7", ((3, 7),)),
        ("l3h7, L0H0", ((0, 0), (3, 7))),
        ("L3H7 L3H8  L3H7", ((3, 7), (3, 8))),
        ("L1*", tuple((1, h) for h in range(12))),
        ("*H1", tuple((la, 1) for la in range(4))),
        ("", ()),
    ],
)
def test_parse_heads(spec, expected):
    assert ab.parse_heads(spec, 4, 12) == expected


@pytest.mark.parametrize(
    "spec,msg",
    [
        ("L4H1", "no layer 4"),
        ("L1H12", "no head 12"),
        ("L-1H1", "not a head"),
        ("head3", "is not a head"),
        ("L3H", "is not a head"),
        ("**", "is not a head"),
    ],
)
def test_parse_heads_bad_input_names_the_token_and_the_range(spec, msg):
    with pytest.raises(AblationError, match=msg) as e:
        ab.parse_heads(spec, 4, 12)
    assert "4 layers of 12 heads: L0H0 … L3H11" in str(e.value)


def test_format_heads_is_the_inverse():
    heads = ab.parse_heads("L3H7, L5*, L0H2", 6, 12)
    assert ab.format_heads(heads, 12) == "L0H2, L3H7, L5*"
    assert ab.parse_heads(ab.format_heads(heads, 12), 6, 12) == heads


def test_config_checks_itself(tiny_models):
    with pytest.raises(AblationError, match="zero, mean"):
        AblationConfig(((0, 0),), "half")
    with pytest.raises(AblationError, match="cannot be negative"):
        AblationConfig(((-1, 0),))
    assert AblationConfig(((1, 0), (0, 3), (1, 0))).heads == ((0, 3), (1, 0))
    lm = loaded(tiny_models, "bert")
    with pytest.raises(AblationError, match="L2H0 is outside the model: the model has 2 layers of 4 heads"):
        ablate_fill_mask(lm, FillMaskConfig("the cat [MASK] on the mat"), AblationConfig(((2, 0),)))


def test_ablate_fill_mask(family, tiny_models):
    lm = loaded(tiny_models, family)
    cfg = FillMaskConfig("the cat [MASK] on the mat and [MASK] at the dog", top_k=5)
    same = ablate_fill_mask(lm, cfg, AblationConfig(()))
    assert same.before == same.after and same.delta == 0.0 and same.answer_before == same.answer_after
    assert same.before_result.masks == same.after_result.masks
    heads = AblationConfig(((0, 0), (0, 1), (1, 0), (1, 3)))
    r = ablate_fill_mask(lm, cfg, heads)
    assert r.kind == "fill_mask" and r.heads == heads.heads and r.mode == "zero" and len(r.labels) == 5

    def shown(c):  # a candidate as a person reads it (no Ġ/▁)
        return display_piece(c.piece, lm.tokenizer)

    assert r.labels == tuple(shown(c) for c in r.before_result.masks[0].candidates)
    assert rel_change(r.after, r.before) > 1e-4  # random tiny weights: small, but real, changes
    assert r.delta == pytest.approx(r.after[0] - r.before[0])
    assert r.after_top == tuple((shown(c), c.prob) for c in r.after_result.masks[0].candidates)
    # the fill-mask fast path (masked last layer, packed linears) is ablated like the plain transformers forward
    enc = lm.tokenizer(r.before_result.model_text, return_tensors="pt")
    pos = r.before_result.mask_positions[0]
    with ablated(lm, heads), torch.inference_mode():
        out = lm.model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
    probs = (out.logits if "logits" in out else out.prediction_logits)[0, pos].softmax(-1)
    ids = [c.token_id for c in r.before_result.masks[0].candidates]
    assert np.allclose(r.after, probs[ids].numpy(), rtol=1e-3, atol=1e-7)


@pytest.mark.parametrize("fam", ["bert", "albert"])
def test_ablate_pair(fam, tiny_models):
    lm = loaded(tiny_models, fam)
    cfg = PairConfig("The cat sat on the mat.", "Then it went to sleep.")
    same = ablate_pair(lm, cfg, AblationConfig(()))
    assert same.before == same.after
    r = ablate_pair(lm, cfg, AblationConfig(ab.parse_heads("L0*", 2, 4), "mean"), ab.head_means(lm, MEAN_TEXTS))
    assert r.kind == "pair" and r.labels == PAIR_LABELS["nsp" if fam == "bert" else "sop"]
    assert r.before[0] == pytest.approx(r.before_result.scores[0].prob) and sum(r.after) == pytest.approx(1.0)
    assert rel_change(r.after, r.before) > 1e-6


@pytest.mark.parametrize("fam", ["roberta", "distilbert"])
def test_ablate_pair_without_a_pair_head_says_why(fam, tiny_models):
    with pytest.raises(PairError, match="no sentence-pair head"):
        ablate_pair(loaded(tiny_models, fam), PairConfig("A cat.", "A dog."), AblationConfig(((0, 0),)))


@pytest.fixture(scope="module")
def tiny_classifiers(tiny_models, tmp_path_factory):
    """A tiny fine-tuned classifier with mean pooling (core.predict.classify's wrapper around the encoder; the family's
    own *ForSequenceClassification is covered in test_head_importance)."""
    from core.data.datasets_local import LabelledData, Split
    from core.predict.classify import load_finetuned
    from core.train.finetune import train
    from core.train.finetune_config import FinetuneConfig

    texts = tuple(f"it was {w}" for w in ("good", "bad", "great", "awful") * 4)
    data = LabelledData(
        "toy",
        Split(texts, (1, 0, 1, 0) * 4),
        Split(texts[:8], (1, 0, 1, 0) * 2),
        ("neg", "pos"),
        "generated in the test",
        "n/a",
    )
    out = {}
    for fam, pooling in (("bert", "mean"),):
        cfg = FinetuneConfig(fam, str(tiny_models[fam]), max_steps=2, batch_size=8, max_length=16, pooling=pooling)
        r = train(cfg, data, tmp_path_factory.mktemp(f"cls-{fam}"))
        out[fam] = (load_finetuned(r.model_dir, device="cpu"), r)
    return out


@pytest.mark.parametrize("fam", ["bert"])
def test_ablate_classify(fam, tiny_classifiers):
    fm, _ = tiny_classifiers[fam]
    same = ablate_classify(fm, "it was good", None, AblationConfig(()))
    assert same.before == same.after and same.labels == ("neg", "pos")
    r = ablate_classify(fm, "it was good", None, AblationConfig(ab.parse_heads("L0*, L1H0", 2, 4)))
    assert r.kind == "classify" and sum(r.after) == pytest.approx(1.0)
    assert rel_change(r.after, r.before) > 1e-6
    with pytest.raises(AblationError, match="empty"):
        ablate_classify(fm, "  ", None, AblationConfig(()))


def test_a_bad_head_spec_is_explained_in_chinese_to_its_end(ui_lang):
    """#46 (third walk): the end of the head-spec error (the model's range) stayed English in 中文."""
    from app.kit import i18n
    from tests.english import english_runs

    with pytest.raises(AblationError) as e:
        ab.parse_heads("L9H1", 4, 4)
    ui_lang("zh")
    shown = i18n.explain(e.value)
    assert "这个模型有 4 层，每层 4 个头：L0H0 … L3H3" in shown and not english_runs(shown), shown

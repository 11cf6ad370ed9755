"""core.inspect.attention: the forward pass on tiny models of every family, and the pure functions on hand-made matrices."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from app.kit.exports import attention_npz
from core.base.text import display_piece
from core.inspect.attention import (
    FLOW_MAP_MAX_TOKENS,
    PATTERNS,
    AttentionConfig,
    AttentionUnavailable,
    adjacent_similarity,
    compare_attention,
    compute_attention,
    find_heads,
    flow,
    head_stats,
    is_punct,
    layer_similarity,
    position_limit,
    qk_view,
    relevance,
    residual_attention,
    rollout,
)
from core.models.loading import ModelSpec, load
from core.registry import FAMILIES, family_of_model

ROOT = Path(__file__).resolve().parents[2]
TEXT = "The cat sat on the mat, and then it slept."


@pytest.fixture(scope="module")
def loaded(tiny_models):
    return {f: load(ModelSpec(f, str(p), "cpu"), task="base", attentions=True) for f, p in tiny_models.items()}


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _hooks(model) -> int:
    """Forward hooks on the query/key projections (where ours go; transformers adds its own elsewhere)."""
    names = family_of_model(model).qk_modules or ()
    return sum(len(m._forward_hooks) for n, m in model.named_modules() if n.rsplit(".", 1)[-1] in names)


# ---------------------------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(text=""), "text is empty"),
        (dict(text="   \n"), "text is empty"),
        (dict(text="", text_b="b", pair=True), "Sentence A is empty"),
        (dict(text="a", text_b=" ", pair=True), "Sentence B is empty"),
    ],
)
def test_config_rejects_empty_input(kwargs, words):
    with pytest.raises(ValueError, match=words):
        AttentionConfig(**kwargs)


# ---------------------------------------------------------------------------------------------- forward pass
def test_compute_attention_shapes_and_masks(loaded, family):
    lm = loaded[family]
    r = compute_attention(lm, AttentionConfig(TEXT))
    cfg = lm.model.config
    n_layers = getattr(cfg, "num_hidden_layers", None) or cfg.n_layers
    assert r.attentions.shape[:2] == (n_layers, 4)
    assert r.attentions.shape[2] == r.attentions.shape[3] == len(r.tokens) == len(r.labels)
    assert r.attentions.dtype == np.float16
    np.testing.assert_allclose(r.attentions.astype(np.float64).sum(-1), 1.0, atol=5e-3)
    assert r.cls_mask[0] and r.cls_mask.sum() == 1 and r.cls_index == 0
    assert r.sep_mask[-1] and r.sep_mask.sum() == 1
    assert r.punct_mask.any() and not (r.punct_mask & (r.cls_mask | r.sep_mask)).any()
    assert r.sentence_b_start is None and r.family == family
    assert _hooks(lm.model) == 0


def test_pair_marks_sentence_b(loaded, family):
    lm = loaded[family]
    r = compute_attention(lm, AttentionConfig("The cat sat.", "It slept.", pair=True))
    b = r.sentence_b_start
    assert b is not None and 0 < b < r.n_tokens
    assert r.sep_mask[:b].any() and r.sep_mask[-1]  # A ends with a separator, and so does B
    assert not r.sep_mask[b] and not r.cls_mask[b]


def test_captured_q_and_k_reproduce_the_attention(loaded, family):
    """softmax(q k^T / sqrt(d)) from the hooked projections equals the weights the model returned, in every
    layer: this holds for ALBERT's shared layer too (its projection fires once per layer)."""
    lm = loaded[family]
    r = compute_attention(lm, AttentionConfig(TEXT))
    if FAMILIES[family].qk_modules is None:  # fused q/k (ModernBERT): no view, and the page is told why
        assert r.queries is None and r.qk_note == FAMILIES[family].qk_note
        return
    q, k = r.queries.astype(np.float64), r.keys.astype(np.float64)
    assert q.shape[:3] == r.attentions.shape[:3] and q.shape == k.shape
    rebuilt = _softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
    np.testing.assert_allclose(rebuilt, r.attentions.astype(np.float64), atol=5e-3)
    v = qk_view(r.queries, r.keys, layer=1, head=2, index=3)
    np.testing.assert_allclose(v.weights, r.attentions[1, 2, 3].astype(np.float64), atol=5e-3)


def test_model_is_untouched_and_hooks_are_removed_on_error(loaded, monkeypatch):
    lm = loaded["bert"]
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    compute_attention(lm, AttentionConfig(TEXT))
    assert all((before[k] == v).all() for k, v in lm.model.state_dict().items())

    def boom(*a, **k):
        raise RuntimeError("encoder failed")

    monkeypatch.setattr(lm.model.encoder, "forward", boom)
    with pytest.raises(RuntimeError, match="encoder failed"):
        compute_attention(lm, AttentionConfig(TEXT))
    assert _hooks(lm.model) == 0


def test_too_long_text_names_the_limit(loaded, family):
    lm = loaded[family]  # the tiny models have 128 positions (RoBERTa: 130 less its padding offset)
    limit = position_limit(lm.model, lm.tokenizer)
    assert limit in (128, 129)
    with pytest.raises(ValueError, match=rf"reads at most {limit}"):
        compute_attention(lm, AttentionConfig(" ".join(["word"] * 200)))


def test_sdpa_model_explains_why_there_is_no_attention(tiny_models):
    lm = load(ModelSpec("roberta", str(tiny_models["roberta"]), "cpu"), task="base", attentions=False)
    with pytest.raises(AttentionUnavailable, match="eager"):
        compute_attention(lm, AttentionConfig(TEXT))


def test_unsafe_text_comes_back_verbatim_in_the_tokens(loaded):
    lm = loaded["roberta"]  # byte-level BPE keeps every character
    text = '</script><script>alert(1)</script> "q" \\ é'
    r = compute_attention(lm, AttentionConfig(text))
    joined = lm.tokenizer.convert_tokens_to_string(list(r.tokens[1:-1]))
    assert joined == text


def test_npz_export_round_trips(loaded):
    r = compute_attention(loaded["bert"], AttentionConfig("A b.", "C d.", pair=True))
    z = np.load(io.BytesIO(attention_npz(r)))
    np.testing.assert_array_equal(z["attentions"], r.attentions)
    assert list(z["tokens"]) == list(r.tokens) and int(z["sentence_b_start"]) == r.sentence_b_start
    assert z["queries"].shape == r.queries.shape


# ---------------------------------------------------------------------------------------------- tokens
def test_labels_and_punctuation():
    assert display_piece("Ġcat") == "cat" and display_piece("▁") == "␣" and display_piece("##s") == "s"
    assert is_punct(",") and is_punct("Ġ.") and is_punct("。") and not is_punct("a,") and not is_punct("Ġ")


# ---------------------------------------------------------------------------------------------- head statistics
def _stack(*maps):
    """(layers=1, heads=len(maps), n, n) from (n, n) maps."""
    return np.stack(maps)[None]


def test_head_stats_on_known_matrices():
    n = 5
    eye = np.eye(n)
    prev = np.eye(n, k=-1)
    prev[0, 0] = 1.0  # row 0 has no previous token: it attends to itself
    uniform = np.full((n, n), 1 / n)
    cls = np.zeros((n, n))
    cls[:, 0] = 1.0
    mask = lambda *i: np.isin(np.arange(n), i)  # noqa: E731
    s = head_stats(_stack(eye, prev, uniform, cls), cls_mask=mask(0), sep_mask=mask(4), punct_mask=mask(2))
    np.testing.assert_allclose(s.entropy[0], [0, 0, np.log2(n), 0])
    np.testing.assert_allclose(s.distance[0], [0, (n - 1) / n, (n * n - 1) / (3 * n), (0 + 1 + 2 + 3 + 4) / n])
    np.testing.assert_allclose(s.self[0], [1, 1 / n, 1 / n, 1 / n])
    np.testing.assert_allclose(s.previous[0], [0, 1, 1 / n, 1 / (n - 1)])
    np.testing.assert_allclose(s.next[0], [0, 0, 1 / n, 0])
    np.testing.assert_allclose(s.cls[0], [1 / n, 2 / n, 1 / n, 1])
    np.testing.assert_allclose(s.sep[0], [1 / n, 0, 1 / n, 0])
    np.testing.assert_allclose(s.punct[0], [1 / n, 1 / n, 1 / n, 0])
    np.testing.assert_allclose(s.share("broad")[0], [0, 0, 1, 0])
    assert [(m.layer, m.head) for m in find_heads(s, "previous", 0.9)] == [(0, 1)]
    assert [(m.layer, m.head) for m in find_heads(s, "cls", 0.9)] == [(0, 3)]
    assert [(m.layer, m.head) for m in find_heads(s, "self", 0.5)] == [(0, 0)]
    assert find_heads(s, "next", 0.5) == []
    assert set(PATTERNS) >= {"previous", "next", "cls", "sep", "punct"}
    with pytest.raises(ValueError, match="Unknown pattern"):
        find_heads(s, "diagonal")
    with pytest.raises(ValueError, match="outside 0..1"):
        find_heads(s, "cls", 1.5)


# ---------------------------------------------------------------------------------------------- rollout, flow
def _random_att(rng, layers, heads, n):
    a = rng.random((layers, heads, n, n))
    return a / a.sum(-1, keepdims=True)


def test_rollout_on_known_matrices():
    n = 4
    eye = np.eye(n)[None, None]
    np.testing.assert_allclose(rollout(np.concatenate([eye, eye, eye])), np.eye(n))
    uniform = np.full((1, 2, n, n), 1 / n)
    np.testing.assert_allclose(rollout(uniform), 0.5 * np.eye(n) + 0.5 / n)
    # two layers: the product of the residual-mixed, head-averaged maps, top layer on the left
    rng = np.random.default_rng(0)
    att = _random_att(rng, 2, 3, n)
    a1, a2 = residual_attention(att)
    np.testing.assert_allclose(rollout(att), a2 @ a1)
    np.testing.assert_allclose(rollout(att).sum(-1), 1.0)
    np.testing.assert_allclose(relevance(rollout(att), 0).sum(), 1.0)


def test_flow_on_known_matrices():
    rng = np.random.default_rng(1)
    n = 4
    one = _random_att(rng, 1, 2, n)
    np.testing.assert_allclose(flow(one), residual_attention(one)[0])  # one layer: the edge itself
    # two layers: paths through distinct middle tokens are edge-disjoint, so the flow is sum_k min(A2[i,k], A1[k,j])
    two = _random_att(rng, 2, 2, n)
    a1, a2 = residual_attention(two)
    expected = np.minimum(a2[:, :, None], a1[None, :, :]).sum(1)
    np.testing.assert_allclose(flow(two), expected, atol=1e-9)
    row = flow(two, rows=[0])
    np.testing.assert_allclose(row[0], expected[0], atol=1e-9)
    assert np.isnan(row[1:]).all()
    with pytest.raises(ValueError, match="limited to"):
        flow(_random_att(rng, 1, 1, FLOW_MAP_MAX_TOKENS + 1))


def test_layer_similarity_on_known_matrices():
    n = 3
    eye = np.eye(n)
    cls = np.zeros((n, n))
    cls[:, 0] = 1.0
    same = np.stack([np.stack([eye, cls])] * 3)  # three identical layers
    sim = layer_similarity(same)
    np.testing.assert_allclose(sim, np.ones((3, 3)))
    assert adjacent_similarity(sim) == pytest.approx(1.0)
    other = np.stack([np.stack([eye, eye]), np.stack([np.eye(n)[[1, 2, 0]], np.eye(n)[[2, 0, 1]]])])
    # disjoint permutation maps: centred, their correlation is -1/(n-1)
    np.testing.assert_allclose(layer_similarity(other), [[1, -0.5], [-0.5, 1]], atol=1e-12)
    # near-uniform maps with unrelated deviations are not "similar" (raw cosine would say ~1)
    rng = np.random.default_rng(3)
    noisy = 1 / 8 + 1e-3 * rng.standard_normal((2, 4, 8, 8))
    assert abs(adjacent_similarity(layer_similarity(noisy))) < 0.2


def test_qk_view_on_known_vectors():
    q = np.zeros((1, 1, 2, 2))
    k = np.zeros((1, 1, 2, 2))
    q[0, 0, 0] = [2.0, 0.0]
    k[0, 0] = [[1.0, 0.0], [0.0, 1.0]]
    v = qk_view(q, k, 0, 0, 0)
    np.testing.assert_allclose(v.product, [[2, 0], [0, 0]])
    np.testing.assert_allclose(v.scores, [2 / np.sqrt(2), 0])
    np.testing.assert_allclose(v.weights, _softmax(np.array([np.sqrt(2), 0.0])))


# ---------------------------------------------------------------------------------------------- meaning
@pytest.mark.parametrize("which", ["minilm", "bundled"])
def test_pretrained_model_has_a_known_head_pattern(which):
    """Real pretrained weights (the offline MiniLM, and the bundled bert-mini when present): Clark et al. found
    heads that attend mostly to the previous token or to [SEP]. At least one head here does."""
    from core.models.tokenizer_build import minilm_folder

    folder = minilm_folder() if which == "minilm" else ROOT / "assets" / "models" / "bert-mini"
    if not (Path(folder) / "config.json").exists():
        pytest.skip("the bundled bert-mini is not built yet (make models)")
    lm = load(ModelSpec("bert", str(folder), "cpu"), task="base", attentions=True)
    r = compute_attention(
        lm,
        AttentionConfig(
            "The quick brown fox jumps over the lazy dog, and then it runs away.", "Nobody saw it again.", pair=True
        ),
    )
    s = head_stats(r.attentions, r.cls_mask, r.sep_mask, r.punct_mask)
    found = find_heads(s, "previous", 0.5) + find_heads(s, "sep", 0.5)
    assert found, f"no previous-token or [SEP] head: max previous {s.previous.max():.2f}, max sep {s.sep.max():.2f}"
    # a random model of the same shape has no such head: the pattern comes from training
    rng = np.random.default_rng(0)
    fake = _random_att(rng, *r.attentions.shape[:3])
    fs = head_stats(fake, r.cls_mask, r.sep_mask, r.punct_mask)
    assert not find_heads(fs, "previous", 0.5) and not find_heads(fs, "sep", 0.5)


def test_hooks_ignore_other_threads(loaded):
    """Sessions share one cached model: a run on another thread must not land in this run's q/k."""
    import threading

    import torch

    from core.inspect.attention import _capture_qk

    lm = loaded["bert"]
    enc = lm.tokenizer("a b c", return_tensors="pt")
    handles, store = _capture_qk(lm.model, FAMILIES["bert"].qk_modules)
    try:
        t = threading.Thread(target=lambda: lm.model(**enc))
        with torch.inference_mode():
            t.start()
            t.join()
        assert store == {"q": [], "k": []}
        with torch.inference_mode():
            lm.model(**enc)
        assert len(store["q"]) == len(store["k"]) == 2
    finally:
        for h in handles:
            h.remove()
    assert _hooks(lm.model) == 0


def test_unknown_projection_names_leave_only_the_qk_view_out(loaded, monkeypatch):
    import core.inspect.attention as A

    monkeypatch.setattr(A, "qk_modules", lambda model: ("q_proj", "k_proj"))
    r = compute_attention(loaded["bert"], AttentionConfig(TEXT))
    assert r.queries is None and r.keys is None and "no q/k view" in r.qk_note
    assert r.attentions.shape[0] == 2


def test_two_models_compare_side_by_side(loaded):
    """core computes both sides (the other model's attention, statistics, layer similarity); the page only draws."""
    config = AttentionConfig(TEXT)
    r = compute_attention(loaded["bert"], config)
    stats = head_stats(r.attentions, r.cls_mask, r.sep_mask, r.punct_mask)
    mine, other = compare_attention(r, stats, loaded["albert"], config)
    assert mine.result is r and mine.stats is stats and other.result.family == "albert"
    assert other.similarity.shape == (other.result.n_layers,) * 2
    assert other.adjacent == adjacent_similarity(layer_similarity(other.result.attentions))
    assert mine.label.startswith("BERT · ") and other.label.startswith("ALBERT · ")

"""core.inspect.attribution on tiny random models of every family, plus a classifier trained here to depend on one token."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from app.kit import exports
from core.inspect import attribution as A
from core.inspect import attribution_inputs as AI
from core.inspect import attribution_methods as AM
from core.inspect.attribution import attribute
from core.inspect.attribution_inputs import AttributionConfig
from core.inspect.attribution_methods import NotApplicable
from core.models.loading import LoadedModel, ModelSpec, load
from core.registry import FAMILIES
from tests.planted import PLANT

ALL = tuple(AM.METHODS)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run fastest on one thread, and the shared CI machine has few cores."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def loaded(tiny_models):
    """(family, task) -> LoadedModel, loaded once through the real loader."""
    cache: dict = {}

    def get(fam: str, task: str = "pretraining") -> LoadedModel:
        if (fam, task) not in cache:
            cache[(fam, task)] = load(ModelSpec(fam, str(tiny_models[fam]), "cpu"), task=task)
        return cache[(fam, task)]

    return get


def _mask_text(fam: str) -> str:
    return f"the capital of france is {FAMILIES[fam].mask_token} and it is big ."


def _plain_score(lm: LoadedModel, ids: torch.Tensor, prep) -> float:
    """The explained score from a plain forward on token ids (not the inputs_embeds path under test).

    Positions are the input's own: RoBERTa-style embeddings (those with a ``padding_idx``, counting from it) would
    otherwise skip [PAD] ids when numbering positions, while the baseline replaces word embeddings only (as
    LayerIG on the word-embedding layer does).
    """
    padding_idx = getattr(getattr(lm.model.base_model, "embeddings", None), "padding_idx", None)
    offset = padding_idx + 1 if padding_idx is not None else 0
    pos = torch.arange(ids.shape[1])[None] + offset
    with torch.no_grad():
        return float(prep.score(lm.model(input_ids=ids, position_ids=pos, **prep.extra))[0])


# ------------------------------------------------------------------------------------------------ completeness
@pytest.mark.parametrize("baseline", ["pad", "mask", "zeros"])
def test_ig_completeness_mask_target(loaded, family, baseline):
    lm = loaded(family)
    cfg = AttributionConfig(target="mask", text=_mask_text(family), methods=("lig",), baseline=baseline, n_steps=64)
    res = attribute(lm, cfg)
    ig = res.method("lig")
    gap = res.f_x - res.f_baseline
    # completeness: the attributions add up to f(x) - f(baseline), up to the reported (small) delta
    assert abs(ig.scores.sum() - gap) <= abs(ig.delta) + 1e-5
    assert abs(ig.delta) < 1e-3 + 0.02 * abs(gap)
    # f(x) through inputs_embeds (and the MLM head at the mask only) is the model's real output on the token ids
    prep = AI.prepare(lm, cfg)
    plain_fx = _plain_score(lm, prep.ids, prep)
    assert res.f_x == pytest.approx(plain_fx, abs=1e-5)
    if baseline != "zeros":  # the [PAD]/[MASK] baseline is a real token sequence: check it the same way
        fill = lm.tokenizer.pad_token_id if baseline == "pad" else lm.tokenizer.mask_token_id
        base_ids = prep.ids.clone()
        base_ids[0, torch.as_tensor(~prep.special)] = fill
        plain_fb = _plain_score(lm, base_ids, prep)
        assert res.f_baseline == pytest.approx(plain_fb, abs=1e-5)
        assert abs(ig.scores.sum() - (plain_fx - plain_fb)) < 1e-3 + 0.02 * abs(plain_fx - plain_fb)
    assert np.all(ig.scores[res.special] == 0.0)
    assert len(res.tokens) == len(ig.scores) == len(res.special)


def test_ig_completeness_pair_and_class(loaded, family):
    targets = [("class", "seqcls")] + ([("pair", "pretraining")] if FAMILIES[family].pair_head else [])
    for target, task in targets:
        lm = loaded(family, task)
        cfg = AttributionConfig(
            target=target,
            text="he went home early .",
            text_b="it was late .",
            methods=("lig",),
            class_index=1,
            n_steps=64,
        )
        res = attribute(lm, cfg)
        ig = res.method("lig")
        assert abs(ig.scores.sum() - (res.f_x - res.f_baseline)) <= abs(ig.delta) + 1e-5
        assert abs(ig.delta) < 1e-3 + 0.02 * abs(res.f_x - res.f_baseline)
        assert len(res.candidates) == 2 and sum(p for _, p in res.candidates) == pytest.approx(1.0, abs=1e-4)


def test_large_delta_is_flagged(loaded):
    """Two steps over a longer path: the delta is large and the result says to raise n_steps."""
    lm = loaded("bert", "seqcls")
    res = attribute(
        lm,
        AttributionConfig(
            target="class",
            text="a long and winding road through the hills .",
            methods=("lig",),
            n_steps=2,
            baseline="zeros",
        ),
    )
    d = res.method("lig").delta
    big = abs(d) > A.DELTA_WARN * abs(res.f_x - res.f_baseline) and abs(d) > 1e-4
    assert (res.delta_warning is not None) == big
    if big:
        assert "n_steps" in res.delta_warning


# ------------------------------------------------------------------------------------------------ planted signal
def test_planted_token_ranks_first_under_every_method(planted):
    text = f"the actors were {PLANT} in the long movie"
    res = attribute(
        planted, AttributionConfig(target="class", text=text, class_index=1, methods=ALL, n_samples=300, n_steps=50)
    )
    # A ReLU model passes DeepLift's static check; whether its rules hold through LayerNorm and attention is
    # measured by the summation-to-delta. Either it ran and must find the token, or it says why not.
    ran = {m.method for m in res.methods}
    assert ran | {k for k, _ in res.skipped} == set(ALL) and set(ALL) - ran <= {"deeplift"}
    for _key, why in res.skipped:
        assert "add up to" in why and "LayerNorm" in why
    for m in res.methods:
        # Saliency and Input x Gradient look at the gradient at x alone, so only their magnitude ranks tokens;
        # the baseline-relative methods must give the planted token the highest signed score.
        s = np.abs(m.scores) if m.method in ("saliency", "ixg") else m.scores
        top = res.tokens[int(np.argmax(s))]
        assert top == PLANT, f"{m.label} put {top!r} first: {dict(zip(res.tokens, np.round(m.scores, 3)))}"
    # the methods agree on this input, so their rank correlations are mostly positive
    assert res.rank_corr.shape == (len(ran), len(ran))
    assert np.allclose(np.diag(res.rank_corr), 1.0)


def test_deeplift_explains_why_not_for_gelu(loaded, family):
    lm = loaded(family, "seqcls")
    res = attribute(lm, AttributionConfig(target="class", text="a small test .", methods=("deeplift", "saliency")))
    assert [k for k, _ in res.skipped] == ["deeplift"]
    assert "Integrated Gradients" in res.skipped[0][1]
    with pytest.raises(NotApplicable, match="DeepLift"):
        attribute(lm, AttributionConfig(target="class", text="a small test .", methods=("deeplift",)))


# ------------------------------------------------------------------------------------------------ layers, contrast
def test_per_layer_heatmap(loaded, family):
    lm = loaded(family)
    res = attribute(lm, AttributionConfig(target="mask", text=_mask_text(family), methods=("lig",), layer_steps=8))
    if FAMILIES[family].shared_layers:  # one shared layer run N times: LayerIG cannot separate the passes
        assert res.layer_scores is None and res.skipped[0][0] == "layers" and "shared" in res.skipped[0][1]
    else:
        n = lm.model.config.num_hidden_layers  # config attribute_map gives every family this name
        assert res.layer_scores.shape == (n + 1, len(res.tokens))
        assert res.layer_names[0] == "embeddings" and np.isfinite(res.layer_scores).all()


def test_contrastive_is_difference_of_logits(loaded):
    lm = loaded("bert")
    cfg = AttributionConfig(
        target="mask", text=_mask_text("bert"), word="paris", contrast_word="london", methods=("lig",)
    )
    res = attribute(lm, cfg)
    a = attribute(lm, AttributionConfig(target="mask", text=_mask_text("bert"), word="paris", methods=("lig",)))
    b = attribute(lm, AttributionConfig(target="mask", text=_mask_text("bert"), word="london", methods=("lig",)))
    assert res.f_x == pytest.approx(a.f_x - b.f_x, abs=1e-5)
    assert "rather than" in res.target_label
    np.testing.assert_allclose(res.method("lig").scores, a.method("lig").scores - b.method("lig").scores, atol=1e-4)


def test_shared_model_is_left_untouched(loaded):
    lm = loaded("bert")
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    attribute(lm, AttributionConfig(target="mask", text=_mask_text("bert"), methods=ALL, layer_steps=4, n_samples=20))
    for m in lm.model.modules():
        assert not m._forward_hooks and not m._forward_pre_hooks and not m._backward_hooks
    assert all(p.grad is None for p in lm.model.parameters())
    after = lm.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


# ------------------------------------------------------------------------------------------------ bad input
def test_word_not_in_vocab(loaded):
    with pytest.raises(ValueError, match="not in this model's vocabulary"):
        attribute(loaded("bert"), AttributionConfig(target="mask", text=_mask_text("bert"), word="☃"))


@pytest.mark.parametrize("fam", ["bert", "roberta"])
def test_multi_subtoken_word_is_explained(loaded, fam):
    with pytest.raises(ValueError, match="sub-tokens") as e:
        attribute(loaded(fam), AttributionConfig(target="mask", text=_mask_text(fam), word="unbelievably"))
    assert "first piece" in str(e.value)


def test_empty_and_missing_parts():
    with pytest.raises(ValueError, match="empty"):
        AttributionConfig(text="   ")
    with pytest.raises(ValueError, match="second sentence"):
        AttributionConfig(target="pair", text="a b c")
    with pytest.raises(ValueError, match="n_steps"):
        AttributionConfig(text="x", n_steps=1)
    with pytest.raises(ValueError, match="Unknown method"):
        AttributionConfig(text="x", methods=("gradcam",))
    with pytest.raises(ValueError, match="only for a masked word"):
        AttributionConfig(target="class", text="x", contrast_word="y")


def test_no_mask_and_wrong_mask(loaded):
    lm = loaded("roberta")
    with pytest.raises(ValueError, match="<mask>"):
        attribute(lm, AttributionConfig(target="mask", text="no mask in here"))
    with pytest.raises(ValueError, match="mask 3 does not exist"):
        attribute(lm, AttributionConfig(target="mask", text=_mask_text("roberta"), mask_index=2))


def test_pair_target_on_family_without_pair_head(loaded):
    with pytest.raises(NotApplicable, match="no sentence-pair head"):
        attribute(loaded("roberta"), AttributionConfig(target="pair", text="a b .", text_b="c d ."))
    with pytest.raises(NotApplicable, match="sequence-classification head"):
        attribute(loaded("bert"), AttributionConfig(target="class", text="a b ."))


def test_too_long_input_is_refused(loaded):
    lm = loaded("distilbert")
    text = "word " * (lm.max_tokens + 5) + "[MASK]"
    with pytest.raises(ValueError, match="reads at most"):
        attribute(lm, AttributionConfig(target="mask", text=text))


def test_long_input_runs_in_bounded_batches(loaded, monkeypatch):
    """Batches shrink with sequence length so that batch x seq stays within TOKEN_BUDGET."""
    lm = loaded("bert", "seqcls")
    monkeypatch.setattr(AI, "TOKEN_BUDGET", 400)
    seen: list[int] = []
    real_call = AI.Scorer.__call__

    def spy(self, embeds):
        seen.append(int(embeds.shape[0] * embeds.shape[1]))
        return real_call(self, embeds)

    monkeypatch.setattr(AI.Scorer, "__call__", spy)
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 10)  # ~92 tokens
    res = attribute(
        lm,
        AttributionConfig(target="class", text=text, methods=("lig", "occlusion"), n_steps=20, internal_batch_size=50),
    )
    assert max(seen) <= 400
    ig = res.method("lig")
    assert abs(ig.scores.sum() - (res.f_x - res.f_baseline)) <= abs(ig.delta) + 1e-5


def test_progress_is_reported_and_can_cancel(loaded):
    lm = loaded("bert", "seqcls")
    calls: list[float] = []

    class Stop(Exception):
        pass

    def progress(frac: float, msg: str) -> None:
        calls.append(frac)
        if len(calls) == 3:
            raise Stop()

    with pytest.raises(Stop):
        attribute(
            lm,
            AttributionConfig(
                target="class", text="a b c d e f .", methods=("lig", "occlusion"), n_steps=20, internal_batch_size=5
            ),
            progress,
        )
    assert calls == sorted(calls) and 0 <= calls[0] < 1


# ------------------------------------------------------------------------------------------------ helpers, batch
def test_spearman_matches_scipy():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(1)
    a, b = rng.normal(size=12), rng.normal(size=12)
    assert A.spearman(a, b) == pytest.approx(spearmanr(a, b).statistic)
    tied = np.array([1.0, 2.0, 2.0, 0.0, 5.0, 2.0])
    assert A.spearman(tied, b[:6]) == pytest.approx(spearmanr(tied, b[:6]).statistic)
    assert np.isnan(A.spearman(np.ones(4), b[:4]))


def test_tokens_html_escapes_and_colours():
    out = exports.tokens_html(("<script>", "a&b", "ok"), np.array([-1.0, 0.0, 1.0]), np.array([False, False, True]))
    assert "<script>" not in out and "&lt;script&gt;" in out and "a&amp;b" in out
    assert exports.color(1.0, 1.0) == "#1a9850" and exports.color(-1.0, 1.0) == "#d73027"
    assert exports.color(0.0, 1.0) == "#ffffff"


def test_batch_csv_roundtrip(loaded):
    lm = loaded("bert")
    rows = A.read_batch_csv("text,word\nthe cat sat on the [MASK] .,mat\nno mask here,\n<b>paris</b> is [MASK] .,\n")
    assert len(rows) == 3 and rows[0].word == "mat"
    batch = A.attribute_batch(lm, rows, dict(target="mask", methods=("lig", "ixg"), word="", contrast_word=""))
    assert "'mat'" in batch.results[0].target_label  # the row's own word wins over the settings'
    assert batch.results[0] is not None and batch.results[1] is None and "no mask" in batch.errors[1]
    csv_text = exports.batch_to_csv(batch)
    lines = csv_text.strip().splitlines()
    assert lines[0].startswith("row,text,target,method,token_index,token")
    n0 = len(batch.results[0].tokens)
    assert sum(1 for ln in lines if ln.startswith("1,")) == 2 * n0
    page = exports.batch_to_html(batch)
    assert page.startswith("<!doctype html>") and "<script" not in page and "&lt;b&gt;paris" in page
    assert "http" not in page  # standalone: no external resources


def test_the_html_export_is_in_the_sessions_language(loaded, ui_lang):
    """#46 §1: the export's title, heading and legend were English in a 中文 session, and so were a row's errors."""
    from app.kit import i18n

    rows = A.read_batch_csv("text\nthe cat sat on the [MASK] .\nno mask here\n")
    batch = A.attribute_batch(loaded("bert"), rows, dict(target="mask", methods=("ixg",), word="", contrast_word=""))
    ui_lang("zh")  # outside a script run
    page = exports.batch_to_html(batch)
    assert "<title>EncoderLab 归因</title>" in page and "<h1>归因</h1>" in page and "绿色" in page
    assert "Green pushes" not in page and str(batch.errors[1]) not in page  # the row's error in 中文 too
    assert i18n.explain(batch.errors[1]) in page


def test_batch_settings_are_checked_first(loaded):
    rows = A.read_batch_csv("text\nhello [MASK] .\n")
    with pytest.raises(ValueError, match="n_steps"):
        A.attribute_batch(loaded("bert"), rows, dict(target="mask", n_steps=0))
    with pytest.raises(ValueError, match="own text"):
        A.attribute_batch(loaded("bert"), rows, dict(target="mask", text="x"))


@pytest.mark.parametrize(
    "data,msg",
    [
        ("", "empty"),
        ("sentence\nhello\n", "'text' column"),
        ("text,class\nhi,abc\n", "class number"),
        (b"\xff\xfe\x00", "UTF-8"),
    ],
)
def test_batch_csv_errors(data, msg):
    with pytest.raises(ValueError, match=msg):
        A.read_batch_csv(data)


def test_core_does_not_import_streamlit():
    code = "import sys; import core.inspect.attribution; assert 'streamlit' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(A.__file__).rsplit("/core/", 1)[0])


def test_cancel_through_the_job_runner(loaded):
    """The page runs attribute() as a job; Cancel stops it between forward batches."""
    import threading

    from core.runtime.jobs import CANCELLED, JobRunner

    lm = loaded("bert", "seqcls")
    started = threading.Event()

    def fn(ctx):
        torch.set_num_threads(1)  # this job thread's own setting (see one_thread)

        def progress(frac, msg):
            started.set()
            ctx.progress(frac, msg)

        return attribute(
            lm,
            AttributionConfig(
                target="class",
                text="one two three four five six seven .",
                methods=("lig",),
                n_steps=1000,
                internal_batch_size=1,
            ),
            progress,
        )

    r = JobRunner({"cpu": 1})
    job = r.submit("attribution", fn)
    assert started.wait(30)
    r.cancel(job.id)
    r.wait(job, timeout=60)
    assert job.status == CANCELLED and job.result is None


# ------------------------------------------------------------------------------------------------ issue 14 checks
def test_deeplift_is_known_unavailable_before_any_run(loaded, family, planted):
    """The page offers only the methods that apply: DeepLift is ruled out from the model's modules alone."""
    why = AM.unavailable_methods(loaded(family, "mlm").model)
    assert set(why) == {"deeplift"} and "Integrated Gradients" in why["deeplift"]
    assert AM.unavailable_methods(planted.model) == {}  # a ReLU model keeps it (the run still checks the sum)


@pytest.mark.parametrize(
    "text, msg",
    [
        ("Paris " + "[MASK] " * 30 + "France.", "30 masks; at most 20"),
        ("[MASK] [MASK] .", "only masks"),
        ("<mask> " * 21, "21 masks"),
    ],
)
def test_a_masked_text_gets_fill_masks_limits(text, msg):
    """Issue 14: 30 masks gave all-zero attributions and a NaN correlation matrix."""
    with pytest.raises(ValueError, match=msg):
        AttributionConfig(target="mask", text=text)
    AttributionConfig(target="mask", text="Paris " + "[MASK] " * 20 + "France.")  # the limit itself is allowed


# ------------------------------------------------------------------------------------------------ the method registry
def test_every_registered_method_is_complete():
    """One entry per method: key, label, runner, cost, settings, description; nothing kept in a parallel table."""
    from core.inspect.attribution_methods import Method

    cfg = AttributionConfig(text="x", n_steps=20, n_samples=30)
    for key, m in AM.METHODS.items():
        assert isinstance(m, Method) and m.key == key and m.label and len(m.description) > 40 and callable(m.run)
        assert set(m.settings) <= {f.name for f in __import__("dataclasses").fields(AttributionConfig)}
        c = m.cost(12, cfg, 5)
        assert c.calls >= 1 and c.forwards >= c.calls and (c.backwards > 0) == m.gradients
    assert "Layer" not in AM.METHODS["lig"].label and "embeddings" in AM.METHODS["lig"].label
    assert {k for k, m in AM.METHODS.items() if not m.takes_baseline} == {"saliency", "ixg"}


def test_the_cost_model_counts_the_forward_calls_captum_makes(loaded):
    """Each method's cost.calls is the number of forward batches it really runs (the page's progress ticks)."""
    lm = loaded("bert", "seqcls")
    for key in ("lig", "saliency", "ixg", "occlusion", "kernelshap", "lime"):
        cfg = AttributionConfig(
            target="class", text="a b c d e f g .", methods=(key,), n_steps=7, n_samples=13, internal_batch_size=3
        )
        ticks: list[str] = []
        attribute(lm, cfg, lambda frac, msg, ticks=ticks: ticks.append(msg) if ": batch " in msg else None)
        seq = len(lm.tokenizer(cfg.text)["input_ids"])
        assert len(ticks) == AM.METHODS[key].cost(seq, cfg, 3).calls, (key, ticks)


def test_integrated_gradients_is_the_layer_ig_of_the_embedding_layer(loaded):
    """The method labelled 'Integrated Gradients (on the embeddings)' equals captum's LayerIntegratedGradients on
    the word-embedding layer, fed token ids: the name says what it computes."""
    from captum.attr import LayerIntegratedGradients

    lm = loaded("bert", "seqcls")
    cfg = AttributionConfig(target="class", text="he went home early .", methods=("lig",), n_steps=32)
    res = attribute(lm, cfg)
    prep = AI.prepare(lm, cfg)
    base_ids = prep.ids.clone()
    base_ids[0, torch.as_tensor(~prep.special)] = lm.tokenizer.pad_token_id

    def f(ids):
        return lm.model(input_ids=ids, **{k: v.expand(ids.shape[0], -1) for k, v in prep.extra.items()}).logits[:, 0]

    lig = LayerIntegratedGradients(f, lm.model.get_input_embeddings())
    ref = lig.attribute(prep.ids, baselines=base_ids, n_steps=32, internal_batch_size=50)
    np.testing.assert_allclose(res.method("lig").scores, ref[0].sum(-1).detach().numpy(), atol=1e-4)


def test_a_candidate_word_is_the_piece_the_tokenizer_gives_it_in_a_sentence(loaded, family):
    """No per-tokenizer rule: a word after a space is asked of the tokenizer with its space (Ġ for byte BPE)."""
    lm = loaded(family, "mlm")
    tok = lm.tokenizer

    def ids(text):
        return tok(text, add_special_tokens=False)["input_ids"]

    checked = 0
    for word in ("the", "is", "a", "of", "and", "was", "in", "to"):
        after_space = ids("big " + word)[len(ids("big")) :]
        at_start = ids(word + " big")[: -len(ids(" big")) or None] if len(ids(word + " big")) > 1 else []
        if len(after_space) == 1:
            assert AI.word_id(lm, word, at_start=False) == after_space[0], word
            checked += 1
        if len(at_start) == 1:
            assert AI.word_id(lm, word, at_start=True) == at_start[0], word
            checked += 1
    assert checked >= 2, "no single-piece word in this tiny vocabulary: pick other words"


def test_any_masked_lm_encoder_gets_attributions(tiny_models):
    """The generic family (here a tiny DeBERTa-v2, no registry entry of its own): the masked-word target and the
    per-layer heatmap need only the encoder and its MLM head."""
    from core.registry import GENERIC

    lm = load(ModelSpec(GENERIC.key, str(tiny_models[GENERIC.key]), "cpu"), task="mlm")
    text = f"the capital of france is {lm.tokenizer.mask_token} and it is big ."
    res = attribute(
        lm, AttributionConfig(target="mask", text=text, methods=("lig", "occlusion"), n_steps=32, layer_steps=4)
    )
    ig = res.method("lig")
    assert abs(ig.scores.sum() - (res.f_x - res.f_baseline)) <= abs(ig.delta) + 1e-5
    assert res.layer_scores.shape == (lm.model.config.num_hidden_layers + 1, len(res.tokens))
    with pytest.raises(NotApplicable, match="sentence-pair|pair head"):
        attribute(lm, AttributionConfig(target="pair", text="a b .", text_b="c d ."))


def test_what_is_explained_reads_in_chinese(loaded, ui_lang):
    """#46 (third walk): "logit of '河' at the mask" stayed English on a 中文 page. Each target's label is a Message."""
    from app.kit import i18n
    from tests.english import english_runs

    lm = loaded("bert")
    ui_lang("zh")
    for cfg in (
        A.AttributionConfig(text="the cat sat on the [MASK] .", word="mat"),
        A.AttributionConfig(text="the cat sat on the [MASK] .", word="mat", contrast_word="hat"),
    ):
        label = A.prepare(lm, cfg).target_label
        shown = i18n.explain(label)
        assert label.kind.startswith("attribution.target.") and "'mat'" in shown and "掩码处" in shown
        assert not english_runs(shown), shown

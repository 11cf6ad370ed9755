"""core.inspect.lens: the raw lens (last row == Fill-mask, every family, depth counts), the tuned lens (lower held-out KL
than the raw one, saved and reloaded, trained in a job), and bad input."""

from __future__ import annotations

import json
import pickle
import time

import pytest
import torch

from core.base.caches import reset_caches
from core.inspect import lens as L
from core.inspect import lens_forward as LF
from core.inspect import tuned_lens as TL
from core.models.loading import ModelSpec, load
from core.predict.fill_mask import FillMaskConfig, FillMaskError, encode, fill_mask_batch
from core.registry import bundled_families, bundled_id

TWO_MASKS = "The cat slept on the warm [MASK] all afternoon, and the [MASK] barked."


@pytest.fixture()
def one_thread():
    """Training runs on one torch thread (a job worker's share of a small machine): on a busy 2-core machine two
    threads spin-wait and take 3x the CPU time for the same steps."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _same_as_fill_mask(lm, text: str, k: int = 5) -> L.LensResult:
    res = L.lens(lm, L.LensConfig(text, top_k=k))
    ref = fill_mask_batch(lm, [FillMaskConfig(text, top_k=k)])[0]
    assert res.depths == LF.n_layers(lm.model) + 1
    assert res.mask_positions == ref.mask_positions and res.tokens == ref.tokens
    for m, f in zip(res.masks, ref.masks, strict=True):
        assert len(m.rows) == res.depths
        assert [c.token_id for c in m.rows[-1]] == [c.token_id for c in f.candidates]
        assert max(abs(a.prob - b.prob) for a, b in zip(m.rows[-1], f.candidates)) < 1e-6
        assert m.answer.token_id == f.candidates[0].token_id
        assert m.answer_rank[-1] == 0 and m.kl[-1] == pytest.approx(0.0, abs=1e-5)
        assert all(0 <= p <= 1 for p in m.answer_prob) and all(kl >= 0 for kl in m.kl)
        for row in m.rows:  # each depth's candidates come sorted, most probable first
            assert [c.prob for c in row] == sorted((c.prob for c in row), reverse=True)
    return res


@pytest.mark.parametrize("fam", [f.key for f in bundled_families()])
def test_last_row_is_fill_mask_on_bundled_minis(fam):
    lm = load(ModelSpec(fam, bundled_id(fam)), task="mlm")
    res = _same_as_fill_mask(lm, TWO_MASKS)
    assert len(res.masks) == 2
    m = res.masks[0]  # a trained model: the middle layers do not already say what the last one says
    assert m.kl[0] > m.kl[-2] > 0


def test_last_row_is_fill_mask_on_tiny_models(tiny_models, family):
    lm = load(ModelSpec(family, str(tiny_models[family])), task="mlm")
    _same_as_fill_mask(lm, "The weather was [MASK] today.", k=7)


def test_layer_states_equal_transformers_hidden_states(tiny_models, family):
    lm = load(ModelSpec(family, str(tiny_models[family])), task="mlm")
    enc = encode(lm, FillMaskConfig(TWO_MASKS))
    ids = torch.tensor([enc.ids])
    with torch.inference_mode():
        ours = LF.layer_states(lm.model, ids, list(enc.mask_positions))
        hs = lm.model.base_model(input_ids=ids, output_hidden_states=True).hidden_states
    theirs = torch.stack(hs)[:, 0, list(enc.mask_positions)]
    assert ours.shape == theirs.shape == (LF.n_layers(lm.model) + 1, 2, LF.hidden_size(lm.model))
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_albert_shared_layer_once_per_depth(tmp_path):
    from core.models.tiny import make_tiny

    lm = load(ModelSpec("albert", str(make_tiny("albert", tmp_path / "a", layers=5))), task="mlm")
    assert len(lm.model.albert.encoder.albert_layer_groups) == 1  # one layer, shared
    res = _same_as_fill_mask(lm, "A [MASK] of bread.")
    assert res.depths == 6  # embeddings + the shared layer applied 5 times
    rows = [tuple(c.token_id for c in r) for r in res.masks[0].rows]
    assert len(set(rows)) > 1  # each application changes the state


def test_distilbert_six_layers(tmp_path):
    from core.models.tiny import make_tiny

    lm = load(ModelSpec("distilbert", str(make_tiny("distilbert", tmp_path / "d", layers=6))), task="mlm")
    assert _same_as_fill_mask(lm, "A [MASK] of bread.").depths == 7


def test_tuned_lens_beats_raw_on_heldout_and_is_saved(tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("ENCODERLAB_LENS_DIR", str(tmp_path / "lens"))
    lm = load(ModelSpec("roberta", bundled_id("roberta")), task="mlm")
    assert TL.load_tuned(lm) is None
    with pytest.raises(LF.LensError, match="no tuned lens"):
        L.lens(lm, L.LensConfig(TWO_MASKS, mode="tuned"))
    seen = []
    cfg = TL.TuneConfig(steps=25, batch_size=8, max_length=48, heldout_sentences=32)
    tuned, rep = TL.tune(lm, cfg, on_progress=lambda f, msg="", **m: seen.append(f))
    assert seen[-1] == 1.0 and len(seen) > cfg.steps
    assert (
        rep.steps == 25 and len(rep.kl_raw) == len(rep.kl_tuned) == 7 and rep.heldout_positions > 50
    )  # masked positions of 32 sentences
    for d in range(6):  # held-out text, never trained on: lower at every intermediate depth
        assert rep.kl_tuned[d] < rep.kl_raw[d], (d, rep.kl_raw, rep.kl_tuned)
    assert rep.kl_raw[-1] == rep.kl_tuned[-1] == 0.0
    # saved beside the model: a folder named by family and key (no server path), read back after a restart
    folder = TL.lens_dir(lm)
    assert folder.parent == tmp_path / "lens" and folder.name == f"roberta-{TL.model_key(lm)}"
    assert json.loads((folder / TL.REPORT_FILE).read_text())["key"] == TL.model_key(lm)
    reset_caches()  # read back from disk, as after a restart
    again, rep2 = TL.load_tuned(lm)
    assert rep2 == rep and torch.equal(again.weight, tuned.weight) and torch.equal(again.bias, tuned.bias)
    assert not torch.equal(tuned.weight[0], torch.eye(tuned.hidden))  # it did learn
    raw = L.lens(lm, L.LensConfig(TWO_MASKS))
    res = L.lens(lm, L.LensConfig(TWO_MASKS, mode="tuned"))
    assert res.mode == "tuned" and res.lens_key == rep.key
    assert res.masks[0].rows[-1] == raw.masks[0].rows[-1]  # the last layer needs no translator
    assert res.masks[0].rows[0] != raw.masks[0].rows[0]


def test_identity_translators_are_the_raw_lens(tiny_models):
    lm = load(ModelSpec("bert", str(tiny_models["bert"])), task="mlm")
    fresh = TL.TunedLens(LF.n_layers(lm.model), LF.hidden_size(lm.model))
    raw = L.lens(lm, L.LensConfig(TWO_MASKS))
    same = L.lens(lm, L.LensConfig(TWO_MASKS, mode="tuned"), tuned=fresh)
    for a, b in zip(raw.masks, same.masks):
        assert [[c.token_id for c in r] for r in a.rows] == [[c.token_id for c in r] for r in b.rows]
    wrong = TL.TunedLens(LF.n_layers(lm.model) + 1, LF.hidden_size(lm.model))
    with pytest.raises(LF.LensError, match="layers"):
        L.lens(lm, L.LensConfig(TWO_MASKS, mode="tuned"), tuned=wrong)


def test_tune_job_runs_saves_and_cancels(tiny_models, tmp_path, monkeypatch):
    from core.runtime.jobs import CANCELLED, DONE, JobRunner

    monkeypatch.setenv("ENCODERLAB_LENS_DIR", str(tmp_path / "lens"))
    spec = ModelSpec("distilbert", str(tiny_models["distilbert"]))
    fn = TL.tune_job(spec, TL.TuneConfig(steps=3, batch_size=4, heldout_sentences=8))
    pickle.dumps(fn)  # picklable: it runs in a worker process on a server
    r = JobRunner(workers=False)
    job = r.wait(r.submit("lens", fn), timeout=120)
    assert job.status == DONE, job.error
    assert job.result.steps == 3 and len(job.result.kl_raw) == 3
    lm = load(spec, task="mlm")
    assert TL.tuned_report(lm) == job.result
    # cancel: the run stops at its next step and saves nothing
    other = ModelSpec("bert", str(tiny_models["bert"]))
    slow = r.submit("lens", TL.tune_job(other, TL.TuneConfig(steps=5000, batch_size=2)))
    while not slow.metrics and not slow.done:  # wait until it is training
        time.sleep(0.01)
    r.cancel(slow.id)
    assert r.wait(slow, timeout=60).status == CANCELLED
    assert TL.load_tuned(load(other, task="mlm")) is None


def test_hosted_report_names_no_server_path(tiny_models, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_LENS_DIR", str(tmp_path / "lens"))
    folder = tiny_models["albert"]
    lm = load(ModelSpec("albert", str(folder)), task="mlm")  # as a session's own run folder would be
    monkeypatch.setenv("ENCODERLAB_HOSTED", "1")
    _, rep = TL.tune(lm, TL.TuneConfig(steps=1, batch_size=2, heldout_sentences=4))
    assert str(folder) not in rep.to_json() and str(tmp_path) not in rep.to_json()
    assert str(folder) not in TL.lens_dir(lm).name


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(text="No mask in this sentence."), r"no \[MASK\]"),
        (dict(text="   "), "empty"),
        (dict(text="A [MASK].", top_k=0), "top-k"),
        (dict(text="A [MASK].", mode="logit"), "raw"),
        (dict(text="[MASK] [MASK]"), "context"),
    ],
)
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        L.LensConfig(**kwargs)


def test_bad_tune_config():
    with pytest.raises(ValueError, match="steps"):
        TL.TuneConfig(steps=0)
    with pytest.raises(ValueError, match="learning rate"):
        TL.TuneConfig(lr=0)


def test_model_without_mlm_head(tiny_models):
    lm = load(ModelSpec("bert", str(tiny_models["bert"])), task="base")
    with pytest.raises(FillMaskError, match="masked-language-model head"):
        L.lens(lm, L.LensConfig("A [MASK] of bread."))

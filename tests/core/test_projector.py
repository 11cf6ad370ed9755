"""core/represent/projector: one point per occurrence, a map per depth, colour groups, the separation numbers, jobs."""

from __future__ import annotations

import re

import numpy as np
import pytest

from core.models.loading import ModelSpec, load
from core.represent.projector import MAX_POINTS, ProjectorConfig, color_groups, project, project_job, split_text
from core.represent.projector_maps import next_word_agreement
from core.represent.token_vectors import WORD_RE
from core.runtime.job_outcome import JobCancelled
from core.runtime.jobs import JobRunner

TEXT = "\n".join(
    [
        "The bank of the river was muddy after the rain.",
        "She paid the cheque into the bank on Monday. The bank was closed!",
        "They sat on the bank and watched the boats go by.",
        "Bank staff raised the rates; the river bank flooded.",
        "A heron stood on the far bank of the stream.",
        "Nobody banks here.",
    ]
)
N_BANK = len(re.findall(r"\bbank\b", TEXT.lower()))  # 7 ("banks" is another word)


@pytest.fixture(scope="module")
def models(tiny_models):
    return {f: load(ModelSpec(f, str(p), "cpu"), "base") for f, p in tiny_models.items()}


def test_a_words_points_are_its_occurrences_with_a_pca_map_per_depth(models, family):
    lm = models[family]
    p = project(lm, ProjectorConfig(word="bank", corpus="text", text=TEXT, dims=3))
    assert len(p) == N_BANK and all(w.lower() == "bank" for w in p.words)
    assert p.depths == (0, 1, 2) and p.coords.shape == (3, N_BANK, 3) and p.coords.dtype == np.float32
    assert p.joint.shape == (3 * N_BANK, 3) and list(p.joint_depths[:N_BANK]) == [0] * N_BANK
    sents = split_text(TEXT)
    counts = np.bincount(p.sentence_ids, minlength=len(sents))
    assert counts.tolist() == [len(re.findall(r"\bbank\b", s.lower())) for s in sents]
    nxt = {(s, n) for s, n in zip(p.sentence_ids.tolist(), p.next_words)}
    assert (1, "on") in nxt and (2, "was") in nxt and (4, "staff") in nxt and (3, "and") in nxt
    for d in range(3):
        c = p.at(d)
        assert np.isfinite(c).all() and abs(float(np.sqrt((c**2).sum(1).mean())) - 1) < 1e-4  # unit RMS
    assert p.explained is not None and all(0 < e <= 1 for e in p.explained)
    assert len(p.silhouette) == len(p.agreement) == 3 and 2 <= p.k <= 6
    assert p.clusters.shape == (3, N_BANK) and p.clusters.max() < p.k
    assert all("bank" in (p.left[i] + p.words[i] + p.right[i]).lower() for i in range(len(p)))


def test_depths_are_mapped_on_their_own(models):
    p = project(models["bert"], ProjectorConfig(word="bank", corpus="text", text=TEXT, depths=[2, 0]))
    assert p.depths == (0, 2) and p.coords.shape[0] == 2
    assert not np.allclose(p.at(0), p.at(2))  # the embeddings of "bank" differ only by position; layer 2 by context
    with pytest.raises(ValueError, match="was not projected"):
        p.at(1)
    with pytest.raises(ValueError, match="Depths go from 0"):
        project(models["bert"], ProjectorConfig(word="bank", corpus="text", text=TEXT, depths=[5]))


def test_sample_mode_maps_every_word_of_the_sentences(models):
    p = project(models["roberta"], ProjectorConfig(what="sample", corpus="text", text=TEXT, color="cluster"))
    assert len(p) == len(WORD_RE.findall(TEXT))
    assert p.word == "" and len(set(p.words)) > 20
    p2 = project(models["roberta"], ProjectorConfig(what="sample", corpus="text", text=TEXT, max_points=10))
    assert len(p2) == 10  # the cap holds


def test_absent_and_rare_words_say_what_to_do(models):
    with pytest.raises(ValueError) as e:
        project(models["bert"], ProjectorConfig(word="bnak", corpus="text", text=TEXT))
    msg = str(e.value)
    assert "“bnak” does not occur in your text" in msg and "bank" in msg and "paste sentences" in msg
    with pytest.raises(ValueError, match="occurs only 1 time"):
        project(models["bert"], ProjectorConfig(word="heron", corpus="text", text=TEXT))


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(word="river bank"), "is not one word"),
        (dict(word=" "), "Type the word"),
        (dict(corpus="text", text="  "), "The text is empty"),
        (dict(method="tsne", max_points=20_000), "from 4 to 10,000 for TSNE"),
        (dict(max_points=MAX_POINTS + 1), "Max points"),
        (dict(dims=4), "2 or 3 dimensions"),
        (dict(color="size"), "Colour by"),
    ],
)
def test_config_messages(kw, message):
    with pytest.raises(ValueError, match=message):
        ProjectorConfig(**kw)


def test_colour_groups_cover_every_point_once(models):
    p = project(models["distilbert"], ProjectorConfig(what="sample", corpus="text", text=TEXT))
    d = p.depths[-1]
    for color in ("next_word", "cluster"):
        groups = color_groups(p, color, d)
        idx = np.sort(np.concatenate([g.index for g in groups]))
        assert idx.tolist() == list(range(len(p))), color
    nw = color_groups(p, "next_word", d, top=3)
    assert [g.kind for g in nw][-1] == "other" and len(nw) == 4
    top = [g.value for g in nw[:3]]
    assert top[0] == "the" or len(nw[0].index) >= len(nw[1].index) >= len(nw[2].index)
    assert all(p.next_words[i] == (g.value or "") for g in nw[:3] for i in g.index)
    cl = color_groups(p, "cluster", d)
    assert all((p.clusters[-1][g.index] == g.value).all() for g in cl)
    layers = color_groups(p, "layer", d)
    assert [g.value for g in layers] == list(p.depths) and all(len(g.index) == len(p) for g in layers)


def test_next_word_agreement_sees_separable_labels():
    rng = np.random.default_rng(0)
    labels = ["a"] * 50 + ["b"] * 50
    apart = np.concatenate([rng.normal(0, 0.1, (50, 8)), rng.normal(5, 0.1, (50, 8))])
    agree, chance = next_word_agreement(apart, labels)
    assert agree == 1.0 and chance == pytest.approx(0.5)
    mixed, _ = next_word_agreement(rng.normal(0, 1, (100, 8)), labels)
    assert mixed < 0.8


def test_progress_and_cancel_between_depths(models):
    seen = []

    def progress(f, msg):
        seen.append(msg)
        if "depth 1" in msg:
            raise JobCancelled()

    with pytest.raises(JobCancelled):
        project(models["albert"], ProjectorConfig(word="bank", corpus="text", text=TEXT), on_progress=progress)
    assert any("depth 0" in m for m in seen) and not any("clusters" in m for m in seen)


def test_tsne_runs_as_a_job_and_returns_a_map_per_depth(tiny_models):
    runner = JobRunner(workers=False)  # on a thread: a worker process costs seconds to start
    spec = ModelSpec("bert", str(tiny_models["bert"]), "cpu")
    cfg = ProjectorConfig(word="bank", corpus="text", text=TEXT, method="tsne", depths=(0, 2))
    job = runner.wait(runner.submit("tsne", project_job(spec, cfg)), timeout=240)
    assert job.status == "done", job.error
    p = job.result
    assert p.method == "tsne" and p.coords.shape == (2, N_BANK, 2) and p.joint is None
    assert np.isfinite(p.coords).all() and p.explained is None and job.progress == 1.0


def test_umap_once_at_a_tiny_size(models):
    # One depth only: umap-learn's numba JIT costs ~15 s on the first fit in a process (measured: import 3-4 s,
    # first fit of 30 points 16 s, the next 0.02 s), whatever the size.
    p = project(
        models["bert"],
        ProjectorConfig(word="bank", corpus="text", text=TEXT, method="umap", depths=(2,), dims=3, color="layer"),
    )
    assert p.coords.shape == (1, N_BANK, 3) and p.joint.shape == (N_BANK, 3) and np.isfinite(p.coords).all()

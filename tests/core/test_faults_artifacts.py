"""Damaged saved artifacts, each read through the call its page makes: a tuned lens (load_tuned), a corpus index
(load_key, and the index job), a probe result (saved_result), a fine-tuned run (load_finetuned), a model folder
(load), a training checkpoint (fine-tune and pretraining resume) and a sparse autoencoder (load_sae). Each file is cut to half its bytes or has
bytes overwritten in its middle (where safetensors, faiss and numpy would load the garbage without a word); the
reader must raise its module's own error with the "damaged" message, set the damage aside, and let a rebuild
write a fresh one. Real files, real from_pretrained, real faiss, real accelerate."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import torch

from core.base.caches import reset_caches
from core.base.messages import holds_kind
from core.data.corpus import CORPUS_DIR, parse_documents
from core.data.datasets_local import LabelledData, Split
from core.inspect import sae as S
from core.inspect import sae_store as SS
from core.inspect.lens_forward import LensError
from core.inspect.tuned_lens import REPORT_FILE, WEIGHTS_FILE, TunedLens, TuneReport, lens_dir, load_tuned, save_tuned
from core.models.loading import ModelSpec, load
from core.predict.classify import HEAD_FILE, META_FILE, classify, load_finetuned
from core.registry import ModelLoadError
from core.represent import corpus_index as ci
from core.represent import probes
from core.represent.probe_tasks import ProbeError
from core.runtime.job_outcome import JobCancelled
from core.runtime.jobs import JobRunner
from core.train.finetune import train
from core.train.finetune_config import FinetuneConfig, FinetuneError
from core.train.pretrain.train import PretrainConfig, PretrainError, pretrain

HOW = ("truncate", "overwrite")


def damage(path: Path, how: str) -> None:
    """Cut ``path`` to half its bytes, or overwrite 64 bytes in its middle with garbage (same length)."""
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    else:
        mid = len(data) // 2
        path.write_bytes(data[:mid] + b"\xff\xfe garbage \x00" * 4 + data[mid + 64 :])


def aside(path: Path) -> Path:
    return path.with_name(path.name + ".damaged")


@pytest.fixture(autouse=True)
def caches(tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("ENCODERLAB_LENS_DIR", str(tmp_path / "lens"))
    monkeypatch.setenv("ENCODERLAB_CORPUS_INDEX_DIR", str(tmp_path / "index"))
    monkeypatch.setenv("ENCODERLAB_PROBES_DIR", str(tmp_path / "probes"))
    reset_caches()  # nothing loaded before: every read below goes to the files
    yield
    reset_caches()


@pytest.fixture(scope="module")
def lm(tiny_models):
    return load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), task="mlm")


# ---------------------------------------------------------------------------------------------- tuned lens
def _save_lens(lm) -> Path:
    layers, hidden = lm.model.config.num_hidden_layers, lm.model.config.hidden_size
    tuned = TunedLens(layers, hidden)
    with torch.no_grad():
        tuned.weight.add_(0.01)
    report = TuneReport("k", "c", "bert", layers, 1, 0.0, 1.0, 1.0, (0.0,) * (layers + 1), (0.0,) * (layers + 1), 1)
    save_tuned(lm, tuned, report)
    return lens_dir(lm)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("name", [WEIGHTS_FILE, REPORT_FILE])
def test_damaged_tuned_lens_says_so_and_is_set_aside(lm, name, how):
    folder = _save_lens(lm)
    damage(folder / name, how)
    with pytest.raises(LensError) as err:
        load_tuned(lm)
    assert holds_kind(err.value, "lens.saved_tuned_lens_unreadable")
    assert "could not be read: it is damaged" in str(err.value) and "train the tuned lens again" in str(err.value)
    assert not folder.exists() and aside(folder).is_dir()  # set aside: the page offers to train a new one
    assert load_tuned(lm) is None
    _save_lens(lm)  # trained again: the fresh one loads
    assert load_tuned(lm) is not None


# ---------------------------------------------------------------------------------------------- corpus index
CORPUS = ("The bank of the river was muddy.", "I put money in the bank.", "A cat sat on the mat.")


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("name", [ci.INDEX_FILE, ci.ARRAYS_FILE, ci.META_FILE])
def test_damaged_corpus_index_says_so_and_the_job_builds_it_again(lm, name, how):
    cfg = ci.IndexConfig("text", CORPUS, depth=1)
    built = ci.build_index(lm, cfg)
    folder = ci.save_index(built)
    damage(folder / name, how)
    reset_caches()  # the LRU held the index it saved: read the files
    with pytest.raises(ci.CorpusIndexError) as err:
        ci.load_key(lm.spec.family, built.key, lm.spec.checkpoint)
    assert holds_kind(err.value, "corpus_index.saved_index_unreadable")
    assert "build the index again" in str(err.value)
    assert not folder.exists() and aside(folder).is_dir()
    assert ci.load_key(lm.spec.family, built.key, lm.spec.checkpoint) is None
    if name == ci.INDEX_FILE and how == "truncate":  # once: the page's job, which reads before it builds
        damage(ci.save_index(built) / name, how)
        reset_caches()
        runner = JobRunner(workers=False)
        job = runner.submit("index", ci.index_job(lm.spec, cfg))
        runner.wait(job, timeout=60)
        assert job.status == "done" and not job.result.loaded, job.error
        assert len(ci.load_key(lm.spec.family, built.key, lm.spec.checkpoint)) == len(built)


# ---------------------------------------------------------------------------------------------- probe result
@pytest.mark.parametrize("how", HOW)
def test_damaged_probe_result_says_so_and_is_set_aside(lm, how):
    cfg = probes.ProbeConfig(tasks=("length",), per_task=40)
    score = probes.TaskScore("length", "sentence", ("short", "long"), 40, 10, 60, (0.5, 0.6, 0.7), 0.5)
    result = probes.ProbeResult("c", "bert", 3, {}, 60, "bundled", (score,), 1.0)
    probes.save_result(lm, cfg, result)
    path = probes.result_path(lm, cfg)
    assert probes.saved_result(lm, cfg) == result
    damage(path, how)
    with pytest.raises(ProbeError) as err:
        probes.saved_result(lm, cfg)
    assert holds_kind(err.value, "probes.saved_result_unreadable") and "run the probes again" in str(err.value)
    assert not path.exists() and aside(path).is_file()
    assert probes.saved_result(lm, cfg) is None


# ---------------------------------------------------------------------------------------------- fine-tuned run
def toy(n: int, seed: int = 0) -> Split:
    rng = random.Random(seed)
    labels = [rng.randint(0, 1) for _ in range(n)]
    return Split(tuple(f"it was {'good' if y else 'bad'} {i}" for i, y in enumerate(labels)), tuple(labels))


DATA = LabelledData("toy", toy(32), toy(8, 1), ("neg", "pos"), "made in the test", "n/a")


@pytest.fixture(scope="module")
def finished_run(tiny_models, tmp_path_factory) -> Path:
    """A finished mean-pooling run (the encoder through from_pretrained, the head through safetensors)."""
    cfg = FinetuneConfig("bert", str(tiny_models["bert"]), max_steps=1, batch_size=8, max_length=16, pooling="mean")
    return Path(train(cfg, DATA, tmp_path_factory.mktemp("ft") / "run").model_dir)


@pytest.mark.parametrize(
    "name, how, record",
    [
        ("model.safetensors", "truncate", True),
        ("model.safetensors", "overwrite", True),  # loads without a word, but for the checksums
        (HEAD_FILE, "overwrite", True),
        (META_FILE, "truncate", True),
        ("model.safetensors", "truncate", False),  # a run saved before there were checksums: from_pretrained's error
        (HEAD_FILE, "truncate", False),
    ],
)
def test_damaged_finetuned_run_raises_model_load_error(finished_run, tmp_path, name, how, record):
    run = tmp_path / "model"
    shutil.copytree(finished_run, run)
    assert classify(load_finetuned(run, "cpu"), ["it was good"]).shape == (1, 2)
    if not record:
        (run / "checksums.json").unlink(missing_ok=True)  # core.runtime.artifacts.CHECKSUMS_FILE
    damage(run / name, how)
    with pytest.raises(ModelLoadError) as err:
        load_finetuned(run, "cpu")
    assert holds_kind(err.value, "classify.finetuned_run_unreadable"), str(err.value)
    assert "Train the run again" in str(err.value)


# ---------------------------------------------------------------------------------------------- a model folder
@pytest.mark.parametrize(
    "name, kind", [("model.safetensors", "load.weights_unreadable"), ("config.json", "load.not_valid_json")]
)
def test_damaged_model_folder_raises_model_load_error(tiny_models, tmp_path, name, kind):
    folder = tmp_path / "model"
    shutil.copytree(tiny_models["bert"], folder)
    (folder / name).write_bytes(bytes(range(256)) * 4)  # garbage: neither a header nor text
    with pytest.raises(ModelLoadError) as err:
        load(ModelSpec("bert", str(folder), "cpu"), task="mlm")
    assert holds_kind(err.value, kind), str(err.value)


# ---------------------------------------------------------------------------------------------- checkpoints
@pytest.fixture(scope="module")
def cancelled_run(tiny_models, tmp_path_factory):
    """A fine-tune run cancelled after its first step: its checkpoint is what Resume reads."""
    cfg = FinetuneConfig("bert", str(tiny_models["bert"]), epochs=2, batch_size=16, max_length=16, patience=0)

    def stop(info):
        if info.kind == "train" and info.step == 1:
            raise JobCancelled()

    out = tmp_path_factory.mktemp("ck") / "run"
    with pytest.raises(JobCancelled):
        train(cfg, DATA, out, on_step=stop)
    return cfg, out


@pytest.mark.parametrize(
    "name, how",
    [("optimizer.bin", "overwrite"), ("model.safetensors", "truncate"), ("trainer_state.json", "truncate")],
)
def test_damaged_finetune_checkpoint_says_so_and_is_set_aside(cancelled_run, tmp_path, name, how):
    cfg, done = cancelled_run
    out = tmp_path / "run"
    shutil.copytree(done, out)
    damage(out / "checkpoint" / name, how)
    with pytest.raises(FinetuneError) as err:
        train(cfg, DATA, out, resume=True)
    assert holds_kind(err.value, "train.checkpoint_unreadable"), str(err.value)
    assert not (out / "checkpoint").exists() and (out / "checkpoint.damaged").is_dir()  # no Resume offered now


def test_damaged_pretraining_checkpoint_says_so_and_the_run_starts_over(tmp_path):
    for name, n in (("train.txt", 30), ("heldout.txt", 4)):  # the bundled corpus's first documents
        docs = parse_documents((CORPUS_DIR / name).read_text())[:n]
        (tmp_path / name).write_text("\n\n".join("\n".join(d) for d in docs) + "\n")
    tiny = dict(size="tiny", vocab_size=300, steps=4, batch_size=4, max_len=32, eval_every=0, eval_instances=4)
    quiet = dict(checkpoint_every=2, log_every=1, threads=1, warmup=0.0, prior_bias=False)
    cfg = PretrainConfig(family="roberta", out=str(tmp_path / "out"), corpus=str(tmp_path), **tiny, **quiet)
    calls: list[int] = []
    stopped = pretrain(cfg, should_stop=lambda: calls.append(1) or len(calls) >= 2)
    assert stopped.status == "stopped"
    ckpt = tmp_path / "out" / "checkpoint"
    damage(ckpt / "optimizer.bin", "overwrite")  # torch.load would read it: the checksums tell
    with pytest.raises(PretrainError) as err:
        pretrain(cfg)
    assert holds_kind(err.value, "train.checkpoint_unreadable") and "starts over" in str(err.value)
    assert not ckpt.exists() and aside(ckpt).is_dir()
    again = pretrain(cfg)  # starts over from step 0
    assert again.status == "done" and again.steps == 4
    assert json.loads((tmp_path / "out" / "pretrain_log.json").read_text())["resumed_from"] == 0


# ---------------------------------------------------------------------------------------------- sparse autoencoder
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("name", [SS.WEIGHTS_FILE, SS.BROWSE_FILE, SS.REPORT_FILE])
def test_damaged_sae_says_so_and_is_set_aside(lm, tmp_path, monkeypatch, name, how):
    """Features' saved SAE: bytes overwritten in the middle of its weights loaded without a word before (and a file
    that did not parse read as no SAE at all, so the page offered to train one without saying why)."""
    monkeypatch.setenv("ENCODERLAB_SAE_DIR", str(tmp_path / "sae"))
    cfg = S.SAEConfig(
        layer=1,
        expansion=2,
        k=4,
        steps=3,
        batch_tokens=64,
        lr=1e-3,
        texts=tuple(f"{s} ({i})" for i in range(17) for s in CORPUS),
    )
    SS.train_and_save(lm, cfg)
    folder = SS.sae_dir(lm, cfg)
    reset_caches()
    damage(folder / name, how)
    with pytest.raises(S.SAEError) as err:
        SS.load_sae(lm, cfg)
    assert holds_kind(err.value, "sae.saved_sae_unreadable") and "it is damaged" in str(err.value)
    assert not folder.exists() and aside(folder).is_dir()  # set aside: the page offers to train it again
    assert SS.load_sae(lm, cfg) is None
    SS.train_and_save(lm, cfg)  # trained again: the fresh one loads
    assert SS.load_sae(lm, cfg) is not None

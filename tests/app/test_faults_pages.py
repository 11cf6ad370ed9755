"""Damaged artifacts and a deleted model folder, on the pages that read them (AppTest, tiny models, real files): the
page shows the "damaged" message beside its build/train/run button and raises nothing; a model folder deleted while
its model is cached gives a message, and the next load works once the folder is back."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from app.kit import jobs_panel as jobs_ui
from core.base.caches import reset_caches
from core.data.datasets_local import LabelledData, Split
from core.inspect.tuned_lens import WEIGHTS_FILE, TunedLens, TuneReport, lens_dir, save_tuned
from core.models.loading import ModelSpec, load
from core.represent import probes
from core.runtime.jobs import JobRunner
from core.runtime.run_folders import SessionSweeper
from core.train.finetune import train
from core.train.finetune_config import FinetuneConfig
from tests.app.conftest import click, new_app, open_page, page_for, page_path

DAMAGED = "could not be read: it is damaged"
BUNDLED = "encoderlab/bert-mini"  # the tiny zoo's bert under its bundled id: the sidebar's first model


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _warnings(at) -> list[str]:
    return [w.value for w in at.main.warning] + [e.value for e in at.main.error]


@pytest.fixture()
def env(use_tiny_zoo, tmp_path, monkeypatch):
    for var, sub in (
        ("ENCODERLAB_RUNS", "runs"),
        ("ENCODERLAB_LENS_DIR", "lens"),
        ("ENCODERLAB_CORPUS_INDEX_DIR", "index"),
        ("ENCODERLAB_PROBES_DIR", "probes"),
    ):
        monkeypatch.setenv(var, str(tmp_path / sub))
    reset_caches()
    threads = JobRunner(workers=False)  # the job on a thread here: a worker process costs seconds to start
    # the runner every page reaches, behind jobs_panel.runner(): patching the name ``runner`` itself leaked into a
    # module first imported during this test (app.kit.finetune_work binds it at import), whose later tests then
    # submitted to this runner while their pages read the process-wide one
    monkeypatch.setattr(jobs_ui, "_shared", lambda: (threads, SessionSweeper(threads, lambda sid: True)))
    return threads


def test_lens_page_says_the_tuned_lens_is_damaged_beside_train(env):
    lm = load(ModelSpec("bert", BUNDLED, "cpu"), task="mlm")
    layers, hidden = lm.model.config.num_hidden_layers, lm.model.config.hidden_size
    report = TuneReport("k", BUNDLED, "bert", layers, 1, 0.0, 1.0, 1.0, (0.0,) * (layers + 1), (0.0,) * (layers + 1), 1)
    save_tuned(lm, TunedLens(layers, hidden), report)
    _cut(lens_dir(lm) / WEIGHTS_FILE)
    at = page_for("lens")
    at.radio(key="lens.mode").set_value("tuned").run()
    assert not at.exception, at.exception
    assert any(DAMAGED in w and "train the tuned lens again" in w for w in _warnings(at)), _warnings(at)
    assert any(b.label == "Train tuned lens" for b in at.button)
    at.run()  # set aside: the message stays beside the button, nothing raises
    assert not at.exception and any(DAMAGED in w for w in _warnings(at))


def test_corpus_search_page_says_the_index_is_damaged_and_builds_it_again(env, tmp_path):
    at = page_for("corpus_search")
    at.radio(key="corpus_search.source").set_value("paste").run()
    at.text_area(key="corpus_search.text").set_value("The bank of the river was muddy.\nA cat sat on the mat.")
    at.button(key="FormSubmitter:corpus_search.form-Build index").click().run()
    env.wait(env.get(at.session_state["jobs.corpus_search"][-1]), timeout=60)
    (folder,) = [p for p in (tmp_path / "index").iterdir() if p.is_dir()]
    _cut(folder / "index.faiss")
    reset_caches()  # the index the job saved was kept loaded: read the files again, as a new process would
    at.run()
    assert not at.exception, at.exception
    assert any(DAMAGED in w and "build the index again" in w for w in _warnings(at)), _warnings(at)
    at.button(key="corpus_search.build_depth").click().run()  # the offer to rebuild
    env.wait(env.get(at.session_state["jobs.corpus_search"][-1]), timeout=60)
    at.run()
    assert not at.exception and not _warnings(at) and at.success  # the fresh index


def test_probes_page_says_the_saved_result_is_damaged_and_runs_again(env):
    lm = load(ModelSpec("bert", BUNDLED, "cpu"), task="base")
    path = probes.result_path(lm, probes.ProbeConfig(tasks=("length",), per_task=40))
    path.parent.mkdir(parents=True)
    path.write_text('{"checkpoint": "c", "scores": [{"task": "len')  # cut short
    at = page_for("probes")
    at.multiselect(key="probes.tasks").set_value(["length"])
    at.number_input(key="probes.per_task").set_value(40)
    click(at, "Run the probes")
    assert any(DAMAGED in w and "run the probes again" in w for w in _warnings(at)), _warnings(at)
    assert "jobs.probes" not in at.session_state
    click(at, "Run the probes")  # again: the damaged file is set aside, so the probes run
    job = env.get(at.session_state["jobs.probes"][-1])
    env.wait(job, timeout=120)
    assert job.status == "done", job.error


def test_finetune_page_says_a_finished_runs_weights_are_damaged(env, tiny_models, tmp_path):
    rng = random.Random(0)
    labels = [rng.randint(0, 1) for _ in range(24)]
    split = Split(tuple(f"it was {'good' if y else 'bad'} {i}" for i, y in enumerate(labels)), tuple(labels))
    data = LabelledData("toy", split, split, ("neg", "pos"), "made in the test", "n/a")
    cfg = FinetuneConfig("bert", str(tiny_models["bert"]), max_steps=1, batch_size=8, max_length=16, pooling="mean")
    result = train(cfg, data, tmp_path / "run")
    _cut(Path(result.model_dir) / "model.safetensors")
    run = dict(name="run1-bert", job_id=10**6, cfg=cfg, data=data, out=str(tmp_path / "run"), result=result)
    at = new_app()
    at.session_state["finetune.runs"] = [run]
    at.switch_page(page_path("finetune")).run()
    at.text_area(key="finetune.try_text.run1-bert").set_value("it was good")
    at.button(key="FormSubmitter:finetune.try.run1-bert-Classify").click().run()
    assert not at.exception, at.exception
    assert any(DAMAGED in e and "Train the run again" in e for e in _warnings(at)), _warnings(at)


def test_deleted_model_folder_says_so_and_loads_once_it_is_back(tiny_models, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(tiny_models["bert"], folder)
    at = open_page("fill_mask", params={"family": "bert", "model": "custom", "custom": str(folder)})
    click(at, "Predict")
    assert at.get("plotly_chart") and not _warnings(at)
    shutil.rmtree(folder)  # deleted while its model is cached and in use
    click(at, "Predict")  # the cached copy still answers, and the page says the folder is gone
    assert at.get("plotly_chart")
    assert any("is gone (deleted or moved)" in w and "Put the folder back" in w for w in _warnings(at)), _warnings(at)
    at.switch_page(page_path("attention")).run()  # a fresh load (attention weights): a message, no traceback
    assert not at.exception, at.exception
    assert any("Cannot get" in e and "check that the folder exists" in e for e in _warnings(at)), _warnings(at)
    shutil.copytree(tiny_models["bert"], folder)  # put back: the next load works (no failure was cached)
    at.run()
    assert not at.exception and not _warnings(at) and not at.sidebar.error, [e.value for e in at.sidebar.error]
    assert at.get("plotly_chart")

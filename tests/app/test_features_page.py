"""AppTest: the Features (SAE) page on the tiny zoo: no SAE yet says so and offers training; the job trains and saves
one, and the page then shows its quality and the three tabs (a feature's contexts, density and logit effects, a
search; the features on a sentence's token and a button that opens one; Fill-mask before and after steering); a
second session loads the saved SAE at once; a link restores the settings; bad settings get a message."""

from __future__ import annotations

import pytest

from tests.app.conftest import open_page, page_for

P = "features"


@pytest.fixture()
def sae_env(use_tiny_zoo, tmp_path, monkeypatch):
    from app.kit import jobs_panel as jobs_ui
    from core.inspect import sae_store
    from core.runtime.jobs import JobRunner

    monkeypatch.setenv("ENCODERLAB_SAE_DIR", str(tmp_path / "sae"))
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    threads = JobRunner(workers=False)  # the job on a thread here: a worker process costs seconds to start
    monkeypatch.setattr(jobs_ui, "runner", lambda: threads)
    sae_store._forget_all()
    yield threads
    sae_store._forget_all()


def job_lm():
    """The tiny zoo's BERT as the page loads it (the same spec: the same saved SAE)."""
    from app.kit.loaders import get_model
    from core.models.loading import ModelSpec
    from core.registry import bundled_id

    return get_model(ModelSpec("bert", bundled_id("bert"), "auto"), "mlm")


def _train(at, threads):
    at.number_input(key=f"{P}.steps").set_value(50).run()
    assert any("No SAE is saved" in i.value for i in at.info)
    next(b for b in at.button if b.label == "Train the SAE").click().run()
    assert not at.exception, at.exception
    job = threads.get(at.session_state[f"jobs.{P}"][-1])
    threads.wait(job, timeout=300)
    assert job.status == "done", job.error
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return job


def test_train_then_browse_search_open_and_steer(sae_env):
    at = page_for(P)
    job = _train(at, sae_env)
    assert job.result.layer == 1 and job.result.features == 8 * job.result.hidden
    labels = [m.label for m in at.metric]
    assert {"Variance explained", "Dead features", "MLM loss recovered"} <= set(labels)
    html = " ".join(h.proto.body for h in at.get("html"))
    assert html.count('class="attr-tok"') > 10  # top contexts as token strips
    charts = [c.key for c in at.get("plotly_chart")]
    assert {f"{P}.fig.density", f"{P}.fig.up", f"{P}.fig.down", f"{P}.fig.token"} <= set(charts)
    # the features on a token of the sentence: a button opens one in the browser
    opener = next(b for b in at.button if b.key.startswith(f"{P}.open."))
    feature = int(opener.key.rsplit(".", 1)[1])
    opener.click().run()
    assert at.number_input(key=f"{P}.feature").value == feature
    # search by the token the open feature's strongest context fired on: that feature is among the hits
    from core.inspect import sae_store
    from core.inspect.sae import SAEConfig
    from core.inspect.sae_features import contexts

    sae, _, browse = sae_store.load_sae(job_lm(), SAEConfig(layer=1, steps=50))
    top = contexts(job_lm(), sae, browse, feature)[0]
    at.text_input(key=f"{P}.search").set_value(top.pieces[top.position]).run()
    hits = [d.value for d in at.dataframe if "top contexts on it" in d.value.columns]
    assert hits and feature in hits[0]["feature"].tolist()
    # steering: Fill-mask before and after, side by side
    at.slider(key=f"{P}.value").set_value(2.0).run()
    assert not at.exception and not at.error
    assert any(m.label == "Top answer with feature " + str(feature) + " = 2" for m in at.metric)
    assert f"{P}.fig.steer.0" in [c.key for c in at.get("plotly_chart")]
    # a second session loads the saved SAE at once: no training offered
    again = page_for(P)
    again.number_input(key=f"{P}.steps").set_value(50).run()
    assert not any(b.label == "Train the SAE" for b in again.button) and again.metric
    # a link to a feature this SAE does not have says so and opens feature 0
    linked = open_page(P, {f"{P}.steps": "50", f"{P}.feature": str(job.result.features + 5)})
    assert any("out of range for this SAE" in w.value for w in linked.warning)
    assert linked.number_input(key=f"{P}.feature").value == 0


def test_a_link_restores_the_settings_and_bad_ones_fall_back(sae_env):
    at = open_page(P, {f"{P}.layer": "2", f"{P}.k": "16", f"{P}.steps": "100"})
    assert at.number_input(key=f"{P}.layer").value == 2 and at.selectbox(key=f"{P}.k").value == 16
    at = open_page(P, {f"{P}.k": "7", f"{P}.steps": "99999"})
    notice = " ".join(w.value for w in at.warning)
    assert f"{P}.k" in notice and f"{P}.steps" in notice
    assert at.selectbox(key=f"{P}.k").value == 32


def test_the_page_in_chinese(sae_env):
    at = open_page(P, {"lang": "zh"})
    assert at.title[0].value == "特征（SAE）" and not at.error
    assert any("还没有保存的 SAE" in i.value for i in at.info)
    assert any(b.label == "训练 SAE" for b in at.button)


def test_training_on_my_sentences(sae_env):
    from core.models.tiny import example_texts

    at = page_for(P)
    at.segmented_control(key=f"{P}.source").set_value("mine").run()
    at.text_area(key=f"{P}.texts").set_value("\n".join(example_texts()[:10])).run()
    assert any("at least 50" in e.value for e in at.error)  # too few: said, and nothing to train
    assert not any(b.label == "Train the SAE" for b in at.button)
    mine = [f"{a} {b.lower()}" for a in example_texts()[:10] for b in example_texts()[10:16]]
    at.text_area(key=f"{P}.texts").set_value("\n".join(mine)).run()
    job = _train(at, sae_env)
    assert job.result.config["texts"] == len(mine) and job.result.eval_tokens > 0

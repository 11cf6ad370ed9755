"""AppTest for the Fine-tune page: bundled data, a tiny run to the end (result, sidebar registration, compare),
upload with column choice and bad files, GLUE offline, and a failing run that keeps the finished one."""
from __future__ import annotations

import time

import pytest

from core.jobs import runner
from tests.app.conftest import new_app, page_path

pytestmark = pytest.mark.timeout(600)


@pytest.fixture()
def at(use_tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr("core.datasets_local.hub_reachable", lambda *a, **k: False)
    monkeypatch.setattr("app.render_finetune.hub_reachable", lambda *a, **k: False)
    app = new_app()
    app.switch_page(page_path("finetune")).run()
    assert not app.exception, app.exception
    return app


def _texts(at) -> str:
    return " ".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [e.value for e in at.error]
                    + [w.value for w in at.warning] + [i.value for i in at.info])


def _wait_all_jobs(timeout: float = 300) -> None:
    end = time.time() + timeout
    while any(not j.done for j in runner().jobs()):
        assert time.time() < end, "fine-tune job did not finish"
        time.sleep(0.2)


def _start_tiny(at, **settings) -> None:
    at.number_input(key="finetune.max_steps").set_value(settings.get("max_steps", 3))
    at.number_input(key="finetune.rows").set_value(settings.get("rows", 32))
    at.number_input(key="finetune.test_rows").set_value(settings.get("test_rows", 12))
    at.select_slider(key="finetune.lr").set_value(1e-3)
    at.select_slider(key="finetune.max_len").set_value(32)
    at.number_input(key="finetune.freeze_n").set_value(settings.get("freeze_n", 0))
    at.button(key="FormSubmitter:finetune.form-Start fine-tuning").click().run()
    assert not at.exception, at.exception


def test_bundled_data_and_a_tiny_run_end_to_end(at):
    text = _texts(at)
    assert "600" in text and "378" in text and "CC BY 4.0" in text and "65.3%" in text
    assert "No runs yet" in text
    _start_tiny(at)
    _wait_all_jobs()
    at.run()
    assert not at.exception, at.exception
    labels = [m.label for m in at.metric]
    assert "Held-out accuracy" in labels and "Macro-F1" in labels
    assert len(at.get("plotly_chart")) >= 3  # curves, confusion matrix, compare curves
    assert at.dataframe  # worst errors and/or compare table
    # The fine-tuned model is in the sidebar picker for this session.
    opts = at.sidebar.selectbox(key="sidebar.checkpoint").options
    assert any("run1-bert" in o and "fine-tuned" in o for o in opts), opts
    # Try-it box classifies a new text.
    at.text_area(key="finetune.try_text.run1-bert").set_value("This worked wonders for my pain.")
    at.button(key="FormSubmitter:finetune.try.run1-bert-Classify").click().run()
    assert not at.exception, at.exception
    assert len(at.get("plotly_chart")) >= 4  # + the try-it probabilities
    # Pick it through the page's button: the sidebar switches to the fine-tuned folder. (Last: AppTest cannot
    # re-read a format_func selectbox whose value was set from a callback.)
    at.button(key="finetune.pick.run1-bert").click().run()
    assert "run1-bert" in at.session_state["sidebar.checkpoint"]


def test_failing_run_shows_error_and_keeps_finished_run(at):
    _start_tiny(at)
    _wait_all_jobs()
    at.run()
    at.sidebar.selectbox(key="sidebar.family").set_value("albert").run()
    _start_tiny(at, freeze_n=1)  # ALBERT shares its layers: cannot freeze the first N
    _wait_all_jobs()
    at.run()
    assert not at.exception, at.exception
    assert any("ALBERT shares one layer" in e.value for e in at.error), [e.value for e in at.error]
    assert any(m.label == "Held-out accuracy" for m in at.metric)  # run1 is still there


def test_upload_column_choice_and_bad_files(at):
    at.radio(key="finetune.source").set_value("Upload CSV / TSV / JSONL").run()
    rows = "review\tstars\n" + "".join(f"text number {i}\t{i % 2 + 1}\n" for i in range(20))
    at.file_uploader(key="finetune.upload").set_value(("toy.tsv", rows.encode(), "text/tab-separated-values")).run()
    assert not at.exception, at.exception
    at.selectbox(key="finetune.text_col").set_value("review")
    at.selectbox(key="finetune.label_col").set_value("stars").run()
    text = _texts(at)
    assert "Integer labels 1, 2" in text and "training" in text
    at.selectbox(key="finetune.label_col").set_value("review").run()
    at.selectbox(key="finetune.text_col").set_value("stars").run()
    assert any("text, not labels" in e.value or "single example" in e.value for e in at.error)
    at.file_uploader(key="finetune.upload").set_value(("bad.csv", "a,b\ncaf\xe9,1\n".encode("latin-1"), "text/csv")).run()
    assert any("not UTF-8" in e.value for e in at.error)
    at.file_uploader(key="finetune.upload").set_value(("one.csv", b"text,label\nhello,1\n", "text/csv")).run()
    assert any("1 data row" in e.value for e in at.error)
    at.file_uploader(key="finetune.upload").set_value(("s.csv", b"text,label\n" + b"x,a\n" * 9, "text/csv")).run()
    assert any("same label" in e.value for e in at.error)
    assert not at.exception


def test_glue_offline_says_so(at):
    at.radio(key="finetune.source").set_value("GLUE (needs the Hub)").run()
    assert any("Offline" in w.value for w in at.warning)
    assert not at.exception

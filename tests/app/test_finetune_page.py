"""AppTest for the Fine-tune page: bundled data, a tiny run to the end (result, sidebar registration, compare),
upload with column choice and bad files, GLUE offline, and a failing run that keeps the finished one."""

from __future__ import annotations

import time

import pytest

from core.runtime.backend import runner
from tests.app.conftest import new_app, open_page, page_path

pytestmark = pytest.mark.timeout(600)


@pytest.fixture()
def at(use_tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr("core.data.datasets_local.hub_reachable", lambda *a, **k: False)
    monkeypatch.setattr("app.views.train.finetune_data.hub_reachable", lambda *a, **k: False)
    app = new_app()
    app.switch_page(page_path("finetune")).run()
    assert not app.exception, app.exception
    return app


def _texts(at) -> str:
    return " ".join(
        [m.value for m in at.markdown]
        + [c.value for c in at.caption]
        + [e.value for e in at.error]
        + [w.value for w in at.warning]
        + [i.value for i in at.info]
    )


def _wait_all_jobs(timeout: float = 300) -> None:
    end = time.time() + timeout
    while any(not j.done for j in runner().jobs()):
        assert time.time() < end, "fine-tune job did not finish"
        time.sleep(0.2)


def _start_tiny(at, form: str = "form", **settings) -> None:
    at.number_input(key="finetune.max_steps").set_value(settings.get("max_steps", 3))
    at.number_input(key="finetune.rows").set_value(settings.get("rows", 32))
    at.number_input(key="finetune.test_rows").set_value(settings.get("test_rows", 12))
    at.select_slider(key="finetune.lr").set_value(1e-3)
    at.select_slider(key="finetune.max_len").set_value(32)
    at.number_input(key="finetune.freeze_n").set_value(settings.get("freeze_n", 0))
    at.button(key=f"FormSubmitter:finetune.{form}-Start fine-tuning").click().run()
    assert not at.exception, at.exception


def test_bundled_data_and_a_tiny_run_end_to_end(at):
    assert at.radio(key="finetune.source").value == "wordnet"  # the default data: six topics, majority 1/6
    assert "600" in _texts(at) and "300" in _texts(at) and "16.7%" in _texts(at)
    at.radio(key="finetune.source").set_value("drugreview").run()
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
    # Switch off heads under the try-it box: the classifier's class probabilities before and after.
    scope = "finetune.try.run1-bert"
    at.text_input(key=f"{scope}.ab.spec").set_value("L0*, L1*")
    at.button(key=f"FormSubmitter:{scope}.ab.form-Apply").click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    res = at.session_state[f"{scope}.ab.result"]
    assert res.kind == "classify" and len(res.heads) == 8 and len(res.labels) == len(res.before) >= 2
    assert res.after != res.before and abs(sum(res.after) - 1) < 1e-5
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
    at.radio(key="finetune.source").set_value("upload").run()
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
    at.file_uploader(key="finetune.upload").set_value(
        ("bad.csv", "a,b\ncaf\xe9,1\n".encode("latin-1"), "text/csv")
    ).run()
    assert any("not UTF-8" in e.value for e in at.error)
    at.file_uploader(key="finetune.upload").set_value(("one.csv", b"text,label\nhello,1\n", "text/csv")).run()
    assert any("1 data row" in e.value for e in at.error)
    at.file_uploader(key="finetune.upload").set_value(("s.csv", b"text,label\n" + b"x,a\n" * 9, "text/csv")).run()
    assert any("same label" in e.value for e in at.error)
    assert not at.exception


def test_glue_offline_says_so(at):
    at.radio(key="finetune.source").set_value("glue").run()
    assert any("Offline" in w.value for w in at.warning)
    assert not at.exception


# ---------------------------------------------------------------------------------------------- workshop mode
def _open(params: dict[str, str]):
    return open_page("finetune", params)


def _param(at, name: str):
    value = at.query_params[name]
    return value[0] if isinstance(value, list) else value


@pytest.fixture()
def env(use_tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setattr("core.data.datasets_local.hub_reachable", lambda *a, **k: False)
    monkeypatch.setattr("app.views.train.finetune_data.hub_reachable", lambda *a, **k: False)


def test_the_page_in_chinese(env):
    from app.kit.i18n import catalog

    at = _open({"lang": "zh"})
    zh = catalog()
    assert at.title[0].value == zh["finetune.title"]["zh"]
    assert zh["finetune.source.wordnet"]["zh"] in at.radio(key="finetune.source").options
    assert zh["finetune.no_runs"]["zh"] in _texts(at)
    assert at.button(key="FormSubmitter:finetune.form-" + zh["finetune.start"]["zh"])
    assert at.radio(key="finetune.source").value == "wordnet"  # values stay language-independent


def test_a_link_restores_data_and_hyperparameters_but_starts_nothing(env):
    before = len(runner().jobs())
    at = _open(
        {
            "finetune.source": "wordnet",
            "finetune.lr": "0.001",
            "finetune.epochs": "5",
            "finetune.batch": "32",
            "finetune.max_len": "64",
            "finetune.warmup": "0.2",
            "finetune.wd": "0.05",
            "finetune.clip": "0.5",
            "finetune.pooling": "mean",
            "finetune.freeze_emb": "1",
            "finetune.freeze_n": "1",
            "finetune.seed": "7",
            "finetune.patience": "0",
            "finetune.evals": "2",
            "finetune.rows": "48",
            "finetune.test_rows": "24",
            "finetune.max_steps": "9",
        }
    )
    assert at.radio(key="finetune.source").value == "wordnet"
    assert "WordNet" in _texts(at) and "300" in _texts(at)
    assert at.select_slider(key="finetune.lr").value == 1e-3
    assert at.number_input(key="finetune.epochs").value == 5
    assert at.select_slider(key="finetune.batch").value == 32
    assert at.select_slider(key="finetune.max_len").value == 64
    assert at.number_input(key="finetune.warmup").value == 0.2
    assert at.number_input(key="finetune.wd").value == 0.05
    assert at.number_input(key="finetune.clip").value == 0.5
    assert at.radio(key="finetune.pooling").value == "mean"
    assert at.checkbox(key="finetune.freeze_emb").value is True
    assert [
        at.number_input(key=f"finetune.{k}").value
        for k in ("freeze_n", "seed", "patience", "evals", "rows", "test_rows", "max_steps")
    ] == [1, 7, 0, 2, 48, 24, 9]
    assert any("Nothing runs until" in i.value for i in at.info)
    # A link never starts a run by itself.
    assert len(runner().jobs()) == before and "No runs yet" in _texts(at)
    at.run()
    assert len(runner().jobs()) == before and not at.session_state["finetune.runs"]
    # The address bar keeps following the widgets.
    at.number_input(key="finetune.epochs").set_value(4)
    at.button(key="FormSubmitter:finetune.form-Start fine-tuning").click().run()
    _wait_all_jobs()
    at.run()
    assert _param(at, "finetune.epochs") == "4" and _param(at, "finetune.source") == "wordnet"


def test_a_bad_link_value_falls_back_with_a_notice(env):
    at = _open({"finetune.batch": "7", "finetune.lr": "0.5", "finetune.source": "imdb", "finetune.epochs": "12"})
    warning = " ".join(w.value for w in at.warning)
    assert "`finetune.batch`" in warning and "`finetune.lr`" in warning and "`finetune.source`" in warning
    assert at.select_slider(key="finetune.batch").value == 16
    assert at.select_slider(key="finetune.lr").value == 1e-4  # the tiny test models count as small
    assert at.radio(key="finetune.source").value == "wordnet"
    assert at.number_input(key="finetune.epochs").value == 12  # the good value in the same link is kept


def test_presenter_view_folds_the_advanced_hyperparameters(env):
    from app.kit.i18n import catalog

    at = _open({"present": "1"})
    settings = [e for e in at.expander if e.label == catalog()["presenter.settings"]["en"]]
    assert settings, [e.label for e in at.expander]
    inside = {w.key for w in settings[0].number_input} | {w.key for w in settings[0].select_slider}
    assert {"finetune.warmup", "finetune.wd", "finetune.clip", "finetune.seed", "finetune.max_len"} <= inside
    assert "finetune.lr" not in inside  # the first row and the data picker stay in view
    assert at.radio(key="finetune.source") and at.button(key="FormSubmitter:finetune.form-Start fine-tuning")


def test_a_finished_run_and_a_prediction_go_into_the_report(env):
    at = _open({})
    _start_tiny(at)
    _wait_all_jobs()
    at.run()
    assert not at.exception, at.exception
    entries = at.session_state["report.entries"]
    job_ids = [r["job_id"] for r in at.session_state["finetune.runs"]]
    entry = entries[f"finetune:{job_ids[0]}"]
    assert entry.inputs["Model"] == "encoderlab/bert-mini"
    assert entry.inputs["Learning rate"] == "1e-03" and entry.inputs["Max length (tokens)"] == "32"
    assert entry.inputs["Rows used"] == "32 training, 12 held-out"
    assert any(r["metric"] == "Held-out accuracy" for r in entry.rows)
    assert len(entry.figures) == 3  # the curves, the confusion matrix and the data map
    at.run()
    assert len([k for k in at.session_state["report.entries"] if k.startswith("finetune:")]) == 1  # not again
    at.text_area(key="finetune.try_text.run1-bert").set_value("This worked wonders for my pain.")
    at.button(key="FormSubmitter:finetune.try.run1-bert-Classify").click().run()
    assert not at.exception, at.exception
    tries = [e for k, e in at.session_state["report.entries"].items() if k.startswith("finetune:try:")]
    assert len(tries) == 1 and tries[0].inputs["Text"] == "This worked wonders for my pain."
    assert tries[0].rows and tries[0].figures and tries[0].text.startswith("Predicted")
    at.button(key="FormSubmitter:finetune.try.run1-bert-Classify").click().run()  # same text: replaced
    assert len([k for k in at.session_state["report.entries"] if k.startswith("finetune:try:")]) == 1


def test_settings_survive_leaving_the_page_and_coming_back(at):
    """Issue 14: the settings went back to their defaults (max steps 0) after a visit to another page."""
    at.radio(key="finetune.source").set_value("wordnet").run()
    at.number_input(key="finetune.seed").set_value(7)
    _start_tiny(at, max_steps=4)  # a form's values count once it is submitted
    _wait_all_jobs()
    at.run()
    at.switch_page(page_path("home")).run()
    assert not at.exception, at.exception
    at.query_params.clear()  # the sidebar's navigation opens a page without the other page's parameters
    at.switch_page(page_path("finetune")).run()
    assert not at.exception, at.exception
    assert at.radio(key="finetune.source").value == "wordnet"
    assert at.number_input(key="finetune.max_steps").value == 4
    assert at.number_input(key="finetune.seed").value == 7 and at.number_input(key="finetune.rows").value == 32
    assert at.select_slider(key="finetune.lr").value == 1e-3
    # No link was opened: the page must not say the settings came from one.
    assert not any("come from the link" in i.value for i in at.info), [i.value for i in at.info]


def test_upload_guesses_the_columns_by_name_and_says_why(at):
    """Issue 14: `A,B,label` became text = A, second text = none, label = B."""
    at.radio(key="finetune.source").set_value("upload").run()
    assert any("up to 20 MB" in c.value and "server.maxUploadSize" in c.value for c in at.caption)
    rows = "A,B,label\n" + "".join(f"first text {i},second text {i},{'yes' if i % 2 else 'no'}\n" for i in range(20))
    at.file_uploader(key="finetune.upload").set_value(("pairs.csv", rows.encode(), "text/csv")).run()
    assert not at.exception, at.exception
    assert at.selectbox(key="finetune.text_col").value == "A"
    assert at.selectbox(key="finetune.text_col_b").value == "B"
    assert at.selectbox(key="finetune.label_col").value == "label"
    assert not at.error, [e.value for e in at.error]
    caption = " ".join(c.value for c in at.caption)
    assert "text **A** (its header says so)" in caption and "label **label** (its header says so)" in caption
    # The user's own choice stands on the next runs; a new file starts from its own guess.
    at.selectbox(key="finetune.text_col_b").set_value("(none)").run()
    assert at.selectbox(key="finetune.text_col_b").value == "(none)"
    at.file_uploader(key="finetune.upload").set_value(
        ("semi.csv", b"text;label\n" + b"hello;1\n" * 3, "text/csv")
    ).run()
    assert any("separated by ';'" in e.value for e in at.error), [e.value for e in at.error]
    at.file_uploader(key="finetune.upload").set_value(("x.csv", b"PK\x03\x04\x00\x00binary", "text/csv")).run()
    assert any("not a text file" in e.value for e in at.error), [e.value for e in at.error]
    assert not at.exception


def test_defaults_follow_the_model_size_and_the_articles_settings_are_one_click_away(at):
    """Issue 14: the defaults learnt nothing on the default model; small models get their own, explained."""
    assert at.select_slider(key="finetune.lr").value == 1e-4 and at.number_input(key="finetune.epochs").value == 1
    assert at.select_slider(key="finetune.max_len").value == 64
    assert any("Settings for a small model" in c.value and "learns nothing" in c.value for c in at.caption)
    at.button(key="finetune.preset.articles").click().run()
    assert not at.exception, at.exception
    assert at.select_slider(key="finetune.lr").value == 3e-5 and at.number_input(key="finetune.epochs").value == 3
    assert at.select_slider(key="finetune.max_len").value == 128
    assert any("The articles' settings" in c.value for c in at.caption)
    at.button(key="finetune.preset.small").click().run()
    assert at.select_slider(key="finetune.lr").value == 1e-4


# ---------------------------------------------------------------------------------------------- issue 21: token task
def _df(at, first_column: str):
    """The table whose first column is ``first_column`` (AppTest finds dataframes by position, not key)."""
    return next(d.value for d in at.dataframe if list(d.value.columns)[:1] == [first_column])


def test_token_task_switch_data_picker_and_split_table(at):
    assert at.radio(key="finetune.task").value == "sequence"
    at.radio(key="finetune.task").set_value("token").run()
    assert not at.exception, at.exception
    assert at.radio(key="finetune.tok_source").value == "sample"
    text = _texts(at)
    assert "**240** training and **60** held-out sentences" in text and "CC0" in text
    # A mini (the tiny zoo's hidden 32) starts from its own lr, the article's 5e-5 one click away; both quoted.
    assert at.select_slider(key="finetune.lr").value == 3e-4 and "3e-5 to 7e-5 for sequence labelling" in text
    at.button(key="finetune.preset.articles").click().run()
    assert at.select_slider(key="finetune.lr").value == 5e-5
    assert any("The article's settings for sequence labelling" in c.value for c in at.caption)
    # The split table: the sidebar model's tokenizer on the example words, first piece labelled.
    df = _df(at, "word")
    assert list(df.iloc[:, 0][:2]) == ["Anneliese", "Kowalczyk"]
    assert (df.iloc[:, 2] > 1).any() and all(p.split(" · ")[0] == lab for p, lab in zip(df.iloc[:, 1], df.iloc[:, 3]))
    at.text_input(key="finetune.tok_split_text").set_value("unbelievably Reykjavik").run()
    assert len(_df(at, "word")) == 2
    # A bad upload says which line is wrong; back to sequence restores its lr.
    at.radio(key="finetune.tok_source").set_value("upload").run()
    at.file_uploader(key="finetune.tok_upload").set_value(("x.conll", b"Ada B-PER\nLovelace\n", "text/plain")).run()
    assert any("line 2" in e.value and "has no tag" in e.value for e in at.error), [e.value for e in at.error]
    at.radio(key="finetune.task").set_value("sequence").run()
    assert at.select_slider(key="finetune.lr").value == 3e-5 and not at.exception  # the articles' preset, for texts


def test_advice_warns_below_64_before_start_and_remedy_settings_are_there(env):
    at = _open(
        {"finetune.max_len": "32", "finetune.dropout": "0.4", "finetune.grad_ckpt": "1", "finetune.pooling": "mean"}
    )
    warnings = [w.value for w in at.warning]
    assert any("below 64" in w and "do not go below 64" in w for w in warnings), warnings
    assert any("Dropout 0.4" in w for w in warnings), warnings
    assert at.checkbox(key="finetune.grad_ckpt").value is True
    assert at.select_slider(key="finetune.dropout").label.endswith("(the article: 0.1–0.3)")
    assert at.select_slider(key="finetune.dropout").value == 0.4
    assert any("early-stopping patience 2–3" in c.value for c in at.caption)
    assert at.selectbox(key="finetune.precision").options[0].startswith("auto")
    assert any(e.label == "Out of memory?" for e in at.expander)
    assert len(runner().jobs()) == 0 or all(j.done for j in runner().jobs())  # a link starts nothing
    at.radio(key="finetune.task").set_value("token").run()
    assert not [r for r in at.radio if r.key == "finetune.pooling"]  # no pooling for words (walk finding)
    assert at.checkbox(key="finetune.tok_mix").value is False  # the family's token head, or the scalar mix
    assert any("below 64" in w.value for w in at.warning) and not at.exception


def test_a_tiny_token_run_end_to_end(at):
    at.radio(key="finetune.task").set_value("token").run()
    at.checkbox(key="finetune.tok_mix").set_value(True)
    _start_tiny(at, "form_token", rows=32, test_rows=8, max_steps=3)
    _wait_all_jobs()
    at.run()
    assert not at.exception, at.exception
    labels = [m.label for m in at.metric]
    assert {"Entity F1", "Entity precision", "Entity recall", "Token accuracy"} <= set(labels), labels
    assert any("Majority-tag baseline" in c.value for c in at.caption)
    per_label = _df(at, "entity type")
    assert set(per_label.iloc[:, 0]) <= {"DATE", "LOC", "ORG", "PER"} and len(per_label) >= 1
    html = " ".join(h.proto.body for h in at.get("html"))
    assert html.count('class="tk-s"') == 8  # the held-out sentences
    assert len(at.get("plotly_chart")) >= 2  # curves + the learned layer weights
    opts = at.sidebar.selectbox(key="sidebar.checkpoint").options
    assert any("run1-bert" in o and "fine-tuned" in o for o in opts), opts
    at.text_input(key="finetune.tag_text.run1-bert").set_value("Ada <b>Lovelace</b> flew to Lisbon .")
    at.button(key="FormSubmitter:finetune.tag.run1-bert-Tag").click().run()
    assert not at.exception, at.exception
    table = next(d.value for d in at.dataframe if list(d.value.columns) == ["word", "tag", "probability"])
    assert list(table.iloc[:, 0]) == ["Ada", "<", "b", ">", "Lovelace", "<", "/", "b", ">", "flew", "to", "Lisbon", "."]
    html = " ".join(h.proto.body for h in at.get("html"))
    assert "&lt;" in html and "<b>Lovelace" not in html  # user text stays text

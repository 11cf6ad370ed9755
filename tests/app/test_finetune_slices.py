"""The Fine-tune page's slices (app/views/train/finetune_slices.py) through its runs section, on FinetuneResult objects
built by hand: a finished run shows its slices table and chart, the keyword comes from the URL, a bad regex shows
its message (and the other slices stay), two runs go side by side with the rows they disagree on, two different
held-out sets are refused in words, a token run has none (its rows are words), and 中文 reads Chinese."""

from __future__ import annotations

import re

from streamlit.testing.v1 import AppTest

from app.kit.i18n import language, t
from tests.core.test_slices import run

TEXTS = ("not good", "good", "very good", "not bad", "bad", "really bad")
GOLD = (1, 1, 1, 0, 0, 0)


def _section(runs, params=None):
    """The page's runs section (and its URL fields bound first, as the page does) for finished runs."""
    import streamlit as st

    from app.kit import urlstate
    from app.views.train import finetune_runs, finetune_slices

    urlstate.bind(finetune_slices.FIELDS)
    from core.data.datasets_local import LabelledData, Split

    def data(r):  # the data a run was trained on, as the page keeps it (its held-out split is the run's)
        held_out = Split(tuple(r.test_texts), tuple(int(y) for y in r.test_labels))
        return LabelledData("toy", held_out, held_out, r.label_names, "made in a test", "n/a")

    rows = [dict(name=n, result=r, cfg=r.config, data=data(r), job_id=i, out="") for i, (n, r) in enumerate(runs)]
    st.session_state.setdefault("report.runs_recorded", set())
    finetune_runs.runs_section(rows, {}, resume=print, restart=print, load=print)


def _app(runs, params=None, lang="en") -> AppTest:
    at = AppTest.from_function(_section, args=(runs,), default_timeout=60)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    at.session_state["ui.lang"] = lang
    at.run()
    assert not at.exception, at.exception
    return at


def _shown(markdown: str) -> str:
    """An element's Markdown as a person reads it (app.kit.render.as_text's escapes undone)."""
    return re.sub(r"\\(.)", r"\1", markdown)


def _tables(at):
    return [tb.value for tb in at.table]


def _slices_table(at):
    first = t("slices.col.slice")
    return next(tb for tb in _tables(at) if list(tb.columns)[:2] == [first, t("slices.col.rows")])


def test_a_finished_run_shows_its_slices_with_the_urls_keyword_and_a_bad_regex_says_why():
    a = run(TEXTS, GOLD, [0, 1, 1, 1, 0, 0])
    at = _app([("run1", a)], {"finetune.slice_keyword": "not"})
    assert at.text_input(key="finetune.slice_keyword").value == "not"
    table = _slices_table(at)
    names = list(table.iloc[:, 0])
    assert names[0] == t("slices.name.all") and t("slices.name.label", label="pos") in names
    assert t("slices.name.keyword_has", text="not") in names and t("slices.name.keyword_lacks", text="not") in names
    row = table[table.iloc[:, 0] == t("slices.name.keyword_has", text="not")].iloc[0]
    assert (row.iloc[1], row.iloc[2]) == ("2", "0.0%")  # both "not" rows wrong
    assert len(at.get("plotly_chart")) >= 2  # the run's curves and its slices
    assert any(b.label == t("slices.csv") for b in at.get("download_button"))
    at.text_input(key="finetune.slice_regex").set_value("(good")
    next(b for b in at.button if b.label == t("slices.apply")).click().run()
    assert not at.exception, at.exception
    (error,) = [_shown(e.value) for e in at.error]
    assert "“(good” is not valid" in error and "never closed" in error
    assert at.query_params["finetune.slice_regex"] == "(good"  # kept in the URL as typed
    names = list(_slices_table(at).iloc[:, 0])
    assert t("slices.name.keyword_has", text="not") in names and not [n for n in names if "/" in n]
    at.text_input(key="finetune.slice_regex").set_value("go+d$")
    next(b for b in at.button if b.label == t("slices.apply")).click().run()
    assert not at.error and t("slices.name.regex_has", text="go+d$") in list(_slices_table(at).iloc[:, 0])


def test_two_runs_side_by_side_with_their_disagreements_and_different_held_out_sets_refused():
    a = run(TEXTS, GOLD, [0, 1, 1, 1, 0, 0])
    b = run(TEXTS, GOLD, [1, 1, 1, 0, 0, 1], seed=7)
    at = _app([("run1", a), ("run2", b)], {"finetune.slice_keyword": "not"})
    pair = next(tb for tb in _tables(at) if t("slices.col.only_right", side="A") in tb.columns)
    every = pair.iloc[0]
    # A right on 4 of 6, B on 5: B's two rows (1, 4) against A's one (6) make +16.7 points
    assert every[t("slices.col.difference")] == "+16.7"
    assert (every[t("slices.col.only_right", side="A")], every[t("slices.col.only_right", side="B")]) == ("1", "2")
    assert every[t("slices.col.accuracy_of", side="A")] == "66.7% (30.0–90.3)"  # 4 of 6, Wilson
    dis = next(tb for tb in _tables(at) if t("slices.col.predicts", run="run1") in tb.columns)
    assert list(dis[t("slices.col.row")]) == [1, 4, 6] and dis.iloc[0][t("slices.col.text")] == "not good"
    # within the keyword's slice: its two rows
    within = at.selectbox(key="finetune.slices.cmp.within")
    within.set_value(within.options.index(t("slices.name.keyword_has", text="not"))).run()
    dis = next(tb for tb in _tables(at) if t("slices.col.predicts", run="run1") in tb.columns)
    assert list(dis[t("slices.col.row")]) == [1, 4]
    other = run(TEXTS[:5], GOLD[:5], [1, 1, 1, 0, 0])
    refused = _app([("run1", a), ("run3", other)])
    assert [_shown(e.value) for e in refused.error] == [
        "The two runs were measured on different held-out sets: run A's has 6 rows, run B's 5. Compare runs trained "
        "on the same data with the same held-out rows."
    ]


def test_a_token_run_has_no_slices_and_chinese_reads_chinese():
    tok = run(("w1", "w2"), (0, 1), [0, 1], task="token")
    at = _app([("tok", tok)])
    assert not at.text_input and not at.table and not [m for m in at.markdown if m.value == t("slices.title")]
    zh = _app([("run1", run(TEXTS, GOLD, [0, 1, 1, 1, 0, 0]))], {"finetune.slice_regex": "(bad"}, lang="zh")
    with language("zh"):
        table = _slices_table(zh)
        assert list(table.columns)[:3] == ["切片", "行数", "准确率"] and table.iloc[0, 0] == "全部留出行"
        assert t("slices.name.label", label="neg") == "真实标签：neg"
    (error,) = [_shown(e.value) for e in zh.error]
    assert error.startswith("正则表达式“(bad”无效：有一个“(”没有对应的“)”")

"""The Fine-tune page's data map (app/views/train/finetune_datamap.py): the figure names its three regions and keeps
user text as typed, a picked point shows its text and label, the lowest-confidence examples are listed, in English
and 中文, and the live panel draws the map an epoch's progress carried."""

from __future__ import annotations

import numpy as np
from streamlit.testing.v1 import AppTest

from app.kit import i18n
from app.views.train.finetune_datamap import figure
from core.train.datamap import DataMap

TEXTS = tuple(f"gloss number {i}" for i in range(30)) + ("<b>not bold</b> & kept as typed",)
LABELS = ("<i>plant</i>", "animal")


def _map() -> DataMap:
    rng = np.random.default_rng(0)
    probs = rng.uniform(0, 1, size=(3, len(TEXTS)))
    probs[:, -1] = [0.02, 0.03, 0.01]  # the last example: never learned
    return DataMap.of(probs, probs > 0.5, np.arange(len(TEXTS)) % 2)


def test_the_figure_names_the_regions_and_escapes_user_text():
    dm = _map()
    for lang, names in (("en", ("easy-to-learn", "ambiguous", "hard-to-learn")), ("zh", ("易学", "模棱两可", "难学"))):
        with i18n.language(lang):
            fig = figure(dm, TEXTS, LABELS)
        assert {a.text for a in fig.layout.annotations} == set(names)
    points = fig.data[0]
    assert len(points.x) == len(TEXTS) and list(points.customdata) == list(range(len(TEXTS)))
    assert np.allclose(points.y, dm.confidence) and np.allclose(points.marker.color, dm.correctness)
    assert (
        "&lt;b&gt;not bold&lt;/b&gt; &amp; kept" in points.hovertext[-1]
        and "&lt;i&gt;plant&lt;/i&gt;" in points.hovertext[0]
    )
    assert len(fig.layout.shapes) == 2  # the ambiguous border, and the easy/hard one at a confidence of one half
    # after one epoch nothing varies: no ambiguous region, its border or its name
    first = figure(DataMap.of(dm.gold_probs[:1], dm.gold_probs[:1] > 0.5, dm.labels), TEXTS, LABELS)
    assert len(first.layout.shapes) == 1 and {a.text for a in first.layout.annotations} == {
        "easy-to-learn",
        "hard-to-learn",
    }
    assert figure(dm, None, LABELS).data[0].hovertext[0] == "#0 · &lt;i&gt;plant&lt;/i&gt;"


def _draw(pick):
    import streamlit as st

    from app.views.train import finetune_datamap as view
    from app.views.train.finetune import K
    from tests.app.test_finetune_datamap_view import LABELS, TEXTS, _map

    if pick is not None:
        st.session_state[K("datamap_pick.run1")] = pick
    view.draw("run1", _map(), TEXTS, LABELS)


def test_a_picked_point_shows_its_text_and_label_and_the_least_confident_are_listed():
    at = AppTest.from_function(_draw, args=(30,), default_timeout=30).run()
    assert not at.exception, at.exception
    # the label and the text as typed (st.text, never Markdown)
    assert [x.value for x in at.text] == ["Gold label: <i>plant</i>", TEXTS[30]]
    assert any("Example #30" in m.value and "hard-to-learn" in m.value for m in at.markdown)
    table = at.table[0].value
    assert len(table) == 10 and table.iloc[0, 1] == TEXTS[30]  # never learned: the least confident
    at.session_state[i18n.LANG_KEY] = "zh"
    at.run()
    assert any("样本 #30" in m.value for m in at.markdown) and "文本" in at.table[0].value.columns
    none = AppTest.from_function(_draw, args=(None,), default_timeout=30).run()
    assert not none.text and any("Click a point" in x.value for x in none.info)


def _live(metrics):
    from types import SimpleNamespace as NS

    from app.views.train import finetune_datamap as view
    from core.data.datasets_local import LabelledData, Split
    from tests.app.test_finetune_datamap_view import LABELS, TEXTS

    data = LabelledData(
        "d", Split(TEXTS, tuple(i % 2 for i in range(len(TEXTS)))), Split(TEXTS[:2], (0, 1)), LABELS, "", ""
    )
    view.live(NS(id=7, name="run1", metrics=metrics), "run1", data)


def test_the_live_panel_draws_the_latest_epochs_map_beside_the_curves():
    dm = _map()
    metrics = [
        {"step": 1, "loss": 1.0},
        {"step": 2, "loss": 0.9, "data_map": dm.to_metrics()},
        {"step": 3, "loss": 0.8},
    ]
    at = AppTest.from_function(_live, args=(metrics,), default_timeout=30).run()
    assert not at.exception, at.exception
    charts = at.get("plotly_chart")
    assert len(charts) == 2 and any("datamap.run1" in c.proto.id for c in charts)
    assert any("epoch 3 done" in c.value for c in at.caption)
    no_map = AppTest.from_function(_live, args=(metrics[:1],), default_timeout=30).run()
    assert len(no_map.get("plotly_chart")) == 1 and not no_map.table

"""Layer probes: the time estimate under Run (timed on the model, following the settings), a table whose depth
columns fit beside the task columns, and the exports side by side in one row (Layer probes and Attributions)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.represent.probes import ProbeConfig, ProbeResult, ProbeTiming, TaskScore, estimate
from tests.app.conftest import page_for


def _estimate(at) -> str:
    return next(c.value for c in at.caption if "probe fits" in c.value)


def test_the_estimate_appears_under_run_and_follows_the_sentences_per_task(use_tiny_zoo):
    at = page_for("probes")
    first = _estimate(at)
    assert "up to 1,500 sentences" in first and " or more: " in first  # 5 tasks x 300 by default
    assert "probes.estimate.timings" in at.session_state  # measured on this model, not a fixed number
    at.number_input(key="probes.per_task").set_value(40).run()
    second = _estimate(at)
    assert second != first and "up to 200 sentences" in second
    at.multiselect(key="probes.tasks").set_value(["length"]).run()
    assert "up to 40 sentences" in _estimate(at) and "3 probe fits" in _estimate(at)  # tiny models: 3 depths


def test_estimate_scales_with_sentences_and_fits():
    timing = ProbeTiming(per_sentence=0.05, per_fit=0.2)
    small, big = (estimate(ProbeConfig(per_task=n), 7, timing) for n in (100, 1000))
    assert small.sentences == 500 and big.sentences == 5000 and small.fits == big.fits == 7 * 6  # suffix: control
    assert big.seconds > 5 * small.seconds
    assert estimate(ProbeConfig(per_task=300), 7, timing).seconds == pytest.approx(1500 * 0.05 + 42 * 0.2)


def _result(depths: int = 7) -> ProbeResult:
    acc = tuple(0.5 + 0.05 * d for d in range(depths))
    return ProbeResult(
        "tiny",
        "bert",
        depths,
        {"per_task": 300},
        1000,
        "bundled",
        (
            TaskScore("length", "sentence", ("a", "b"), 240, 60, 1000, acc, 0.2),
            TaskScore("suffix", "word", ("-s", "other"), 240, 60, 3000, acc, 0.1, acc, tuple(0.0 for _ in acc)),
        ),
        1.0,
        "k",
        1.0,
    )


def test_depth_columns_fit_beside_the_task_columns():
    from app.views.represent import probes as rp

    r = _result(7)
    cols = rp.table_columns(r)
    widths = [c["width"] for c in cols.values()]
    assert sum(widths) <= rp.TABLE_WIDTH and len(cols) == 5 + 7
    row = rp.table_rows(r)[0]
    assert row["layer 6"] == "80%" and row["embeddings"] == "50%"  # whole percents: narrow columns


def _show_probes():
    from app.views.represent.probes import show_result
    from tests.app.test_probes_estimate_and_layout import _result  # AppTest runs this function's source alone

    show_result(_result(3))


def _show_attribution_downloads():
    import streamlit as st

    from app.views.inspect import attribution as ra
    from core.inspect.attribution import BatchResult, BatchRow

    ra.show_batch(BatchResult((BatchRow("a b"),), (None,), ("bad",)), "t")
    st.write("end")


def _download_parents(at) -> list:
    """The block each download button sits in."""
    out = []

    def walk(node, parent):
        for child in getattr(node, "children", {}).values():
            if getattr(child, "type", None) == "download_button":
                out.append(node)
            walk(child, node)

    walk(at._tree, None)
    return out


@pytest.mark.parametrize("script", [_show_probes, _show_attribution_downloads])
def test_download_buttons_sit_side_by_side_in_one_horizontal_row(script):
    at = AppTest.from_function(script, default_timeout=60).run()
    assert not at.exception, at.exception
    parents = _download_parents(at)
    assert len(parents) == 2 and parents[0] is parents[1]  # one row, not two half-page columns
    assert parents[0].proto.flex_container.direction == 2  # horizontal  # noqa: PLR2004

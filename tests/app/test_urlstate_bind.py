"""What Streamlit's own query-parameter binding (``bind="query-params"``, Streamlit 1.67) does with a shared link,
pinned: app/kit/urlstate.py keeps its own restore, notice and publish because of each of these (its docstring says
why). If a Streamlit upgrade changes one, this test fails and the choice should be looked at again."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

EXPERIMENT = """
import streamlit as st
st.number_input("w", 0.0, 0.5, step=0.05, key="w", bind="query-params")
st.number_input("n", 1, 50, value=5, key="n", bind="query-params")
st.selectbox("c", ["a", "b", "c"], key="c", bind="query-params")
st.text_input("t", max_chars=10, key="t", bind="query-params")
st.multiselect("m", ["x", "y"], key="m", bind="query-params")
st.text(repr(st.query_params.to_dict()))
if st.button("follow"):  # what app/room/banners.py does to follow a presenter
    st.switch_page("{name}", query_params={{"w": "0.45"}})
if st.button("publish"):  # what urlstate.publish does
    st.query_params.from_dict({{"other": "1"}})
    st.text(repr(st.query_params.to_dict()))
"""


def _app(tmp_path, params: dict[str, str]) -> AppTest:
    page = tmp_path / "exp.py"
    page.write_text(EXPERIMENT.format(name=page.name))
    at = AppTest.from_file(str(page), default_timeout=30)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    return at


def _state(at) -> dict:
    return {k: at.session_state[k] for k in ("w", "n", "c", "t", "m")}


def test_good_link_values_are_taken(tmp_path):
    at = _app(tmp_path, dict(w="0.25", n="7", c="b", t="short", m="y"))
    assert _state(at) == dict(w=0.25, n=7, c="b", t="short", m=["y"])


def test_bad_link_values_are_dropped_silently(tmp_path):
    """Out of range, unknown choice, unknown list item, not a number: the default, no notice, gone from the URL;
    a long text is cut to max_chars and a fraction for a whole number is truncated, also without a word."""
    at = _app(tmp_path, dict(w="0.9", n="abc", c="zzz", t="x" * 40, m="x,q"))
    assert _state(at) == dict(w=0.0, n=5, c="a", t="x" * 10, m=[])
    assert not at.warning and not at.error  # nothing names the bad parameters
    assert eval(at.text[0].value) == {"t": "x" * 10}
    assert _app(tmp_path, dict(n="2.5")).session_state["n"] == 2


def test_a_default_value_leaves_the_url(tmp_path):
    at = _app(tmp_path, dict(n="5", w="0.2"))
    assert eval(at.text[0].value) == {"w": "0.2"}  # n=5 is the widget's default: not in the link any more


def test_a_later_url_change_is_not_taken(tmp_path):
    """Only the first run seeds a bound widget: a session already on the page keeps its value."""
    at = _app(tmp_path, {})
    at.query_params["w"] = "0.35"
    at.run()
    assert at.session_state["w"] == 0.0


def test_bound_params_cannot_be_written_through_query_params(tmp_path):
    at = _app(tmp_path, dict(w="0.2"))
    next(b for b in at.button if b.label == "follow").click().run()
    assert at.exception and "bound to a widget" in at.exception[0].value
    at = _app(tmp_path, dict(w="0.2"))
    next(b for b in at.button if b.label == "publish").click().run()
    assert not at.exception
    assert eval(at.text[-1].value) == {"other": "1"}  # from_dict dropped the bound w=0.2


@pytest.mark.parametrize("raw", ["0.6", "nan", "-0.01", "x"])
def test_urlstate_refuses_what_the_config_refuses(raw):
    from app.kit.urlstate import Field
    from core.base.fields import bounds
    from core.train.finetune_config import FinetuneConfig

    f = Field.of("finetune.warmup", bounds(FinetuneConfig, "warmup_ratio"))
    assert f.parse("0.5") == 0.5 and f.parse("0") == 0.0
    with pytest.raises(ValueError):
        f.parse(raw)

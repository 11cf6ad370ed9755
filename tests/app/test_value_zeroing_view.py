"""Value zeroing on the Attention page's mixing tab (app/views/inspect/value_zeroing.py), in AppTest: off until asked,
then the picked layer's map (tokens or words) and the per-layer agreement with gradient x input; a link opens the
same view; the CSV holds the map on screen; the generic family gets the registry's message; 中文 throughout."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from core.inspect.attention import AttentionConfig
from core.inspect.value_zeroing import value_zeroing
from core.models.loading import ModelSpec, load
from tests.app.conftest import default_tab, open_page
from tests.conftest import GENERIC_KEY

TEXT = "unbelievably the cat sat"


def _charts(at) -> dict[str, dict]:
    out = {}
    for el in at.get("plotly_chart"):
        spec = json.loads(el.proto.spec)
        out[spec["layout"].get("title", {}).get("text", "").replace("<br>", " ")] = spec  # titles wrap at spaces
    return out


def _array(v) -> np.ndarray:
    """A plotly data array from a chart's spec: a list, or a typed array (dtype, base64 bytes, shape)."""
    if isinstance(v, dict):
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
        return a.reshape([int(x) for x in str(v["shape"]).split(",")]) if "shape" in v else a
    return np.array(v, dtype=float)


def _vz_map(at) -> dict:
    return next(s for title, s in _charts(at).items() if title.startswith("value zeroing: layer"))


def test_off_until_asked_then_the_picked_layers_map(use_tiny_zoo, tiny_models):
    at = open_page("attention", {"attention.text": TEXT, "attention.mix.layer": "0"})
    assert not at.exception and not at.error
    assert not any(t.startswith("value zeroing") for t in _charts(at))  # nothing computed before the toggle
    at.toggle(key="attention.vz").set_value(True).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    spec = _vz_map(at)
    assert "value zeroing: layer 0" in spec["layout"]["title"]["text"]
    # the map on screen is core's for this text and layer
    lm = load(ModelSpec("bert", "encoderlab/bert-mini", "cpu"), "base", attentions=True)
    want = value_zeroing(lm, AttentionConfig(TEXT), gradient=False).mixing[0]
    np.testing.assert_allclose(_array(spec["data"][0]["z"]), np.round(want, 4), atol=1e-4)
    rho = _array(_charts(at)["agreement with gradient × input, per layer"]["data"][0]["y"])
    assert rho.shape == (2,) and np.all(np.abs(rho[np.isfinite(rho)]) <= 1) and np.isfinite(rho).any()
    assert at.query_params["attention.vz"] == "1"
    csv = next(b for b in at.get("download_button") if b.key == "attention.vz.csv")
    assert csv.proto.label == "Download this map (CSV)"


def test_words_merge_the_pieces_and_a_link_keeps_the_view(use_tiny_zoo):
    at = open_page("attention", {"attention.text": TEXT, "attention.vz": "1", "attention.vz.level": "words"})
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.toggle(key="attention.vz").value is True
    spec = _vz_map(at)
    ticks = spec["layout"]["xaxis"]["ticktext"]
    assert "unbelievably" in ticks and not any(t.startswith("##") for t in ticks)
    z = _array(spec["data"][0]["z"])
    np.testing.assert_allclose(z.sum(-1), 1.0, atol=2e-3)  # rows still sum to 1 (rounded to 4 places)
    assert at.query_params["attention.vz.level"] == "words"


def test_the_generic_family_is_told_why(use_tiny_zoo, tiny_models):
    at = open_page(
        "attention",
        {"family": GENERIC_KEY, "model": "custom", "custom": str(tiny_models[GENERIC_KEY]), "attention.vz": "1"},
    )
    assert not at.exception
    assert any("value projection" in e.value for e in at.error), [e.value for e in at.error]


@pytest.mark.usefixtures("use_tiny_zoo")
def test_in_chinese():
    at = open_page("attention", {"attention.text": TEXT, "attention.vz": "1", "lang": "zh"})
    assert not at.exception and not at.error
    titles = list(_charts(at))
    assert any(t.startswith("值归零：第") for t in titles) and "与梯度×输入的一致程度（逐层）" in titles
    assert any(s.value == "值归零（value zeroing）" for s in at.subheader)


def test_the_walkthroughs_look_inside_step_opens_it(use_tiny_zoo, tmp_path, monkeypatch):
    """Step 7 links to value zeroing: the link's query opens the Attention page on its context-mixing tab with the
    measurement on, in a fresh session as a browser would."""
    from urllib.parse import parse_qsl

    from app.views.start.walkthrough.frame import BY_NUMBER

    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    (url, _, query), *_ = BY_NUMBER[7].deep_links
    at = open_page("walkthrough", {"walkthrough.step": "7"})
    assert not at.exception
    link = next(p for p in at.get("page_link") if p.proto.label == "Open value zeroing on the Attention page")
    assert dict(parse_qsl(link.proto.query_string)) == query and url == "attention"
    opened = open_page("attention", {**query, "attention.text": TEXT})
    assert not opened.exception and not opened.error
    assert opened.toggle(key="attention.vz").value is True and _vz_map(opened)
    assert opened.query_params["attention.tab"] == "mixing"
    assert default_tab(opened) == 4  # Context mixing, not bertviz


def test_a_text_over_value_zeroings_limit_gets_a_message_and_the_rest_of_the_tab(use_tiny_zoo, monkeypatch):
    from core.inspect import value_zeroing as vz

    monkeypatch.setattr(vz, "MAX_TOKENS", 10)  # the tiny models read 128 tokens, as many as the real limit
    at = open_page(
        "attention", {"attention.text": "one two three four five six seven eight nine ten eleven", "attention.vz": "1"}
    )
    assert not at.exception
    assert any("at most 10" in e.value for e in at.error), [e.value for e in at.error]
    assert "rollout (all layers)" in _charts(at)  # raw attention and rollout are still drawn

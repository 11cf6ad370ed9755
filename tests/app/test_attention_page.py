"""The Attention page (AppTest) and the offline bertviz embed (app/views/inspect/bertviz_embed.py)."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter

import numpy as np
import pytest

from app.views.inspect.bertviz_embed import VENDOR, VENDOR_SHA256, build_view, encode_weights, fit_payload, vendor_js
from tests.app.conftest import new_app, open_page, page_path, submit_attention

UNSAFE = '</script><script>alert(1)</script> "quoted" back\\slash é 中文 ☃'


def _open(family: str = "bert", tiny_models=None):
    """The Attention page with the family's bundled model picked (the tiny zoo's), or for a family EncoderLab ships
    no model of, its tiny folder typed under custom."""
    from core.registry import family as entry

    if not entry(family).bundled:
        at = open_page(None, params={"family": family, "model": "custom", "custom": str(tiny_models[family])})
    else:
        at = new_app()
        if family != "bert":
            at.sidebar.selectbox(key="sidebar.family").set_value(family).run()
    at.switch_page(page_path("attention"))
    at.run()
    assert not at.exception, at.exception
    return at


def _figure(at, title: str) -> dict:
    """The spec of the first chart whose title contains ``title``."""
    for el in at.get("plotly_chart"):
        spec = json.loads(el.proto.spec)
        if title in spec["layout"].get("title", {}).get("text", ""):
            return spec
    raise AssertionError(f"no figure titled {title!r} among {_titles(at)}")


def _titles(at) -> list[str]:
    return [json.loads(el.proto.spec)["layout"].get("title", {}).get("text", "") for el in at.get("plotly_chart")]


# ---------------------------------------------------------------------------------------------- page
def test_page_renders_every_section(use_tiny_zoo, tiny_models, family):
    at = _open(family, tiny_models)
    assert not at.error, [e.value for e in at.error]
    assert len(at.tabs) == 10
    captions = " ".join(c.value for c in at.caption)
    assert "2 layers × 4 heads" in captions and "offline" in captions
    titles = _titles(at)
    assert "layer 0, head 0" in titles and "rollout (all layers)" in titles
    assert any("relevance to [CLS]" in t for t in titles) and "entropy (bits)" in titles


def test_pair_and_focus_a_head(use_tiny_zoo):
    at = submit_attention(_open(), "The cat sat.", pair=True, text_b="It slept.")
    assert not at.error
    at.selectbox(key="attention.layer").set_value(1).run()
    at.selectbox(key="attention.head").set_value(3).run()
    assert not at.exception
    assert "layer 1, head 3" in _titles(at)
    grid = [
        json.loads(el.proto.spec)
        for el in at.get("plotly_chart")
        if json.loads(el.proto.spec)["layout"].get("clickmode") == "event+select"
    ]
    assert grid and grid[0]["data"][1]["customdata"][-1] == [1, 3]  # one selectable marker per head


@pytest.mark.parametrize(
    "text, pair, text_b, words",
    [
        ("", False, "", "text is empty"),
        ("   ", False, "", "text is empty"),
        ("A sentence.", True, "  ", "Sentence B is empty"),
        ("", True, "B side.", "Sentence A is empty"),
        (" ".join(["word"] * 300), False, "", "reads at most 128"),
    ],
)
def test_bad_input_gets_a_message(use_tiny_zoo, text, pair, text_b, words):
    at = submit_attention(_open(), text, pair, text_b)
    assert any(words in e.value for e in at.error), [e.value for e in at.error]


def test_model_without_attention_is_explained(use_tiny_zoo, monkeypatch):
    """A model loaded with the sdpa kernel (as every other page loads it) returns no weights: the page says so."""
    import streamlit as st

    import app.kit.loaders as loaders
    from core.models.loading import load

    monkeypatch.setattr(loaders, "load", lambda spec, task, attentions: load(spec, task, attentions=False))
    st.cache_resource.clear()
    try:
        at = _open("distilbert")
        assert any("returned no attention weights" in e.value and "eager" in e.value for e in at.error)
    finally:
        st.cache_resource.clear()


def test_head_pattern_finder_flow_and_compare(use_tiny_zoo):
    at = submit_attention(_open("albert"), "Short text, here.")
    at.slider(key="attention.threshold").set_value(0.0).run()
    assert at.dataframe, "every head scores >= 0"
    at.toggle(key="attention.flow").set_value(True).run()
    assert not at.exception and "attention flow" in _titles(at)
    assert "flow" in json.dumps([d.get("name") for d in _figure(at, "relevance to [CLS]")["data"]])
    at.button(key="attention.cmp.run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    labels = [m.label for m in at.metric]
    assert any("ALBERT" in x for x in labels) and any("BERT ·" in x for x in labels)
    assert any(t.startswith("BERT") for t in _titles(at))


def test_a_rerun_that_changes_nothing_derives_nothing(use_tiny_zoo, monkeypatch):
    """#46 §2: the rollout (and relevance), the Q·K view and the word map go through app.kit.cache, keyed by the
    model's spec and the input: a second run of the same view calls none of the core functions again, and a changed
    choice (the mixing layer) calls only what it changes."""
    from app.kit import cache
    from core.inspect import attention as A
    from core.inspect import attention_views as AV

    calls: Counter[str] = Counter()

    def spy(module, name: str) -> None:
        real = getattr(module, name)

        def counted(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    for module, name in ((A, "rollout"), (A, "qk_view"), (AV, "word_attention")):
        spy(module, name)
    for wrapper in (cache.attention_mixing, cache.attention_qk, cache.attention_layer_map):
        wrapper.clear()  # the cache is process-wide: another test may have filled it with this very input
    at = _open()
    first = dict(calls)
    assert first == {"rollout": 1, "qk_view": 1, "word_attention": 1}, first
    at.run()
    assert not at.exception, at.exception
    assert dict(calls) == first
    at.selectbox(key="attention.mix.layer").set_value(0).run()
    assert not at.exception, at.exception
    assert dict(calls) == {**first, "rollout": 2}


def test_unsafe_text_runs(use_tiny_zoo):
    at = submit_attention(_open("roberta"), UNSAFE)
    assert not at.error and not at.exception


def test_token_range_and_filters(use_tiny_zoo):
    at = submit_attention(_open(), "one two three four five six seven eight nine ten")
    at.slider(key="attention.range").set_value((2, 6)).run()
    at.multiselect(key="attention.layers").set_value([1]).run()
    at.multiselect(key="attention.heads").set_value([0, 2]).run()
    assert not at.exception and not at.error
    hm = _figure(at, "layer 1, head 0")
    assert hm["data"][0]["x"] == [2, 3, 4, 5] and "layer 1, head 0" in _titles(at)
    at.multiselect(key="attention.heads").set_value([]).run()
    assert any("at least one layer and one head" in w.value for w in at.warning)


# ---------------------------------------------------------------------------------------------- workshop
def _link(params: dict, state: dict | None = None):
    """A fresh session opening the Attention page from a link (its first run is that page, as in a browser)."""
    return open_page("attention", params, state)


def _summary(at) -> str:
    return next(c.value for c in at.caption if "layers ×" in c.value or "层 ×" in c.value)


def test_link_opens_the_same_view(use_tiny_zoo):
    text = "one two three four five six seven"
    by_hand = submit_attention(_open(), text)
    at = _link(
        {
            "attention.text": text,
            "attention.range": "1,5",
            "attention.layers": "1",
            "attention.heads": "0,2",
            "attention.layer": "1",
            "attention.head": "2",
            "attention.view": "model",
            "attention.stat": "distance",
            "attention.threshold": "0.25",
        }
    )
    assert not at.error and not at.warning, [w.value for w in at.warning]
    assert at.text_area(key="attention.text").value == text
    assert _summary(at) == _summary(by_hand)  # the attention of that text, not of the default one
    assert at.slider(key="attention.range").value == (1, 5)
    assert at.multiselect(key="attention.layers").value == [1] and at.multiselect(key="attention.heads").value == [0, 2]
    assert at.selectbox(key="attention.head").value == 2
    assert at.get("segmented_control")[0].value == "model"
    assert at.slider(key="attention.threshold").value == 0.25
    hm = _figure(at, "layer 1, head 2")
    assert hm["data"][0]["x"] == [1, 2, 3, 4]
    assert "mean attention distance (tokens)" in _titles(at)
    assert at.query_params["attention.range"] == "1,5" and at.query_params["attention.head"] == "2"


def test_link_with_a_pair(use_tiny_zoo):
    at = _link({"attention.text": "The cat sat.", "attention.pair": "1", "attention.text_b": "It slept."})
    assert not at.error
    by_hand = submit_attention(_open(), "The cat sat.", pair=True, text_b="It slept.")
    assert _summary(at) == _summary(by_hand)
    assert at.checkbox(key="attention.pair").value is True


def test_bad_link_values_fall_back(use_tiny_zoo):
    at = _link(
        {
            "attention.text": "a short text",
            "attention.layers": "0,7",
            "attention.range": "4,2",
            "attention.view": "neuron",
            "attention.threshold": "3",
        }
    )
    notice = " ".join(w.value for w in at.warning)
    for name in ("attention.layers", "attention.range", "attention.view", "attention.threshold"):
        assert name in notice, notice
    assert at.multiselect(key="attention.layers").value == [0, 1]
    assert at.slider(key="attention.range").value[0] == 0
    assert at.get("segmented_control")[0].value == "head"
    assert at.text_area(key="attention.text").value == "a short text"


def test_page_in_chinese(use_tiny_zoo):
    at = _link({"lang": "zh"})
    assert at.title[0].value == "注意力（Attention）"
    assert [tab.label for tab in at.tabs][1] == "热力图"
    assert "第 0 层，第 0 个头" in _titles(at) and "熵（比特）" in _titles(at)
    assert "2 层 × 4 个头" in _summary(at)
    assert not at.error


def test_presenter_view_folds_the_settings(use_tiny_zoo):
    at = _link({"present": "1"})
    assert not at.error
    labels = [e.label for e in at.expander]
    assert "Settings" in labels and "Token range, layers and heads" not in labels
    assert at.multiselect(key="attention.layers").value == [0, 1]  # still there, folded away


def test_result_lands_in_the_report(use_tiny_zoo):
    at = submit_attention(_open(), "The report keeps this.")
    at.selectbox(key="attention.layer").set_value(1).run()
    entries = list(at.session_state["report.entries"].values())
    mine = [e for e in entries if e.entry_id.startswith("attention:")]
    assert len(mine) == 2  # the default text and this one; redrawing replaced rather than added
    e = mine[-1]
    assert e.page == "Attention" and "The report keeps this." in e.inputs.values()
    assert "layer 1, head 0" in e.inputs.values() and len(e.figures) == 2
    assert json.loads(e.figures[0])["layout"]["title"]["text"] == "layer 1, head 0"


# ---------------------------------------------------------------------------------------------- embed
def _att(layers=2, heads=3, n=6, seed=0):
    a = np.random.default_rng(seed).random((layers, heads, n, n))
    return a / a.sum(-1, keepdims=True)


def _params(html: str) -> dict:
    line = re.search(r"const params = (.*);\n", html).group(1).replace("window.ENCODERLAB_MODE", '"runtime"')
    return json.loads(re.sub(r"(?<=[\[,])\.", "0.", line))


def test_vendored_files_are_the_recorded_ones():
    for name, digest in VENDOR_SHA256.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest
    assert (VENDOR / "README.md").exists()


@pytest.mark.parametrize("kind", ["head", "model"])
def test_view_is_offline_safe_and_exact(kind):
    att = _att()
    labels = ["[CLS]", UNSAFE, "&amp;", "<b>x</b>", "\u2028", "[SEP]"]
    v = build_view(kind, att, labels, layers=[1], heads=[0, 2], dark=kind == "model")
    assert "cdnjs" not in v.html and "require.config({" not in v.html
    assert not re.search(r"<script[^>]+src=", v.html)
    assert "alert(1)</script>" not in v.html and "<b>x</b>" not in v.html and "\u2028" not in v.html
    p = _params(v.html)
    assert p["attention"][0]["left_text"] == labels  # decoded by the browser exactly as typed
    assert p["include_layers"] == [1]
    np.testing.assert_allclose(p["attention"][0]["attn"], np.round(att[[1]][:, [0, 2]], 3), atol=1e-9)
    if kind == "model":
        assert p["include_heads"] == [0, 2] and p["display_mode"] == "runtime"  # set by the theme script
    assert ("var dark=true" in v.html) == (kind == "model")  # the theme baked in for the standalone file


def test_pair_view_holds_the_four_slices():
    v = build_view("head", _att(n=6), [f"t{i}" for i in range(6)], sentence_b_start=3)
    names = [d["name"] for d in _params(v.html)["attention"]]
    assert names == [
        "All",
        "Sentence A -> Sentence A",
        "Sentence B -> Sentence B",
        "Sentence A -> Sentence B",
        "Sentence B -> Sentence A",
    ]


def test_payload_is_a_third_of_plain_bertviz_or_less():
    import torch
    from bertviz import head_view

    att = _att(layers=4, heads=12, n=64)  # vendored JS (~0.4 MB) is a fixed cost; this is a small real payload
    labels = [f"tok{i}" for i in range(64)]
    ours = build_view("head", att, labels).size_bytes
    plain = len(
        head_view([torch.tensor(a[None], dtype=torch.float32) for a in att], labels, html_action="return").data.encode()
    )
    assert ours <= plain / 3, (ours, plain)


def test_encoding_and_budget():
    assert (
        encode_weights(np.array([[0.0, 0.0004, 0.0006, 0.5], [1.0, 0.123, 0.1, 0.999]]))
        == "[[0,0,.001,.5],[1,.123,.1,.999]]"
    )
    all12 = list(range(12))
    assert fit_payload(all12, all12, 512, pair=False) == ([0], all12)
    assert fit_payload(all12, all12, 128, pair=False) == (all12, all12)
    assert fit_payload(all12, all12, 128, pair=True) == (all12[:8], all12)
    assert fit_payload(all12[3:], all12, 512, pair=True) == ([3], all12[:6])
    with pytest.raises(ValueError, match="Unknown view"):
        build_view("neuron", _att(), ["a"] * 6)


def test_512_tokens_on_a_pretrained_model_stay_bounded():
    """The real MiniLM at its full 512 tokens: the view ships what fits the budget, and says which layers."""
    from app.views.inspect.bertviz_embed import PAYLOAD_BUDGET
    from core.inspect.attention import AttentionConfig, compute_attention
    from core.models.loading import ModelSpec, load
    from core.models.tokenizer_build import minilm_folder

    lm = load(ModelSpec("bert", str(minilm_folder()), "cpu"), task="base", attentions=True)
    r = compute_attention(lm, AttentionConfig(" ".join(["word"] * 510)))
    assert r.n_tokens == 512 == r.max_tokens
    layers, heads = fit_payload(list(range(r.n_layers)), list(range(r.n_heads)), 512, pair=False)
    assert (layers, heads) == ([0], list(range(12))) and 12 * 512 * 512 <= PAYLOAD_BUDGET
    v = build_view("model", r.attentions, list(r.labels), layers=layers, heads=heads[:2])  # 2 heads: keep it quick
    per_weight = (v.size_bytes - len(vendor_js())) / (2 * 512 * 512)
    assert v.layers == (0,) and per_weight < 5.5, per_weight  # ".003," at most; peaked heads write many "0,"


def test_no_link_notice_after_an_error_and_a_shorter_text(use_tiny_zoo):
    """Issue 14: an error (st.stop before the view fields were bound), then a shorter text, gave "This link had
    values that are not valid" although no link was opened: the session's own URL values are not a link."""
    at = _open()
    long = "The cat sat on the mat because it was warm, and then it fell asleep by the fire in the evening."
    submit_attention(at, long)
    at.slider(key="attention.range").set_value((3, 20)).run()
    submit_attention(at, "")
    assert any("The text is empty" in e.value for e in at.error)
    submit_attention(at, "Hi there.")
    assert not at.error and not any("link" in w.value for w in at.warning), [w.value for w in at.warning]

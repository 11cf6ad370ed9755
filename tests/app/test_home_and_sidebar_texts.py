"""Home's and the sidebar's texts: Home's start-here path, a text for every page and the Models page's count of
checkpoints; the Models page's progress text and aligned figures; the weights' source named in en and zh (int8
included); the sidebar's labels in Chinese and short enough for it; Chinese checkpoints offered only when the Hub
answers."""

from __future__ import annotations

import json
import re

import pytest

from app.kit.i18n import catalog
from core.base.segment import is_wide
from core.models import downloads
from core.registry import bundled_families, bundled_id, official_checkpoints
from tests.app.conftest import open_page, page_for
from tests.hub_server import go_online


def _links(at) -> list[str]:
    return [p.proto.label for p in at.get("page_link")]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_home_describes_every_page(use_tiny_zoo, lang):
    from app.nav import available_pages

    at = open_page(None, state={"ui.lang": lang})
    pages = [p for p in available_pages() if p.url != "home"]
    start, links = _links(at)[: -len(pages)], _links(at)[-len(pages) :]  # Start here's short links, then the list
    assert len(start) == 3 and all("—" not in s for s in start)
    for p, label in zip(pages, links):
        assert catalog().get(f"home.help.{p.url.replace('-', '_')}", {}).get(lang), p.url  # a text of its own
        assert not re.search(r"—\s*$", label), label  # never "**Layer lens** —" with nothing after the dash
        head, _, text = label.partition("—")
        assert text.strip("— ").strip(), label


def test_home_counts_the_checkpoints_the_models_page_lists(use_tiny_zoo):
    at = open_page(None)
    (models,) = [label for label in _links(at) if label.startswith("**Models**")]
    shown = int(re.search(r"the (\d+) official checkpoints", models).group(1))
    page = open_page("models")
    assert len(page.dataframe[0].value) == shown == len(official_checkpoints())
    zh = open_page(None, state={"ui.lang": "zh"})
    assert any(f"计算 {shown} 个官方检查点" in label for label in _links(zh))


def _column_config(df) -> dict:
    return json.loads(df.proto.columns) if df.proto.columns else {}


def test_models_page_counts_with_a_progress_bar_and_aligns_its_figures(use_tiny_zoo, monkeypatch):
    import streamlit as st

    texts: list[str] = []
    real = st.progress

    def progress(value, text=None):  # what the page says while it counts (the bar is gone once it is done)
        texts.append(text or "")
        return real(value, text=text)

    monkeypatch.setattr(st, "progress", progress)
    at = open_page("models")
    assert (
        texts
        and texts[0] == f"Counting the parameters of {len(official_checkpoints())} checkpoints from their configs…"
    )
    assert not at.get("progress")  # cleared once the tables are drawn
    claims = _column_config(at.dataframe[0])
    assert claims["articles' claim (M)"]["alignment"] == "right" and claims["difference (M)"]["alignment"] == "right"
    assert claims["claim"]["width"] == "large"
    arch = _column_config(at.dataframe[1])
    assert arch["layers shared"]["width"] in ("medium", "large")  # "yes (one layer, reused)" is not cut
    assert arch["from the config"]["width"] == "large"


def test_every_weights_source_has_a_name_in_both_languages():
    assert {"bundled", "local folder", "HF cache", "Hub download", "unavailable"} == set(
        downloads.Source
    )  # all resolve returns
    for source in downloads.Source:
        entry = catalog().get(f"common.source.{source.lower().replace(' ', '_')}")
        assert entry and entry["en"] == source and entry["zh"], source  # English keeps today's words


def test_chinese_sidebar_names_the_source_in_chinese(use_tiny_zoo):
    at = open_page(None, state={"ui.lang": "zh"})
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "权重来源：**内置**" in captions and "bundled" not in captions
    en = open_page(None)
    assert any("Weights from: **bundled**" in c.value for c in en.sidebar.caption)


def test_chinese_model_line_names_the_source_in_chinese(use_tiny_zoo):
    at = page_for("fill_mask")
    at.session_state["ui.lang"] = "zh"
    at.run()
    (line,) = [c.value for c in at.caption if "权重来自" in c.value]
    assert "权重来自 **内置**" in line


def test_chinese_mini_note_names_the_sidebar_box_as_the_sidebar_does(monkeypatch):
    import app.kit.i18n
    import app.kit.render as render

    shown: list[str] = []
    monkeypatch.setattr(render.st, "caption", lambda text, *a, **k: shown.append(text))
    monkeypatch.setattr(render, "bundled_card", lambda c: {"params": 1e6, "family": "bert", "heldout": {}})
    for lang, box, custom in (("zh", "检查点", "自定义"), ("en", "Checkpoint", "custom")):
        monkeypatch.setattr(app.kit.i18n, "lang", lambda lang=lang: lang)
        assert catalog()["sidebar.checkpoint"][lang] == box
        for full in ("bert-base-uncased", None):  # one can be had here / none can
            monkeypatch.setattr(render, "_full_checkpoint", lambda family, full=full: full)
            shown.clear()
            render.mini_note("encoderlab/bert-mini")
            (line,) = shown
            assert f"*{box}*" in line, line
            if lang == "zh":
                assert "Checkpoint" not in line and "custom" not in line
            if full is None:
                assert f"*{custom}*" in line


SIDEBAR_SELECT_UNITS = 26  # width units (a CJK character two) a sidebar select shows whole at the default font


@pytest.mark.parametrize("lang, label", [("en", "bert-mini (bundled)"), ("zh", "bert-mini（内置）")])
def test_checkpoint_labels_fit_the_sidebar(use_tiny_zoo, lang, label):
    at = open_page(None, state={"ui.lang": lang})
    box = at.sidebar.selectbox(key="sidebar.checkpoint")
    assert box.options[0] == label  # the name and "bundled", nothing the box would cut
    assert box.proto.help  # what "bundled" means, one hover away
    # every bundled model's label, the longest (xlmr-e5-small) too: the third walk saw "…（内置" and "…(bund"
    for fam in bundled_families():
        name = bundled_id(fam.key).split("/", 1)[1]
        shown = catalog()["sidebar.bundled_label"][lang].format(id=name)
        assert sum(2 if is_wide(c) else 1 for c in shown) <= SIDEBAR_SELECT_UNITS, shown


def test_home_starts_with_a_path_for_a_first_session_and_a_workshop(use_tiny_zoo):
    at = open_page(None)
    heads = [s.value for s in at.subheader]
    assert heads.index("Start here") < heads.index("The families")  # above the dense table
    links = [p.proto.label for p in at.get("page_link")]
    assert links[:3] == ["Walkthrough", "Fill-mask", "Walkthrough"]  # each path's pages, before the page list
    steps = " ".join(m.value for m in at.markdown)
    assert "1. The **Walkthrough**" in steps and "2. Then **Fill-mask**" in steps
    # the workshop: the walkthrough, then the sidebar's own controls by their labels
    assert "1. Open the **Walkthrough** on the projector" in steps
    assert "**Presenter view**" in steps and "**Start a room**" in steps and "**Join a room**" in steps


def test_home_start_here_in_chinese(use_tiny_zoo):
    at = open_page(None, state={"ui.lang": "zh"})
    assert at.subheader[0].value == "从这里开始"
    steps = " ".join(m.value for m in at.markdown)
    assert "**演示模式**" in steps and "**开启课堂房间**" in steps and "Presenter" not in steps


def test_int8_is_named_in_the_source_line(use_tiny_zoo):
    at = page_for("attention")
    banner = [c.value for c in at.caption if "weights from" in c.value]
    assert banner and banner[0].endswith("on `cpu`"), banner
    at.sidebar.radio(key="sidebar.device").set_value("cpu")
    at.sidebar.checkbox(key="sidebar.quant").check().run()
    assert not at.exception
    banner = [c.value for c in at.caption if "weights from" in c.value]
    assert banner and banner[0].endswith("on `cpu, int8`"), banner


@pytest.fixture()
def no_network(monkeypatch, tmp_path):
    """Downloads allowed (HF_HUB_OFFLINE unset), an empty HF cache, and a Hub that does not answer."""
    go_online(monkeypatch, tmp_path / "hf-cache")
    monkeypatch.setattr(downloads, "reachable", lambda *a, **k: False)
    downloads.forget_reachability()
    yield
    downloads.forget_reachability()


def _zh_buttons(at) -> list[str]:
    return [b.label for b in at.sidebar.button if b.key.startswith("sidebar.zh.")]


def test_chinese_checkpoints_are_not_offered_without_network(use_tiny_zoo, no_network):
    at = open_page(None, state={"ui.lang": "zh"})
    # bert-base-chinese cannot be downloaded from here: not suggested; the bundled Chinese-capable model is (offline)
    assert _zh_buttons(at) == ["encoderlab/xlmr-e5-small"]
    assert any("中文检查点" in c.value and "bert-base-chinese" in c.value for c in at.sidebar.caption)
    at.sidebar.selectbox(key="sidebar.checkpoint").set_value("bert-base-chinese").run()  # picked anyway
    assert not at.exception
    assert not any("Hub 下载" in c.value for c in at.sidebar.caption)  # not "weights from: Hub download"
    assert any("连不上 Hub" in w.value for w in at.sidebar.warning)  # why it cannot be had, in 中文
    assert any("bert-base-chinese" in e.label or "官方检查点" in e.label for e in at.sidebar.expander)


def test_chinese_checkpoints_are_offered_when_the_hub_answers(use_tiny_zoo, no_network, monkeypatch):
    monkeypatch.setattr(downloads, "reachable", lambda *a, **k: True)
    downloads.forget_reachability()
    at = open_page(None, state={"ui.lang": "zh"})
    assert "bert-base-chinese" in _zh_buttons(at)

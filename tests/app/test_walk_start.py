"""Walk findings (tag "start"): Home's start-here path, the bundled mini's note once in full per session, Chinese
checkpoints suggested only when they can be had, and int8 named in the source line."""
from __future__ import annotations

import json
import shutil

import pytest

from core.base.paths import ASSETS
from core.models import downloads
from tests.app.conftest import click, open_page, page_for, page_path
from tests.conftest import BUNDLED_NAMES
from tests.hub_server import go_online


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


@pytest.fixture()
def carded_zoo(tiny_models, tmp_path, monkeypatch):
    """The tiny models under the bundled names, each with the real mini's card (as in test_mini_note.py)."""
    zoo = tmp_path / "zoo"
    for fam, name in BUNDLED_NAMES.items():
        shutil.copytree(tiny_models[fam], zoo / name)
        if (card := ASSETS / "models" / name / "encoderlab_card.json").exists():  # xlmr-e5-small: once trained
            shutil.copy(card, zoo / name)
    monkeypatch.setenv("ENCODERLAB_ZOO", str(zoo))
    return zoo


def _full(at) -> list[str]:
    return [c.value for c in at.caption if "is a bundled mini:" in c.value]


def _boxes(at) -> list:
    return [e for e in at.main.expander if "is a bundled mini (" in e.label]


def test_mini_note_in_full_once_then_one_line(carded_zoo):
    at = page_for("fill_mask")
    click(at, "Predict")
    assert len(_full(at)) == 1 and not _boxes(at)  # first: in full
    click(at, "Predict")
    assert len(_full(at)) == 1 and not _boxes(at)  # and it stays so on this page's reruns
    at.switch_page(page_path("attention")).run()
    assert not at.exception
    (box,) = _boxes(at)  # elsewhere: one line that opens
    card = json.loads((carded_zoo / "bert-mini" / "encoderlab_card.json").read_text())
    assert "encoderlab/bert-mini" in box.label and f"{card['params'] / 1e6:.1f}M" in box.label
    (inside,) = [c.value for c in box.caption]
    assert "is a bundled mini:" in inside and "full model" in inside  # the full note, one click away


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

"""#30 item 5 and the head view of item 4: CJK fonts wherever a person looks, and a horizontal head view for long
Chinese sentences (bertviz issue #18)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest

from app.kit import presenter, report
from app.kit.fonts import CJK_FAMILIES, FONT_STACK
from app.views.inspect.bertviz_embed import LONG_CJK_TOKENS, THEME_CSS, build_view, default_layout
from tests.app.conftest import open_page

ROOT = Path(__file__).resolve().parents[2]
FORTY = "今天早上我在学校门口遇见了一位多年不见的老朋友我们一起去附近的小店喝了一杯热茶。"  # 40 characters


def _attention(n: int, layers: int = 2, heads: int = 3) -> np.ndarray:
    return np.random.default_rng(0).dirichlet(np.ones(n), size=(layers, heads, n)).astype(np.float32)


# ------------------------------------------------------------------------------------------------ fonts
@pytest.mark.skipif(shutil.which("fc-match") is None, reason="no fontconfig here")
def test_fontconfig_resolves_a_cjk_family_for_chinese():
    """`make test` installs fonts-noto-cjk (scripts/install_chromium.sh): Chinese resolves to a CJK face, the one
    the figures name first."""
    family = subprocess.run(
        ["fc-match", ":lang=zh-cn", "family"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert "CJK" in family or family in CJK_FAMILIES, family
    listed = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True).stdout
    assert CJK_FAMILIES[0] in listed, listed


def _stubbed_install(tmp_path: Path, zh_fonts: str) -> str:
    """scripts/install_chromium.sh run with fc-list, apt-get and sudo replaced by stubs that log their calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    stubs = {"fc-list": f"printf '%s' '{zh_fonts}'", "apt-get": f'echo "apt-get $*" >> {log}', "sudo": '"$@"'}
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install_chromium.sh")], env=env, capture_output=True, text=True, check=True
    )
    assert not out.stdout.strip() or log.exists(), out.stdout
    return log.read_text() if log.exists() else ""


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="the script's Chromium branch would run")
def test_make_test_installs_the_cjk_font_when_none_is_there(tmp_path):
    calls = _stubbed_install(tmp_path, "")
    assert "install" in calls and "fonts-noto-cjk" in calls and "chromium" not in calls, calls


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="the script's Chromium branch would run")
def test_make_test_installs_nothing_when_chromium_and_the_font_are_there(tmp_path):
    assert _stubbed_install(tmp_path, "Noto Sans CJK SC") == ""


def test_report_png_figures_name_a_cjk_face():
    """kaleido's Chromium drew Chinese labels with fontconfig's fallback: the Japanese cut (other shapes for 直,
    骨 and the punctuation), or boxes where no CJK font was found."""
    fig = go.Figure(go.Bar(x=["中国", "北京"], y=[1, 2])).update_layout(title="注意力热图")
    drawn = report.report_figure(fig.to_json())
    for font in (drawn.layout.font, drawn.layout.title.font, drawn.layout.hoverlabel.font):
        assert font.family == FONT_STACK
    assert FONT_STACK.index('"Noto Sans CJK SC"') < FONT_STACK.index("sans-serif")
    kept = go.Figure().update_layout(font_family="monospace")  # a figure's own family stays
    assert report.report_figure(kept.to_json()).layout.font.family == "monospace"


def test_screen_figures_name_a_cjk_face_without_a_copy():
    """Every chart goes through presenter.scale (the projector's labels too); the font is set without copying the
    figure (a copy of a large projector map costs a third of a second)."""
    fig = go.Figure(go.Scattergl(x=[0.1, 0.2], y=[0.3, 0.1], text=["中国", "北京"], mode="markers+text"))
    shown = presenter.scale(fig)
    assert shown is fig
    assert shown.layout.font.family == FONT_STACK and shown.layout.title.font.family == FONT_STACK
    own = go.Figure().update_layout(font_family="monospace")
    assert presenter.scale(own).layout.font.family == "monospace"


def test_bertviz_views_draw_text_in_the_font_stack():
    assert f"font-family:{FONT_STACK}" in THEME_CSS
    view = build_view("head", _attention(4), ["[CLS]", "中", "文", "[SEP]"])
    assert FONT_STACK in view.html


# ------------------------------------------------------------------------------------------------ head view
def test_horizontal_layout_for_a_40_character_chinese_sentence():
    labels = ["[CLS]", *FORTY, "[SEP]"]
    assert len(FORTY) == 40 and default_layout(labels) == "horizontal"
    assert default_layout(["[CLS]", *"北京很大", "[SEP]"]) == "vertical"  # short: bertviz's own
    assert default_layout(["[CLS]", *("word",) * 40, "[SEP]"]) == "vertical"  # long, not CJK
    assert default_layout(["[CLS]", *("[UNK]",) * 40, "[SEP]"], FORTY) == "horizontal"  # a vocab without them
    assert LONG_CJK_TOKENS <= len(labels)
    att = _attention(len(labels))
    flat = build_view("head", att, labels, layout="horizontal")
    tall = build_view("head", att, labels)
    assert flat.layout == "horizontal" and tall.layout == "vertical"
    assert "const HLAYOUT = " in flat.html and "writing-mode" in flat.html and "BOXHEIGHT" not in flat.html
    assert "BOXHEIGHT" in tall.html and "HLAYOUT" not in tall.html
    assert flat.height < tall.height / 2  # one row of columns, not one row per token
    # still offline, with bertviz's controls and parameters; a pair keeps its five attention filters
    assert "cdnjs" not in flat.html and not re.search(r"<script[^>]+src=", flat.html)
    assert 'id="layer"' in flat.html and flat.html.count("const params = ") == 1
    pair = build_view("head", att, labels, sentence_b_start=20, layout="horizontal")
    assert '"label_px": [[' in pair.html and len(re.findall(r"\[\d+, \d+\]", pair.html.split("HLAYOUT")[1][:200])) == 5
    with pytest.raises(ValueError):
        build_view("head", att, labels, layout="sideways")


def test_bertviz_controls_in_the_sessions_language():
    names = (
        ("Layer", "层："),
        ("Attention", "注意力："),
        ("All", "全部"),
        ("Sentence A -> Sentence B", "句子 A → 句子 B"),
    )
    att = _attention(6)
    for kind in ("head", "model"):
        view = build_view(
            kind, att, ["[CLS]", "中", "[SEP]", "文", "字", "[SEP]"], sentence_b_start=3, controls=names
        ).html
        div = view[view.index('<div id="bertviz') : view.index("<div id='vis'>")]
        assert "Layer:" not in div and "Attention:" not in div and "注意力： <select" in div, div
        assert ("层： <select" in div) == (kind == "head"), div  # the model view has no layer select
        assert ">全部</option>" in div and ">句子 A → 句子 B</option>" in div, div


def _submit(at, text: str):
    """Type into the Attention page's form and press its button (labelled in the session's language)."""
    at.text_area(key="attention.text").set_value(text)
    next(b for b in at.button if b.key.startswith("FormSubmitter:attention.form")).click().run()
    assert not at.exception, at.exception
    return at


def test_attention_page_opens_a_long_chinese_sentence_across(use_tiny_zoo):
    """In 中文, a 40-character sentence opens in the horizontal layout, labelled in Chinese (the tiny BERT knows a
    few of its characters only: the text decides); an English sentence keeps bertviz's vertical one."""
    at = _submit(open_page("attention", params={"lang": "zh"}), FORTY)
    assert at.session_state["attention.layout"] == "horizontal"
    layout = next(c for c in at.get("segmented_control") if c.label == "布局")
    assert layout.value == "horizontal"
    assert any("上排" in c.value for c in at.caption)
    view = at.get("iframe")[0].proto.srcdoc
    assert "const HLAYOUT = " in view and "层： <select" in view and "Layer:" not in view  # bertviz's controls too
    assert not at.error
    at = _submit(at, "The cat sat on the mat because it was warm, and then it fell asleep again, twice over.")
    assert at.session_state["attention.layout"] == "vertical"
    assert not any("上排" in c.value for c in at.caption)

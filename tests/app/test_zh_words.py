"""The 词 line (issue #30): a Chinese text's word segmentation (core.base.segment, jieba) shown next to its
tokenization, on the Walkthrough's masking step and in Fill-mask's whole-word tab; not shown for English."""

from __future__ import annotations

import pytest

from app.kit.i18n import catalog
from app.kit.words_line import segmented
from tests.app.conftest import open_page

pytestmark = pytest.mark.timeout(300)

CAPITAL = "中国的首都是北京。"
LINE_ZH = "词（jieba 分词）：中国 | 的 | 首都 | 是 | 北京"


def _captions(at) -> list[str]:
    return [str(c.value) for c in at.caption]


def test_segmented_joins_the_ci():
    assert segmented(CAPITAL) == "中国 | 的 | 首都 | 是 | 北京"
    assert segmented("我每天早上喝一杯牛奶。") == "我 | 每天 | 早上 | 喝一杯 | 牛奶"
    assert catalog()["common.words_line"]["zh"].format(words=segmented(CAPITAL)) == LINE_ZH


def test_walkthrough_masking_step_shows_the_ci_in_chinese(use_tiny_zoo):
    at = open_page(
        "walkthrough", params={"walkthrough.step": "2"}, state={"ui.lang": "zh", "walkthrough.text": CAPITAL}
    )
    assert at.radio(key="walkthrough.step").value == 2
    caps = _captions(at)
    assert any(c.startswith(LINE_ZH) for c in caps), caps
    # the token strips are there too (the 词 line is drawn right under the first)
    blocks = [str(m.value) for m in at.main.markdown] + caps
    assert any("encoderlab-tokens" in b for b in blocks)
    # the whole-word picker offers the 词, and starts on a word of two characters
    pick = at.selectbox(key="walkthrough.s2.word")
    assert list(pick.options) == ["中国", "的", "首都", "是", "北京"]
    assert pick.value == 4  # 北京
    at.toggle(key="walkthrough.s2.whole_word").set_value(True).run()
    assert not at.exception, at.exception
    assert any(c.startswith(LINE_ZH) and catalog()["walkthrough.s2.zh_whole_word"]["zh"] in c for c in _captions(at))
    # English: no 词 line
    at.text_input(key="walkthrough.text").set_value("The capital of France is Paris.").run()
    assert not at.exception, at.exception
    assert not any("jieba" in c for c in _captions(at))


def test_fill_mask_whole_word_tab_shows_the_ci(use_tiny_zoo):
    at = open_page("fill_mask", state={"ui.lang": "zh", "fill_mask.plain": CAPITAL})
    caps = _captions(at)
    assert any(c.startswith(LINE_ZH) for c in caps), caps
    words = at.selectbox(key="fill_mask.word")
    assert len(words.options) == 5  # 中国 的 首都 是 北京: a 词 is one choice

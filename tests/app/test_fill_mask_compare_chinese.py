"""Fill-mask's Compare tab starts from models that can read Chinese when the sidebar's model reads Chinese, 中文 is
chosen or the text is Chinese (issue #46 §5, 9: in 中文 it started from the two English-only minis, which answer a
Chinese sentence with ':', 'a', 'the' and byte pieces). An untouched default follows a change of model; a picked
selection stays."""

from __future__ import annotations

from app.kit import i18n
from app.views.predict.fill_mask_widgets import compare_default
from core.registry import bundled_families, chinese_bundled, reads_chinese
from tests.app.conftest import click, open_page, page_path

CMP = "fill_mask.cmp_models"


def _reads_chinese(opts: list[str]) -> bool:
    return bool(opts) and all(reads_chinese(o.split("|")[1]) for o in opts)


def _bundled() -> list[str]:
    return [f"{f.key}|encoderlab/{f.bundled}" for f in bundled_families()]


def test_the_default_pair_reads_chinese_when_asked():
    bundled = _bundled()
    opts = bundled + [f"{o}|int8" for o in bundled]
    english = compare_default(opts)
    assert not _reads_chinese(english) and len(english) == 2
    chinese = compare_default(opts, chinese=True)
    fam, cid = chinese_bundled()[0]
    assert chinese == [f"{fam}|{cid}", f"{fam}|{cid}|int8"]  # the one bundled Chinese reader, fp32 against int8
    assert compare_default([o for o in opts if not reads_chinese(o.split("|")[1])], chinese=True) == english


def test_in_chinese_the_compare_tab_starts_from_chinese_readers(use_tiny_zoo):
    at = open_page("fill_mask", state={i18n.LANG_KEY: "zh"})
    assert _reads_chinese(at.multiselect(key=CMP).value), at.multiselect(key=CMP).value


def test_the_untouched_default_follows_the_chinese_model_and_a_pick_stays(use_tiny_zoo):
    at = open_page("fill_mask")
    assert not _reads_chinese(at.multiselect(key=CMP).value)  # English, an English mini picked: the minis
    fam, _ = chinese_bundled()[0]
    at.sidebar.selectbox(key="sidebar.family").set_value(fam).run()
    at.switch_page(page_path("fill_mask")).run()
    assert not at.exception, at.exception
    assert _reads_chinese(at.multiselect(key=CMP).value), at.multiselect(key=CMP).value
    picked = [o for o in _bundled() if not reads_chinese(o.split("|")[1])][-2:]
    at.multiselect(key=CMP).set_value(picked)
    click(at, "Compare")  # the tab is a form: the pick counts once sent
    at.sidebar.selectbox(key="sidebar.family").set_value(bundled_families()[0].key).run()
    at.switch_page(page_path("fill_mask")).run()
    assert at.multiselect(key=CMP).value == picked  # the person's own pick is kept

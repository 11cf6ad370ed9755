"""Switching the language keeps what a person picked (#46, third walk: Fine-tune's data choice went back to the
bundled data set). In a browser (Chromium, /work/wip/lang_switch.py in the session's notes) the choice held at main
8995758; this holds it at the cheapest level, in AppTest: the page's radio and the description under it."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from app.kit import i18n
from tests.app.conftest import MAIN, page_path


def test_finetune_data_choice_survives_a_language_switch_both_ways(use_tiny_zoo):
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.run()
    at.switch_page(page_path("finetune")).run()
    at.radio(key="finetune.source").set_value("drugreview").run()
    for lang, words in (("zh", "Drugs.com 上患者对药物的评论"), ("en", "Patients' reviews of drugs")):
        at.sidebar.selectbox(key=i18n.LANG_KEY).set_value(lang).run()
        assert not at.exception, at.exception
        assert at.radio(key="finetune.source").value == "drugreview", lang
        assert any(words in c.value for c in at.caption), (lang, [c.value[:60] for c in at.caption])

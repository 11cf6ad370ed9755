"""In 中文 every message a page shows from core (errors and notes) is in the session's language.

Core raises its own errors and returns its own notes (with a kind and params, core.base.messages); the app writes
them in the session's language (app.kit.i18n.explain). In 中文 the shown messages hold the zh text of their kind
and no English sentence of assets/i18n/errors.toml (``english_sentences``, also used by the e2e pass over every
page in tests/e2e/test_foundation_e2e.py).
"""

from __future__ import annotations

import re

from streamlit.testing.v1 import AppTest

from app.kit import i18n
from core.base.messages import msg, templates
from tests.app.conftest import MAIN, page_path


def english_sentences() -> list[str]:
    """The fixed English parts of every errors.toml template (placeholders cut out), those of three words or more
    that no zh template holds too (a zh text may quote code or an example sentence as it is)."""
    zh = " ".join(v.get("zh", "") for v in templates().values())
    out = set()
    for v in templates().values():
        for part in re.split(r"\{[^}]*\}", v["en"].replace("{{", "").replace("}}", "")):
            part = part.strip(" .,:;()'\"“”")
            if len(re.findall(r"[A-Za-z]+", part)) >= 3 and part not in zh:
                out.add(part)
    return sorted(out, key=len, reverse=True)


def english_in(texts: list[str]) -> list[str]:
    known = english_sentences()
    return [f"{s!r} in {x[:80]!r}" for x in texts for s in known if s in x]


def zh_app(name: str, params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=120)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    at.session_state[i18n.LANG_KEY] = "zh"
    at.run()
    at.switch_page(page_path(name)).run()
    assert not at.exception, at.exception
    return at


def zh(kind: str, **params) -> str:
    """The zh text of ``kind`` as the app shows it."""
    return templates()[kind]["zh"].format(
        **{k: (zh(v.kind, **v.params) if hasattr(v, "kind") else v) for k, v in params.items()}
    )


def shown(at: AppTest) -> list[str]:
    return [e.value for e in [*at.error, *at.warning, *at.info, *at.sidebar.error, *at.sidebar.warning]]


def submit(at: AppTest, form: str, label_key: str) -> None:
    at.button(key=f"FormSubmitter:{form}-{i18n.catalog()[label_key]['zh']}").click().run()
    assert not at.exception, at.exception


def test_the_known_english_list_is_built_from_the_templates():
    known = english_sentences()
    assert len(known) > 300
    assert "piece(s) are unknown to this tokenizer and reach the model as" in known
    assert english_in(["The text has no [MASK]. Write [MASK] where a word should be predicted"])


def test_fill_mask_bad_inputs_and_tokenizer_notes_in_chinese(use_tiny_zoo):
    at = zh_app("fill_mask")
    cases = [
        ("", zh("text.text_empty", empty_hint=msg("fill_mask.hint_empty"))),
        ("No mask here.", zh("fill_mask.no_mask_in_text")),
        ("[MASK] [MASK]", zh("fill_mask.only_masks_no_context")),
    ]
    for text, want in cases:
        at.text_area(key="fill_mask.text").set_value(text)
        submit(at, "fill_mask.form", "fill_mask.predict")
        errors = [e.value for e in at.error]
        assert any(want in e for e in errors), (text, errors)
        assert not english_in(shown(at)), english_in(shown(at))
    # CJK text and pieces the tokenizer does not know (they reach the model as [UNK]); typed special tokens
    at.text_area(key="fill_mask.text").set_value("[CLS] 北京 ☃ שלום is [MASK]. [SEP]")
    submit(at, "fill_mask.form", "fill_mask.predict")
    notes = " ".join(i.value for i in at.info)
    assert zh("fill_mask.note_cjk") in notes and zh("fill_mask.note_rtl") in notes, notes
    assert "有 " in notes and "个片段是这个分词器不认识的" in notes, notes  # the [UNK] note, in 中文
    assert not english_in(shown(at)), english_in(shown(at))


def test_a_bad_custom_checkpoint_folder_is_explained_in_chinese(use_tiny_zoo, tmp_path):
    at = zh_app("fill_mask", {"family": "bert", "model": "custom", "custom": str(tmp_path)})
    want = zh("load.no_config_json", folder=str(tmp_path))
    assert any(want in e.value for e in at.main.error), [e.value for e in at.main.error]
    assert any(want in e.value for e in at.sidebar.error), [e.value for e in at.sidebar.error]
    assert not english_in(shown(at)), english_in(shown(at))


def test_attention_and_sentence_pair_empty_text_in_chinese(use_tiny_zoo):
    at = zh_app("attention")
    at.text_area(key="attention.text").set_value(" ")
    submit(at, "attention.form", "attention.show")
    want = zh("attention.type_sentence_see_where", first=msg("attention.text_empty"))
    assert any(want in e.value for e in at.error), [e.value for e in at.error]
    assert not english_in(shown(at)), english_in(shown(at))

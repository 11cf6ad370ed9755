"""In 中文 no page shows a run of three or more English words (#46 §1), outside code, model ids and the names the
field writes in English (tests/english.py keeps that allow-list, each entry with its reason).

The pass opens every page of the navigation in a fresh 中文 session on the bundled models and reads every text
element, every widget's label, help and placeholder, and the options of every picker (an example input with a
[MASK] is data, not the page's words); then it runs the main action of the pages whose results are drawn in the
same script run (Fill-mask, Sentence pair, Attention) and reads the results too. The test before it found what
the catalogue-built check (tests/app/test_zh_core_messages.py) could not: core's method descriptions, DeepLift's
reason, a dataset's citation, an array shape and an English example sentence in Chinese texts.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app.kit import i18n
from app.nav import available_pages
from tests.app.conftest import MAIN, page_path
from tests.english import english_runs

TEXT_ELEMENTS = ("markdown", "caption", "info", "warning", "error", "success", "title", "header", "subheader", "text")
WIDGETS = (
    "button", "checkbox", "radio", "selectbox", "multiselect", "text_input", "text_area", "number_input", "slider",
    "select_slider", "toggle", "expander", "tabs", "metric",
)  # fmt: skip
EXAMPLE_INPUT = ("[MASK]", "<mask>")


def shown_texts(at: AppTest) -> list[tuple[str, str]]:
    """(where, text) of every text the session shows: elements, widget labels, help, placeholders and options."""
    out = [(kind, str(e.value)) for kind in TEXT_ELEMENTS for e in getattr(at, kind)]
    out += [(f"sidebar.{kind}", str(e.value)) for kind in ("markdown", "caption") for e in getattr(at.sidebar, kind)]
    for kind in WIDGETS:
        for e in at.get(kind):
            for attr in ("label", "help", "placeholder"):
                v = getattr(e, attr, None) or getattr(getattr(e, "proto", None), attr, None)
                if isinstance(v, str) and v:
                    out.append((f"{kind}.{attr}", v))
            for o in getattr(e, "options", None) or []:
                if not any(m in str(o) for m in EXAMPLE_INPUT):
                    out.append((f"{kind}.option", str(o)))
    return out


def english(at: AppTest) -> list[str]:
    return sorted(
        {f"{where}: {run!r} in {text[:90]!r}" for where, text in shown_texts(at) for run in english_runs(text)}
    )


def zh_page(name: str) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.session_state[i18n.LANG_KEY] = "zh"
    at.run()
    at.switch_page(page_path(name)).run()
    assert not at.exception, at.exception
    return at


PAGES = [p.file.split("/")[-1].removesuffix(".py") for p in available_pages()]


@pytest.mark.parametrize("name", PAGES)
def test_no_page_shows_english_in_chinese(name):
    at = zh_page(name)
    assert not english(at), "\n".join(english(at))


def submit(at: AppTest, form: str) -> None:
    """Press the (first) submit button of ``form``, as its page's default inputs stand."""
    at.get("button")  # AppTest keys a form's submit button "FormSubmitter:<form>-<label>"
    key = next(b.key for b in at.get("button") if b.key and b.key.startswith(f"FormSubmitter:{form}-"))
    at.button(key=key).click().run()
    assert not at.exception, at.exception


ZH_MODEL = "sidebar.zh.encoderlab/xlmr-e5-small"  # the sidebar's "use the Chinese model" button


@pytest.mark.parametrize(
    "name, form, texts, chinese_model",
    [
        ("fill_mask", "fill_mask.form", {"fill_mask.text": "中国的首都是北[MASK]。"}, True),
        ("attention", "attention.form", {"attention.text": "我们用筷子吃饭。"}, True),
        (
            "sentence_pair",
            "sentence_pair.form",
            {"sentence_pair.a": "她倒了一杯热茶。", "sentence_pair.b": "然后她坐到窗边喝。"},
            False,
        ),
    ],
)
def test_results_in_chinese_show_no_english(name, form, texts, chinese_model):
    """A page's results, on Chinese input (English input would be echoed back as the person's own words)."""
    at = zh_page(name)
    if chinese_model:
        at.button(key=ZH_MODEL).click().run()
    for key, value in texts.items():
        at.text_area(key=key).set_value(value)
    submit(at, form)
    assert not at.error, [e.value for e in at.error]
    assert not english(at), "\n".join(english(at))


@pytest.mark.parametrize(
    "text, found",
    [
        ("加载中：loading a fresh copy of the model", ["loading a fresh copy of the model"]),
        ("用 `python -m core.train.finetune_cli` 微调", []),  # code
        ("模型 encoderlab/bert-mini 与 hfl/chinese-roberta-wwm-ext", []),  # model ids
        ("积分梯度（Integrated Gradients）和 BERT、RoBERTa、ALBERT", []),  # names
        ("预测：the · a · of", []),  # a list of predicted words is not a run
    ],
)
def test_the_detector(text, found):
    assert english_runs(text) == found

"""What the app shows a person comes from the message catalogue (#46 §1): app/ and pages/ never show ``str(e)`` of
an exception (a core error is written in the session's language by app.kit.i18n.explain; anything else would show
English, or a server path, to a 中文 session), and never pass a written-out English text to a Streamlit element.

An AST check over every module of app/ and pages/: a call ``str(x)`` where ``x`` is the name an ``except ... as x``
bound, and a text literal (two or more words) as the label, body, help or placeholder of an ``st.*`` element.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ELEMENTS = {
    "error", "warning", "info", "success", "caption", "markdown", "write", "title", "header", "subheader", "text",
    "toast", "button", "checkbox", "radio", "selectbox", "multiselect", "text_input", "text_area", "expander",
    "tabs", "metric", "form_submit_button", "download_button", "progress", "number_input", "slider",
    "select_slider", "file_uploader", "toggle", "exception", "status", "spinner", "popover", "page_link",
    "link_button",
}  # fmt: skip
TEXT_ARGS = {"label", "text", "help", "placeholder", "body", "caption", "title"}
NOT_STREAMLIT = {"log", "logger", "logging", "warnings"}  # .warning/.error of a logger write to the server's log
WORDS = re.compile(r"[A-Za-z]{2,}(?:\W+[A-Za-z]{2,})+")


def _written_text(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return WORDS.search(node.value) is not None
    if isinstance(node, ast.JoinedStr):
        return WORDS.search("".join(v.value for v in node.values if isinstance(v, ast.Constant))) is not None
    return False


def findings(source: str, where: str) -> list[str]:
    tree = ast.parse(source)
    caught = {n.name for n in ast.walk(tree) if isinstance(n, ast.ExceptHandler) and n.name}
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        fn = n.func
        if isinstance(fn, ast.Name) and fn.id == "str" and n.args:
            if isinstance(n.args[0], ast.Name) and n.args[0].id in caught:
                out.append(f"{where}:{n.lineno}: str({n.args[0].id}) of an exception (use explain)")
        if isinstance(fn, ast.Attribute) and fn.attr in ELEMENTS:
            receiver = fn.value.id if isinstance(fn.value, ast.Name) else ""
            if receiver in NOT_STREAMLIT:
                continue
            for a in [*n.args[:1], *(k.value for k in n.keywords if k.arg in TEXT_ARGS)]:
                if _written_text(a):
                    out.append(f"{where}:{n.lineno}: {fn.attr}({ast.unparse(a)[:60]}) written out (use t())")
    return out


def test_app_and_pages_show_no_exception_text_and_no_written_out_text():
    files = sorted([*(ROOT / "app").rglob("*.py"), *(ROOT / "pages").rglob("*.py")])
    assert len(files) > 50
    bad = [x for f in files for x in findings(f.read_text(encoding="utf-8"), str(f.relative_to(ROOT)))]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "snippet",
    [
        "try:\n    f()\nexcept ValueError as e:\n    st.error(str(e))\n",
        "st.warning('Something went wrong here')\n",
        "c.caption(f'{n} rows were skipped')\n",
        "st.button(t('a'), help='Click to start')\n",
    ],
)
def test_the_check_finds_each_kind(snippet):
    assert findings(snippet, "x.py")


def test_the_check_leaves_the_catalogue_and_logs_alone():
    ok = "try:\n    f()\nexcept ValueError as e:\n    st.error(explain(e))\nlog.warning('drawn %d', 3)\nst.info(t('a.b'))\n"
    assert findings(ok, "x.py") == []

"""Translation completeness: every UI string exists in English and 中文, in the files, not in the code.

1. Every entry in assets/i18n/*.toml has both languages, non-empty, with the same {placeholders}, and core's
   messages (errors.toml) have real Chinese in zh: one test lists every bad entry of every file at once.
2. Every key the code asks for (t("...") / t_or("...")) exists; for keys built at run time (f-strings) the
   fixed prefix must match at least one entry.
3. No user-visible string is written in app/ or pages/: the labels, texts and titles passed to streamlit
   calls and plotly figures must come from t(). A line may opt out with "# i18n: ok" (code, model ids).
"""

from __future__ import annotations

import ast
import re
import string
from pathlib import Path

from app.kit.i18n import LANGS, catalog
from core.base.messages import read_catalogue
from core.base.segment import has_han

ROOT = Path(__file__).resolve().parents[2]
CODE = sorted([*(ROOT / "app").rglob("*.py"), *(ROOT / "pages").glob("*.py")])

# streamlit calls whose first argument, or these keyword arguments, are shown to the user
UI_CALLS = {
    "title",
    "header",
    "subheader",
    "markdown",
    "caption",
    "write",
    "text",
    "button",
    "form_submit_button",
    "download_button",
    "selectbox",
    "multiselect",
    "radio",
    "checkbox",
    "toggle",
    "slider",
    "select_slider",
    "number_input",
    "text_input",
    "text_area",
    "file_uploader",
    "info",
    "warning",
    "error",
    "success",
    "toast",
    "expander",
    "tabs",
    "metric",
    "spinner",
    "progress",
    "page_link",
    "popover",
    "status",
    "segmented_control",
    "pills",
    "link_button",
    "color_picker",
    "data_editor",
    "dialog",
}
UI_KWARGS = {"label", "help", "placeholder", "text", "caption", "title"}
# plotly: titles anywhere, trace names and hover templates on go.* constructors
TITLE_KW = re.compile(r"(^|_)title(_text)?$")
PLOTLY_KW = {"name", "hovertemplate", "text"}


def _letters(s: str) -> bool:
    s = re.sub(r"%\{[^}]*\}|<[^>]*>|\{[^}]*\}", "", s)  # plotly %{x}, html tags, format fields
    return bool(re.search(r"[A-Za-z\u4e00-\u9fff]{2,}", s))


def _literal_text(node: ast.AST) -> list[str]:
    """Written-in text in a node: string constants and the fixed parts of f-strings (lists/tuples: each item)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if _letters(node.value) else []
    if isinstance(node, ast.JoinedStr):
        fixed = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
        return [fixed] if _letters(fixed) else []
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for e in node.elts for s in _literal_text(e)]
    if isinstance(node, ast.BinOp):  # "a" + x
        return _literal_text(node.left) + _literal_text(node.right)
    if isinstance(node, ast.IfExp):
        return _literal_text(node.body) + _literal_text(node.orelse)
    return []


def _func_name(call: ast.Call) -> tuple[str, str]:
    f = call.func
    if isinstance(f, ast.Attribute):
        base = f.value.id if isinstance(f.value, ast.Name) else ""
        return base, f.attr
    if isinstance(f, ast.Name):
        return "", f.id
    return "", ""


def hard_coded(path: Path) -> list[str]:
    src = path.read_text(encoding="utf-8")
    lines = src.splitlines()
    found = []
    for node in ast.walk(ast.parse(src)):
        if not isinstance(node, ast.Call):
            continue
        base, name = _func_name(node)
        texts: list[str] = []
        if name in UI_CALLS and base not in ("re", "os", "json", "np", "pd", "Path", "math", "fig"):
            if node.args:
                texts += _literal_text(node.args[0])
            texts += [s for kw in node.keywords if kw.arg in UI_KWARGS for s in _literal_text(kw.value)]
        if name == "download" and len(node.args) > 1:  # app.kit.download_button.download(where, label, ...)
            texts += _literal_text(node.args[1])
        texts += [s for kw in node.keywords if kw.arg and TITLE_KW.search(kw.arg) for s in _literal_text(kw.value)]
        if base == "go":
            texts += [s for kw in node.keywords if kw.arg in PLOTLY_KW for s in _literal_text(kw.value)]
        span = lines[
            node.lineno - 1 : node.end_lineno
        ]  # the opt-out may sit on any line of a call the formatter wrapped
        if texts and not any("i18n: ok" in line for line in span):
            found += [f"{path.relative_to(ROOT)}:{node.lineno}: {s[:70]!r}" for s in texts]
    return found


def _keys_used() -> tuple[set[str], set[str]]:
    """Literal keys and f-string prefixes passed to t() / t_or() in app/ and pages/."""
    keys, prefixes = set(), set()
    for path in CODE:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _func_name(node)[1] in ("t", "t_or") and node.args:
                a = node.args[0]
                if isinstance(a, ast.Constant) and isinstance(a.value, str):
                    keys.add(a.value)
                elif isinstance(a, ast.JoinedStr) and a.values and isinstance(a.values[0], ast.Constant):
                    prefixes.add(a.values[0].value)
    return keys, prefixes


def _fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def catalogue_problems(entries: dict[str, dict[str, str]], *, chinese: bool = False) -> list[str]:
    """Every bad entry of a catalogue (key -> {"en": text, "zh": text}, as core.base.messages.read_catalogue reads a
    file), each with its reason, all of them: a language missing or blank, {placeholders} that differ between en and
    zh, and with ``chinese`` a zh text that has English words but no Chinese character (English left in 中文)."""
    problems = []
    for key, entry in sorted(entries.items()):
        texts = {lang: entry.get(lang) for lang in LANGS}
        blank = [lang for lang, text in texts.items() if not isinstance(text, str) or not text.strip()]
        problems += [f"{key}: no {lang} text" for lang in blank]
        if blank:
            continue
        en, zh = texts["en"], texts["zh"]
        if _fields(en) != _fields(zh):
            problems.append(f"{key}: placeholders differ between en {sorted(_fields(en))} and zh {sorted(_fields(zh))}")
        if chinese and not has_han(zh) and re.search(r"[A-Za-z]{2,}", re.sub(r"\{[^}]*\}", "", zh)):
            problems.append(f"{key}: the zh text has no Chinese: {zh[:60]!r}")
    return problems


def test_catalog_is_not_empty():
    assert len(catalog()) > 100
    assert len([k for k in catalog() if k.startswith("errors.")]) > 300  # core's messages are in it too


def test_every_entry_of_every_catalogue_has_both_languages_with_the_same_placeholders():
    """Every entry of assets/i18n/*.toml (keys "<file>.<key>", read by the app's catalog, the files' one reader),
    all bad ones listed at once; core's messages (errors.toml) are real Chinese in zh too."""
    cat = catalog()
    errors = {k: e for k, e in cat.items() if k.startswith("errors.")}
    problems = catalogue_problems({k: e for k, e in cat.items() if k not in errors})
    problems += catalogue_problems(errors, chinese=True)
    assert not problems, f"{len(problems)} bad entries in assets/i18n/<file>.toml:\n" + "\n".join(problems)


def test_the_catalogue_check_lists_every_bad_entry(tmp_path):
    """The check itself can fail, and names every bad entry at once, not the first: a file with a missing zh, a
    missing en, a blank en, a mismatched placeholder and an English-only zh, among good entries (a zh of symbols
    and placeholders only is not English)."""
    bad = tmp_path / "bad.toml"
    bad.write_text(
        """
[ok]
en = "{n} tokens"
zh = "{n} 个词元"
[no_zh]
en = "Hello"
[nested.no_en]
zh = "你好"
[blank_en]
en = "  "
zh = "空"
[fields]
en = "{n} tokens in {layer}"
zh = "第 {layer_index} 层的 {n} 个词元"
[english_left]
en = "Press {key} to go on"
zh = "Press {key} to go on"
[symbols_only]
en = "{a} → {b} (%)"
zh = "{a} → {b}（%）"
""",
        encoding="utf-8",
    )
    entries = read_catalogue(bad, "bad")
    assert set(entries) == {
        "bad.ok",
        "bad.no_zh",
        "bad.nested.no_en",
        "bad.blank_en",
        "bad.fields",
        "bad.english_left",
        "bad.symbols_only",
    }  # an entry missing a language is still read
    assert catalogue_problems(entries) == [
        "bad.blank_en: no en text",
        "bad.fields: placeholders differ between en ['layer', 'n'] and zh ['layer_index', 'n']",
        "bad.nested.no_en: no en text",
        "bad.no_zh: no zh text",
    ]
    problems = catalogue_problems(entries, chinese=True)
    assert problems[1:2] == ["bad.english_left: the zh text has no Chinese: 'Press {key} to go on'"]
    assert [p.split(":")[0] for p in problems] == [
        "bad.blank_en",
        "bad.english_left",
        "bad.fields",
        "bad.nested.no_en",
        "bad.no_zh",
    ]


def test_every_key_the_code_uses_exists():
    keys, prefixes = _keys_used()
    cat = catalog()
    missing = sorted(k for k in keys if k not in cat)
    assert not missing, f"keys used in the code but not in assets/i18n: {missing}"
    dead_prefixes = sorted(p for p in prefixes if not any(k.startswith(p) for k in cat))
    assert not dead_prefixes, f"run-time keys with no entry at all: {dead_prefixes}"


def test_no_ui_string_is_written_in_the_code():
    found = [f for p in CODE for f in hard_coded(p)]
    assert not found, "UI strings written in the code instead of assets/i18n:\n" + "\n".join(found)


def test_the_scan_catches_a_hard_coded_label(tmp_path):
    """The scanner itself can fail: a page with an English label is caught, t() and opted-out lines are not."""
    page = tmp_path / "p.py"
    page.write_text(
        'import streamlit as st\nst.title("Hello there")\nst.title(t("x.y"))\n'
        'st.caption(f"{n} tokens")\nst.code("print(1)")\nst.markdown("`bert-base`")  # i18n: ok\n'
        'fig.update_layout(yaxis_title="probability")\n'
        'download(st, "Download CSV", make, "a.csv", "text/csv", "k")\ndownload(st, t("x.z"), make, "a.csv", "text/csv", "k")\n',
        encoding="utf-8",
    )
    global ROOT
    old, ROOT = ROOT, tmp_path
    try:
        found = hard_coded(page)
    finally:
        ROOT = old
    assert [f.split(":")[1] for f in found] == ["2", "4", "7", "8"], found


# a placeholder says what it holds: not p, p2, a single letter (n, a plain count, is fine) or name__
VAGUE_FIELD = re.compile(r"p\d*|[a-mo-zA-Z]|_\w*|\w*_")


def vague_placeholders(entries: dict[str, dict[str, str]]) -> list[str]:
    """Every "key: {field}" of a catalogue whose field does not say what it holds (plotly's %{x} is not a field)."""
    found = []
    for key, entry in sorted(entries.items()):
        for lang in LANGS:
            text = re.sub(r"%\{[^{}]*\}", "", entry.get(lang) or "")
            try:
                names = {re.split(r"[.\[!:]", f)[0] for f in _fields(text)}
            except ValueError:  # an unbalanced brace: catalogue_problems' business
                continue
            found += [f"{key}: {{{f}}}" for f in sorted(names) if VAGUE_FIELD.fullmatch(f)]
    return sorted(set(found))


def test_placeholders_say_what_they_hold():
    bad = vague_placeholders(catalog())
    assert not bad, f"{len(bad)} placeholders that do not say what they hold:\n" + "\n".join(bad)


def test_the_placeholder_check_catches_vague_names():
    entries = {
        "x.ok": {"en": "{n} of {n_tokens} at %{x}", "zh": "{n} / {n_tokens} %{y}"},
        "x.bad": {"en": "{p} and {p2} in {name__} ({e}, {w!r}, {s:.1f})", "zh": "{p} {p2} {name__} {e} {w!r} {s:.1f}"},
    }
    assert vague_placeholders(entries) == sorted(f"x.bad: {{{f}}}" for f in ("e", "name__", "p", "p2", "s", "w"))

"""UI strings in English and 中文, read from the translation files in assets/i18n/ (never written in the code).

Each ``assets/i18n/<namespace>.toml`` holds entries with both languages side by side::

    [title]
    en = "Fill-mask"
    zh = "完形填空（Fill-mask）"

``t("fill_mask.title")`` returns the entry in the language chosen in the sidebar; ``{name}`` placeholders are
filled from keyword arguments. A missing language falls back to English (tests/app/test_i18n.py fails first).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache

from core.base.messages import Items, Message, message_of, read_catalogue, render
from core.base.paths import ASSETS, scrub

I18N_DIR = ASSETS / "i18n"
LANGS = {"en": "English", "zh": "中文"}
DEFAULT_LANG = "en"
LANG_KEY = "ui.lang"  # session-state key (also the URL parameter "lang")


@lru_cache(maxsize=1)
def catalog() -> dict[str, dict[str, str]]:
    """Every entry of every translation file: "namespace.key" -> {"en": ..., "zh": ...} (each file read by
    core.base.messages.read_catalogue, the one reader of assets/i18n)."""
    out: dict[str, dict[str, str]] = {}
    for f in sorted(I18N_DIR.glob("*.toml")):
        out.update(read_catalogue(f, f.stem))
    return out


# The language outside a script run, per thread and task (a ContextVar, not a process-wide value: each session's
# script run reads its own session state, and nothing one run sets reaches another session or a later test).
_LANG: ContextVar[str] = ContextVar("encoderlab.lang", default=DEFAULT_LANG)


def lang() -> str:
    """The language of this session ("en" or "zh").

    In a script run it is the session's choice (session state). Outside one (the command line, a worker, a test
    building text or re-applying a widget's format_func between AppTest runs) it is the context's language: English
    unless ``language(code)`` set another.
    """
    import streamlit as st
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    if get_script_run_ctx(suppress_warning=True) is None:
        return _LANG.get()
    value = st.session_state.get(LANG_KEY, DEFAULT_LANG)
    return value if value in LANGS else DEFAULT_LANG


@contextmanager
def language(code: str) -> Iterator[str]:
    """Text built outside a script run, in ``code`` ("en" or "zh"), for the duration of the block."""
    if code not in LANGS:
        raise ValueError(f"unknown language {code!r}: one of {sorted(LANGS)}")
    token = _LANG.set(code)
    try:
        yield code
    finally:
        _LANG.reset(token)


def t(key: str, /, **kw) -> str:
    """The text of ``key`` in the session's language, formatted with ``kw``."""
    entry = catalog().get(key)
    if entry is None:
        return f"⟦{key}⟧"
    text = entry.get(lang()) or entry.get(DEFAULT_LANG) or f"⟦{key}⟧"
    return text.format(**kw) if kw else text


def has(key: str) -> bool:
    return key in catalog()


def t_or(key: str, fallback: str, /, **kw) -> str:
    """``t(key)`` when the files have it, else ``fallback`` (for registry data keyed by id, e.g. a family note)."""
    return t(key, **kw) if has(key) else fallback


def explain(x: object) -> str:
    """The text of a core error or note in the session's language: from its kind and params (core.base.messages)
    when it has them (params that are messages or errors are explained too), else ``str(x)``. In hosted mode the
    text names no server path (core.base.paths.scrub)."""
    m = message_of(x)
    if not isinstance(m, Message):
        return scrub(str(x))
    params = {
        k: explain(v)
        if isinstance(v, (Message, BaseException))
        else Items(explain(x) for x in v)
        if isinstance(v, Items)
        else [explain(x) for x in v]
        if isinstance(v, (list, tuple))
        else v
        for k, v in m.params.items()
    }
    return scrub(render(m.kind, lang(), params))

"""Chinese example texts: with 中文 chosen and a Chinese-capable model in the sidebar (the bundled XLM-R, or a
checkpoint the registry lists as zh or multi: core.registry.reads_chinese), the pages and the Walkthrough start from
Chinese examples (assets/i18n/common.toml, ``common.example.*``) instead of their English ones.

A text box keeps what the person typed: ``fill_default`` replaces a box's value only while it is still one of the
two examples (so changing the model or the language swaps an untouched example, never a typed text)."""

from __future__ import annotations

import streamlit as st

from app.kit import state
from app.kit.i18n import lang, t
from core.models.loading import ModelSpec
from core.registry import reads_chinese


def chinese_examples(spec: ModelSpec | None = None) -> bool:
    """中文 is chosen and ``spec`` (default: the sidebar's model) reads Chinese."""
    spec = spec if spec is not None else state.current_spec()
    return lang() == "zh" and spec is not None and reads_chinese(spec.checkpoint)


def zh_example(entry: str, **kw) -> str:
    """The Chinese example ``entry`` (common.example.<entry>), in Chinese whatever the interface language."""
    return t(f"common.example.{entry}", **kw)


def pick_example(english: str, entry: str, spec: ModelSpec | None = None, **kw) -> str:
    """The Chinese example ``entry`` when chinese_examples(spec), else ``english``."""
    return zh_example(entry, **kw) if chinese_examples(spec) else english


def fill_default(key: str, english: str, entry: str, spec: ModelSpec | None = None, **kw) -> None:
    """Set the text box ``key`` to its example (the Chinese ``entry`` or ``english``) when it has no value yet or
    still holds the other example; a typed text stays."""
    want = pick_example(english, entry, spec, **kw)
    if key not in st.session_state or st.session_state[key] in (english, zh_example(entry, **kw)):
        st.session_state[key] = want

"""The 词 line: a text's Chinese word segmentation (core.base.segment), shown next to its tokenization so the
word boundaries whole-word masking uses can be seen. Nothing is shown for text without Han characters."""

from __future__ import annotations

from app.kit.i18n import t
from core.base.segment import has_han, word_spans

SEPARATOR = " | "


def segmented(text: str) -> str:
    """The words of ``text`` joined by " | " ("中国 | 的 | 首都 | 是 | 北京")."""
    return SEPARATOR.join(text[a:b] for a, b in word_spans(text))


def word_line(text: str) -> str | None:
    """ "Words (词, cut by jieba): 中国 | 的 | ..." in the session's language, or None when ``text`` has no Han
    characters (English keeps its page as it was)."""
    if not has_han(text or ""):
        return None
    return t("common.words_line", words=segmented(text))

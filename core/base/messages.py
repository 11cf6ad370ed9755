"""Messages core shows a person (its errors' texts and the notes it returns), with a stable ``kind`` and ``params``.

``msg(kind, **params)`` is a ``Message``: a ``str`` whose text is the English template of ``kind`` in
assets/i18n/errors.toml filled with ``params``, so the command line, the logs and ``str(err)`` read English as
before. It also keeps ``kind`` and ``params``, from which the app writes the same message in the session's language
(app.kit.i18n.explain). Errors carry one as their first argument::

    raise FillMaskError(msg("fill_mask.no_mask", mask="[MASK]"))

``Problem`` is the mixin the project's error classes use: ``err.kind`` and ``err.params`` read that first argument
(None and {} for an error raised with a plain string). A param may itself be a Message or an error (a cause quoted
inside a message): the app translates it too; a list or tuple param reads as its items joined by a space. Both
languages live side by side in errors.toml (tests/core/test_messages.py checks every kind used in core exists
there; tests/app/test_i18n.py that each has both languages with the same placeholders).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from core.base.caches import register as register_cache
from core.base.paths import ASSETS

ERRORS_FILE = ASSETS / "i18n" / "errors.toml"
LANGUAGES = ("en", "zh")


def _flatten(prefix: str, table: dict[str, Any], out: dict[str, dict[str, str]]) -> None:
    if any(k in LANGUAGES for k in table):
        out[prefix] = {k: v for k, v in table.items() if k in LANGUAGES}
        return
    for k, v in table.items():
        if isinstance(v, dict):
            _flatten(f"{prefix}.{k}" if prefix else k, v, out)


def read_catalogue(path: Path, namespace: str = "") -> dict[str, dict[str, str]]:
    """The entries of one translation file of assets/i18n: "namespace.key" -> {"en": text, "zh": text} (bare keys
    when ``namespace`` is ""). The one reader of these files (core's messages, app.kit.i18n's catalog, the upload
    reasons): a table with an "en" or a "zh" is an entry, kept even when one language is missing, so that
    tests/app/test_i18n.py sees it."""
    with path.open("rb") as fh:
        out: dict[str, dict[str, str]] = {}
        _flatten(namespace, tomllib.load(fh), out)
    return out


@lru_cache(maxsize=1)
def templates() -> dict[str, dict[str, str]]:
    """Every kind in errors.toml: kind -> {"en": template, "zh": template}."""
    return read_catalogue(ERRORS_FILE)


register_cache(__name__, templates.cache_clear)


class Items(tuple[Any, ...]):
    """A param that is a list of phrases (remedies, choices): it reads as its items separated by the language's
    list separator (ITEM_SEP: "; ", "；"); a plain list or tuple reads as its items joined by a space (sentences)."""


ITEM_SEP = {"en": "; ", "zh": "；"}


def _joined(v: Any, lang: str) -> Any:
    if isinstance(v, Items):
        return ITEM_SEP.get(lang, ITEM_SEP["en"]).join(str(x) for x in v)
    if isinstance(v, (list, tuple)):
        return " ".join(str(x) for x in v)
    return v


def render(kind: str, lang: str, params: dict[str, Any]) -> str:
    """The template of ``kind`` in ``lang`` (English when absent) filled with ``params``; an unknown kind or a
    template that does not fit its params still gives readable text (the kind and the params)."""
    entry = templates().get(kind, {})
    template = entry.get(lang) or entry.get("en")
    params = {k: _joined(v, lang) for k, v in params.items()}
    if template is None:
        return f"{kind}: {params}" if params else kind
    try:
        return template.format(**params)
    except (KeyError, IndexError, ValueError):
        return f"{template} {params}"


QUOTE_MAX = 200  # the longest text a message quotes whole (a longer one is shown as its start … its end)
QUOTE_HEAD, QUOTE_TAIL = 140, 40


def excerpt(text: str) -> str:
    """``text`` as a message quotes it: whole up to QUOTE_MAX characters, else its first QUOTE_HEAD and last
    QUOTE_TAIL characters around " … " (a 5,000-character word is not echoed back 5,000 characters long). A name
    Python decoded from non-UTF-8 bytes (lone surrogates, which no page can send) shows "?" for those bytes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    if len(text) <= QUOTE_MAX:
        return text
    return f"{text[:QUOTE_HEAD]} … {text[-QUOTE_TAIL:]}"


def _excerpt(v: Any) -> Any:
    """A param as a message keeps it: plain text cut by ``excerpt`` (a Message is kept whole: it is the project's
    own text, already bounded), lists and tuples item by item, anything else as it is."""
    if isinstance(v, str) and not isinstance(v, Message):
        return excerpt(v)
    if isinstance(v, list):
        return [_excerpt(x) for x in v]
    if isinstance(v, tuple):  # an Items stays an Items (its list separator)
        return (Items if isinstance(v, Items) else tuple)(_excerpt(x) for x in v)
    return v


class Message(str):
    """A message with a ``kind`` and ``params``; as a str it is the English text."""

    kind: str
    params: dict[str, Any]

    def __new__(cls, kind: str, /, **params: Any) -> Message:
        params = {k: _excerpt(v) for k, v in params.items()}
        obj = super().__new__(cls, render(kind, "en", params))
        obj.kind, obj.params = kind, params
        return obj

    # a job's failure crosses a process (pickle): keep kind and params
    def __reduce__(self) -> tuple[Callable[..., Message], tuple[str, dict[str, Any]]]:
        return (_rebuild, (self.kind, dict(self.params)))


def _rebuild(kind: str, params: dict[str, Any]) -> Message:
    return Message(kind, **params)


def msg(kind: str, /, **params: Any) -> Message:
    """The message ``kind`` (a key of assets/i18n/errors.toml) with ``params``: English as a str."""
    return Message(kind, **params)


T = TypeVar("T")


def message_of(x: T) -> Message | T:
    """The Message behind ``x`` (a Message, or an error raised with one), else ``x`` itself."""
    if isinstance(x, Message):
        return x
    if isinstance(x, BaseException) and x.args and isinstance(x.args[0], Message):
        return x.args[0]
    return x


def holds_kind(x: object, kind: str) -> bool:
    """Whether ``x`` (a Message, or an error raised with one) is of ``kind`` or quotes one that is, at any depth of
    its params: how code asks what a message says (a failed job's "jobs.failed_with" quoting the error it wraps)
    without reading its words."""
    m = message_of(x)
    if not isinstance(m, Message):
        return False
    if m.kind == kind:
        return True
    return any(
        holds_kind(v, kind) or (isinstance(v, (list, tuple)) and any(holds_kind(i, kind) for i in v))
        for v in m.params.values()
    )


class Problem:
    """Mixin for the project's errors: ``kind`` and ``params`` of the Message the error was raised with."""

    args: tuple[Any, ...]

    @property
    def kind(self) -> str | None:
        m = message_of(self)
        return m.kind if isinstance(m, Message) else None

    @property
    def params(self) -> dict[str, Any]:
        m = message_of(self)
        return dict(m.params) if isinstance(m, Message) else {}


def carry(e: BaseException) -> str:
    """What an error wrapping ``e`` is raised with: ``e``'s Message (so its kind reaches the page), else ``str(e)``."""
    m = message_of(e)
    return m if isinstance(m, Message) else str(e)

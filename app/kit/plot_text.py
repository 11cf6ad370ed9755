"""User text in a Plotly figure: Plotly reads HTML in its labels, titles, tick texts, legend names and hover texts
(``<b>``, ``<i>``, ``<br>``, ``<a href>``, ``&entities;``), so a class label ``<b>bold</b>`` from an uploaded file
would be drawn bold. Every user string (class labels, tokens, typed text, file names, run names) goes through
``plot_text`` on its way into a figure: ``<``, ``>`` and ``&`` become entities, which Plotly shows as typed.
Template text of our own (``%{x}``, ``<br>``, ``<extra>``) is not passed through it.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any


def plot_text(text: Any) -> str:
    """``text`` (any value, as str) shown exactly as typed in a Plotly label, title, tick or hover text."""
    return html.escape(str(text), quote=False)


def plot_texts(items: Iterable[Any]) -> list[str]:
    """``plot_text`` of each item (axis categories, tick texts, hover texts)."""
    return [plot_text(x) for x in items]

"""The app's own CSS for every page and language (the presenter view adds its larger sizes: app.kit.presenter).

Streamlit draws a metric's label and delta on one line cut with "…" (white-space: nowrap, text-overflow:
ellipsis) and has no option to wrap them. Six metrics in a row left "宏平均 F1（Macro-…" and "省去的填充（pad…" on the
Fine-tune page in 中文 (#46, third walk), and a checkbox's or a widget's label the same ("冻结嵌入层（embeddin…",
"梯度检查点（gradie…"). Here they wrap inside their column instead.
"""

from __future__ import annotations

import streamlit as st

CSS = """<style>
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] *,
[data-testid="stMetricDelta"], [data-testid="stMetricDelta"] *,
[data-testid="stCheckbox"] label div, [data-testid="stCheckbox"] label p,
[data-testid="stWidgetLabel"] div, [data-testid="stWidgetLabel"] p {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
  overflow-wrap: anywhere; }
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] div { height: auto !important; }
</style>"""


def apply() -> None:
    """The app's CSS, once per run (before the page draws)."""
    st.html(CSS)

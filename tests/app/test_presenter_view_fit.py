"""Presenter view on a phone: presenter.scale wraps long chart titles and legend names and keeps them inside the
chart; presenter view's sidebar lets a long page name wrap."""

from __future__ import annotations

import plotly.graph_objects as go

from app.kit import presenter


def test_a_long_chart_title_and_a_legend_below_the_plot_fit_a_phone():
    title = "Length (L2 norm) of each part of each token's input vector"
    fig = go.Figure(go.Bar(x=["a"], y=[1], name="stored")).update_layout(
        title=title, margin=dict(t=40, b=10), legend=dict(orientation="h", y=-0.25), height=380
    )
    shown = presenter.scale(fig)
    lines = shown.layout.title.text.split("<br>")
    assert " ".join(lines) == title and len(lines) == 2
    assert all(len(line) <= presenter.TITLE_WRAP for line in lines)
    assert shown.layout.margin.t >= 2 * presenter.TITLE_PX  # room for both lines
    assert (shown.layout.legend.yref, shown.layout.legend.y, shown.layout.legend.yanchor) == ("container", 0, "bottom")
    assert fig.layout.title.text == title and fig.layout.legend.y == -0.25  # the caller's figure is unchanged
    short = go.Figure().update_layout(title="loss")
    assert presenter.scale(short) is short
    zh = presenter.wrap_text("每个词元输入向量各部分的长度以及层归一化之后的长度", presenter.TITLE_WRAP)
    assert "<br>" in zh and zh.replace("<br>", "") == "每个词元输入向量各部分的长度以及层归一化之后的长度"
    # a space inside parentheses is no place to break (#46, third walk 14: "…[MASK]（token<br>6）：…")
    fm = presenter.wrap_text("第 1 个 [MASK]（token 6）：它自己的分布", presenter.TITLE_WRAP)
    assert fm == "第 1 个<br>[MASK]（token 6）：它自己的分布", fm
    assert presenter.wrap_text("a (b c) d", 5) == "a<br>(b c)<br>d"


def test_a_long_legend_name_and_named_categories_fit_a_phone():
    name = "encoder weights applied per token"
    fig = go.Figure(go.Bar(x=["bert-base-uncased", "albert-large-v2"], y=[1, 2], name=name)).update_layout(
        legend=dict(orientation="h", y=-0.2)
    )
    shown = presenter.scale(fig)
    assert "<br>" in shown.data[0].name and shown.data[0].name.replace("<br>", " ") == name
    assert shown.layout.xaxis.automargin is True and fig.data[0].name == name


def test_presenter_views_sidebar_lets_a_long_page_name_wrap():
    css = presenter._CSS
    assert '[data-testid="stSidebarNav"] a [data-testid="stMarkdownContainer"]' in css
    assert "min-width: 0" in css

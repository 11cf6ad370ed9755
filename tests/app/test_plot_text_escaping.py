"""User text in Plotly charts is escaped (app/kit/plot_text.py): a class label or token `<b>bold</b>` is shown as
typed, never bold, in fine-tuning's, Fill-mask's and Attributions' charts."""

from __future__ import annotations

import json

import numpy as np

BOLD = "<b>bold</b>"


def _json(fig) -> str:
    return json.dumps(fig.to_plotly_json(), default=str)


def test_finetune_confusion_and_try_chart_escape_class_labels():
    from types import SimpleNamespace

    from app.views.train.finetune_charts import confusion, try_chart

    res = SimpleNamespace(label_names=(BOLD, "plain"), confusion=[[1, 0], [0, 1]])
    for fig in (confusion(res), try_chart((BOLD, "plain"), [0.7, 0.3])):
        s = _json(fig)
        assert "&lt;b&gt;bold&lt;/b&gt;" in s and BOLD not in s


def test_fill_mask_and_attribution_charts_escape_tokens():
    from types import SimpleNamespace

    from app.views.inspect.attribution import bar_chart, methods_heatmap
    from app.views.predict.results import topk_bar

    cand = SimpleNamespace(piece=BOLD, prob=0.5, token_id=1)
    fig = topk_bar(SimpleNamespace(candidates=[cand], original=None, position=1), "mask")
    s = _json(fig)
    assert "&lt;b&gt;bold&lt;/b&gt;" in s and BOLD not in s
    m = SimpleNamespace(method="saliency", label="Saliency", scores=np.array([0.3, -0.1]))
    res = SimpleNamespace(tokens=(BOLD, "x"), labels=(BOLD, "x"), methods=[m], method=lambda name: m)
    for fig in (bar_chart(res, "saliency"), methods_heatmap(res)):
        s = _json(fig)
        assert "&lt;b&gt;bold&lt;/b&gt;" in s and BOLD not in s

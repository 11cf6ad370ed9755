"""What the Fill-mask page loads, so that its views (app/views/predict) only draw: the replaced-token tab's
discriminator and generator and their scores, and the 2-4 models of the comparison."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app.kit.i18n import t
from app.kit.loaders import get_model
from core.models.spec import ModelSpec
from core.predict.fill_mask import CompareResult, FillMaskConfig, compare
from core.predict.replaced_tokens import RTD_TASK, ReplacedTokensResult, score


def score_replaced(ask: Any) -> ReplacedTokensResult:
    """Load the discriminator (and the generator, if one is picked) that ``ask`` names (the tab's RtdAsk, from
    app.views.predict.fill_mask_widgets) and score its text; bad input says so before any load."""
    cfg = ask.config()
    d = get_model(ask.model_spec(ask.discriminator), RTD_TASK)
    g = get_model(ask.model_spec(ask.generator), "mlm") if ask.generator else None
    return score(d, cfg, generator=g)


def compare_models(specs: list[ModelSpec], text: str, top_k: int) -> CompareResult:
    """Load the 2-4 models of ``specs`` and run ``text`` through each; ValueError (said in the page) for another
    count or a bad text, before any load."""
    if not 2 <= len(specs) <= 4:
        raise ValueError(t("fill_mask.cmp_count", n=len(specs)))
    cfg = FillMaskConfig(text, top_k=top_k)
    models = [get_model(s, "mlm") for s in specs]
    with st.spinner(t("fill_mask.cmp_running")):
        return compare(models, cfg)

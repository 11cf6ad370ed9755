"""The app's one cache of computed results: the st.cache_data / st.cache_resource wrappers views call instead of
computing themselves (models and data sets load through app.kit.loaders). Each wrapper calls one core function;
the cache is process-wide, shared by every session (a result depends only on its inputs).

The Attention page's derivations (rollout and relevance, Q·K, word maps) are keyed by what the page's result was
made from, the model's spec and the AttentionConfig, and by the view's own choices; the result's arrays are passed
unhashed (a leading ``_``), so a rerun that changes nothing neither recomputes nor hashes megabytes."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import streamlit as st

from core.base.messages import carry
from core.inspect import attention as A
from core.inspect import attribution_inputs as AI
from core.inspect.attention_views import WordGroups, layer_map, word_groups
from core.inspect.value_zeroing import ValueZeroingResult, value_zeroing
from core.models.params import ParamBreakdown, breakdown
from core.models.spec import ModelSpec
from core.predict.fill_mask import FillMaskConfig, fill_mask_batch

TOP_FILLS_KEEP = 2000  # top predictions kept (model, text); a room keeps at most 300 sentences


@st.cache_data(max_entries=8, show_spinner=False)
def attention_flow(att: np.ndarray, rows: tuple[int, ...] | None) -> np.ndarray:
    """core.inspect.attention.flow for ``att`` (all rows, or only ``rows``)."""
    return A.flow(att, rows=None if rows is None else list(rows))


@st.cache_data(max_entries=8, show_spinner=False)
def attention_word_groups(_tokenizer, checkpoint: str, config: A.AttentionConfig) -> WordGroups:
    """core.inspect.attention_views.word_groups for one model (named by ``checkpoint``; the tokenizer is not hashed)."""
    return word_groups(_tokenizer, config)


@st.cache_data(max_entries=8, show_spinner=False)
def value_zeroing_of(_lm, spec: ModelSpec, config: A.AttentionConfig) -> ValueZeroingResult:
    """core.inspect.value_zeroing of ``config`` on one model (named by ``spec``; the loaded model is not hashed)."""
    return value_zeroing(_lm, config)


@st.cache_data(max_entries=16, show_spinner=False)
def attention_mixing(_att: np.ndarray, spec: ModelSpec, config: A.AttentionConfig, layer: int, index: int) -> A.Mixing:
    """core.inspect.attention.mixing (raw attention of ``layer``, rollout, their relevance for token ``index``) of
    the attentions ``_att`` that ``config`` gave on the model ``spec``."""
    return A.mixing(_att, layer, index)


@st.cache_data(max_entries=64, show_spinner=False)
def attention_qk(
    _queries: np.ndarray,
    _keys: np.ndarray,
    spec: ModelSpec,
    config: A.AttentionConfig,
    layer: int,
    head: int,
    index: int,
) -> A.QKView:
    """core.inspect.attention.qk_view of query token ``index`` in one head, from the queries and keys ``config``
    gave on the model ``spec``."""
    return A.qk_view(_queries, _keys, layer, head, index)


@st.cache_data(max_entries=32, show_spinner=False)
def attention_layer_map(
    _att: np.ndarray,
    _groups: WordGroups | None,
    spec: ModelSpec,
    config: A.AttentionConfig,
    layer: int,
    head: int | None,
    words: bool,
) -> np.ndarray:
    """core.inspect.attention_views.layer_map of the attentions ``config`` gave on the model ``spec``: one head of
    ``layer`` (None: their mean), per token, or with ``words`` per word of ``_groups`` (attention_word_groups of
    the same model and config). Raises ValueError (not cached) when the groups do not fit."""
    return layer_map(_att, layer, head, _groups if words else None)


@st.cache_data(show_spinner=False)
def param_breakdown(checkpoint_id: str) -> ParamBreakdown:
    """core.models.params.breakdown of a checkpoint (from its shipped config)."""
    return breakdown(checkpoint_id)


@st.cache_resource(show_spinner=False)
def _top_fills() -> tuple[OrderedDict, threading.Lock]:
    return OrderedDict(), threading.Lock()


def top_fills(lm, texts: list[str]) -> dict[str, tuple | str]:
    """Top prediction per text (cached per model and text): (filled text, top word, probability), or the reason
    the model cannot read it. One batched call (core.predict.fill_mask.fill_mask_batch) for the texts not seen yet."""
    cache, lock = _top_fills()
    with lock:
        found = {s: cache[(lm.spec, s)] for s in dict.fromkeys(texts) if (lm.spec, s) in cache}
    todo = [s for s in dict.fromkeys(texts) if s not in found]
    if todo:
        cfgs, bad = [], {}
        for s in todo:
            try:
                cfgs.append(FillMaskConfig(s, top_k=1))
            except ValueError as e:
                bad[s] = carry(e)
        try:
            results = fill_mask_batch(lm, cfgs)
        except ValueError as e:
            results = ()
            bad.update({c.text: carry(e) for c in cfgs})
        for c, r in zip(cfgs, results):
            top = r.masks[0].candidates[0] if r.masks and r.masks[0].candidates else None
            found[c.text] = (r.filled_text, top.text if top else "", top.prob if top else 0.0)
        found.update(bad)
        with lock:
            cache.update({(lm.spec, s): found[s] for s in todo})
            while len(cache) > TOP_FILLS_KEEP:
                cache.popitem(last=False)
    return {s: found[s] for s in texts}


@st.cache_data(max_entries=500, show_spinner=False)
def attribution_refusal(_lm, spec, cfg: AI.AttributionConfig) -> str | None:
    """Why Explain would refuse ``cfg`` on the model ``_lm`` (named by ``spec``; the model is not hashed), by
    core.inspect.attribution_inputs.prepare, the check it runs first (one forward pass), or None: computed once per
    model and settings, so the estimate beside Explain costs no forward pass on a rerun that changed something else
    (#46 §2: it ran one on every rerun)."""
    try:
        AI.prepare(_lm, cfg)
    except (ValueError, RuntimeError) as e:  # an input the model refuses: its reason
        return carry(e)
    return None

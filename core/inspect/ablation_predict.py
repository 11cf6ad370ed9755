"""Head ablation's predictions: recompute fill-mask top-k, the NSP/SOP probability or a fine-tuned classifier's
class with heads switched off (core.inspect.ablation's hooks), before and after, as one ``AblatedPrediction``.

Ablated forwards never go through core.runtime.serving (its batcher runs other sessions' calls on the leader
thread, where this context's ablation does not hold): the ablate_* functions call the batch functions directly.
"""

from __future__ import annotations

import threading
import time
import weakref
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.base.messages import msg
from core.base.text import display_piece, removed_note, strip_typed_specials
from core.inspect.ablation import AblationConfig, AblationError, Heads, ablated, layout
from core.models.loading import LoadedModel
from core.predict import sentence_pair as sp
from core.predict.classify import classify_now
from core.predict.fill_mask import check_mlm, fill_mask_batch
from core.runtime.backend import model_op


@dataclass(frozen=True)
class AblatedPrediction:
    kind: str  # "fill_mask" | "pair" | "classify"
    heads: Heads
    mode: str
    labels: tuple[str, ...]  # what is compared: fill-mask top-k words of the normal run (first mask), pair labels,
    # class names
    before: tuple[float, ...]  # probabilities of labels, normal forward
    after: tuple[float, ...]  # same labels, ablated forward
    answer_before: str  # top-1 of the normal run
    answer_after: str  # top-1 of the ablated run
    delta: float  # after - before for answer_before's probability
    after_top: tuple[tuple[str, float], ...]  # the ablated run's own top-k (fill-mask), else ()
    before_result: Any = None  # the full FillMaskResult / PairResult when there is one
    after_result: Any = None


def _check_heads(lm, ab: AblationConfig) -> None:
    if not isinstance(ab, AblationConfig):
        raise AblationError(msg("ablation.pass_ablationconfig_heads_mode"))
    lay = layout(lm.model)
    ab.check(lay.n_layers, lay.n_heads)


@model_op
def ablate_fill_mask(lm: LoadedModel, cfg, ab: AblationConfig, means: np.ndarray | None = None) -> AblatedPrediction:
    """Fill-mask (``cfg`` a core.predict.fill_mask.FillMaskConfig) before and after switching ``ab.heads`` off. labels are
    the normal run's top-k at the first mask; ``after`` their probabilities in the ablated run's distribution there
    (first pass, all masks open, as FillMaskResult shows them); ``after_top`` the ablated run's own top-k.
    Raises FillMaskError / AblationError (ValueErrors) with a message for the user."""
    import torch  # lazy: torch loads in seconds; importing this module (the page) does not need it

    check_mlm(lm)
    _check_heads(lm, ab)
    before = fill_mask_batch(lm, [cfg])[0]  # on this thread, never through the batcher (core.runtime.serving)
    dec = lm.model.get_output_embeddings()
    tap: list = []

    def record(mod, args):  # the decoder's input on the first pass: row 0 is the first mask
        if not tap:
            tap.append(args[0][:1].detach())
        return None

    # one ablated forward gives both the ablated FillMaskResult and (tapped at the decoder) the whole distribution
    # at the first mask, so the normal top-k's probabilities after ablation cost no second forward
    after = fill_ablated(lm, cfg, ab, means, dec, record) if dec is not None else None
    if after is None or not tap:
        with ablated(lm, ab, means):
            after = fill_mask_batch(lm, [cfg])[0]
        row = None
    else:
        with torch.inference_mode():
            row = torch.nn.functional.linear(tap[0].to(dec.weight.dtype), dec.weight, dec.bias).float().softmax(-1)[0]
    first_b, first_a = before.masks[0], after.masks[0]
    shown = {c.token_id: display_piece(c.piece, lm.tokenizer) for c in first_b.candidates + first_a.candidates}
    labels = tuple(shown[c.token_id] for c in first_b.candidates)  # as a person reads them (no Ġ/▁)
    before_p = tuple(c.prob for c in first_b.candidates)
    # the ablated run's own top-k where a word is in it (the very numbers its FillMaskResult shows), the tapped
    # distribution for the words that left it (0 when there was no decoder to tap)
    own = {c.token_id: c.prob for c in first_a.candidates}
    after_p = tuple(
        own[c.token_id] if c.token_id in own else float(row[c.token_id]) if row is not None else 0.0
        for c in first_b.candidates
    )
    return AblatedPrediction(
        kind="fill_mask",
        heads=ab.heads,
        mode=ab.mode,
        labels=labels,
        before=before_p,
        after=after_p,
        answer_before=labels[0],
        answer_after=shown[first_a.candidates[0].token_id],
        delta=after_p[0] - before_p[0],
        after_top=tuple((shown[c.token_id], c.prob) for c in first_a.candidates),
        before_result=before,
        after_result=after,
    )


_TAP_LOCK = threading.Lock()


_TAPS: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


_TAP: ContextVar[Any] = ContextVar("encoderlab_ablation_tap", default=None)


def _tap_hook(mod, args):
    fn = _TAP.get()
    if fn is not None:
        fn(mod, args)
    return None


def fill_ablated(lm, cfg, ab, means, dec, record):
    """The ablated fill-mask with the MLM decoder's first input recorded: one forward gives both the FillMaskResult
    and the full distribution at the first mask. The decoder's hook is installed once and gated like the head
    hooks, so other threads never record."""
    with _TAP_LOCK:
        if dec not in _TAPS:
            if _tap_hook not in dec._forward_pre_hooks.values():
                dec.register_forward_pre_hook(_tap_hook)
            _TAPS[dec] = True
    token = _TAP.set(record)
    try:
        with ablated(lm, ab, means):
            return fill_mask_batch(lm, [cfg])[0]
    finally:
        _TAP.reset(token)


def _pair_now(lm, cfg):
    """PairResult of (A, B) and (B, A) computed on this thread (core.predict.sentence_pair without its batcher)."""
    head = sp.check_pair(lm)
    t0 = time.perf_counter()
    a, found_a = strip_typed_specials(cfg.a)
    b, found_b = strip_typed_specials(cfg.b)
    if not a.strip() or not b.strip():
        raise sp.PairError(
            msg(
                "ablation.sentence_holds_only_special",
                sentence="A" if not a.strip() else "B",
                found=", ".join(found_a or found_b),
            )
        )
    notes = [removed_note(tuple(dict.fromkeys(found_a + found_b)), "the sentences")] if found_a or found_b else []
    pairs = [("(A, B)", a, b), ("(B, A)", b, a)]
    # score_pairs_now, not score_pairs: the batcher would run this call on another session's thread, where this
    # context's ablation does not hold
    probs, tokens, cut = sp.score_pairs_now(lm, [(f, s_) for _, f, s_ in pairs])
    scores = tuple(sp.PairScore(lbl, f, s_, p, t, c) for (lbl, f, s_), p, t, c in zip(pairs, probs, tokens, cut))
    return head, sp.PairResult(
        lm.spec.checkpoint,
        lm.spec.family,
        head.kind,
        head.prob_label,
        scores,
        (time.perf_counter() - t0) * 1000,
        tuple(notes),
    )


PAIR_LABELS = {"nsp": ("IsNext", "NotNext"), "sop": ("in order", "swapped")}


@model_op
def ablate_pair(lm: LoadedModel, cfg, ab: AblationConfig, means: np.ndarray | None = None) -> AblatedPrediction:
    """The NSP/SOP head on (A, B) (``cfg`` a core.predict.sentence_pair.PairConfig) before and after; labels are the
    head's two classes ("IsNext"/"NotNext", "in order"/"swapped"). before_result/after_result are PairResults of
    (A, B) and (B, A). Raises PairError for a family without a pair head (the message says why it has none)."""
    sp.check_pair(lm)
    _check_heads(lm, ab)
    head, before = _pair_now(lm, cfg)
    with ablated(lm, ab, means):
        _, after = _pair_now(lm, cfg)
    labels = PAIR_LABELS[head.kind]
    pb, pa = before.scores[0].prob, after.scores[0].prob
    bp, ap = (pb, 1 - pb), (pa, 1 - pa)
    ib, ia = (0 if pb >= 0.5 else 1), (0 if pa >= 0.5 else 1)
    return AblatedPrediction(
        kind="pair",
        heads=ab.heads,
        mode=ab.mode,
        labels=labels,
        before=bp,
        after=ap,
        answer_before=labels[ib],
        answer_after=labels[ia],
        delta=ap[ib] - bp[ib],
        after_top=(),
        before_result=before,
        after_result=after,
    )


@model_op
def ablate_classify(
    fm, text: str, text_b: str | None, ab: AblationConfig, means: np.ndarray | None = None
) -> AblatedPrediction:
    """A fine-tuned classifier's (core.predict.classify.FinetunedModel) class probabilities for ``text`` (and
    ``text_b`` for a pair task) before and after; labels are its class names. Raises AblationError for an empty text."""
    if not isinstance(text, str) or not text.strip():
        raise AblationError(msg("ablation.text_empty_write_sentence"))
    _check_heads(fm, ab)
    tb = None if text_b is None or not str(text_b).strip() else [text_b]
    # classify_now, not classify: the batcher would run this call on another thread (see the module docstring)
    before = classify_now(fm, [text], tb)[0]
    with ablated(fm, ab, means):
        after = classify_now(fm, [text], tb)[0]
    labels = tuple(fm.label_names)
    ib, ia = int(np.argmax(before)), int(np.argmax(after))
    return AblatedPrediction(
        kind="classify",
        heads=ab.heads,
        mode=ab.mode,
        labels=labels,
        before=tuple(float(x) for x in before),
        after=tuple(float(x) for x in after),
        answer_before=labels[ib],
        answer_after=labels[ia],
        delta=float(after[ib] - before[ib]),
        after_top=(),
    )

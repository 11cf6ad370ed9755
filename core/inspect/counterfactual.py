"""What would change the answer: counterfactuals written by the model's own masked LM.

For a classifier's class, an NSP/SOP decision or a [MASK]'s top word: the fewest word substitutions that flip the
prediction (goal "flip"), or that lower its probability most within the edit budget (goal "lower"). Words are tried
in attribution order (Occlusion, core.inspect.attribution, summed over each word's tokens), and for each the masked
LM proposes replacements in context (core.inspect.counterfactual_proposals): the model's own MLM for a [MASK] or a
pair, the bundled MLM of the classifier's family for a classifier (the page passes it in). A beam search keeps the
``beam`` edited texts with the lowest probability of the original answer after each round of one more edit.

Every counterfactual carries its edits (the diff), the new prediction and its probability, the probability left to
the original answer, and its fluency: the pseudo-log-likelihood under the proposing MLM against the original's.
The reference, LIT's HotFlip (a first-order swap from the classifier's own gradient), runs through the same search
with ``proposer="hotflip"``, so the two can be compared on flips found within a budget and fluency per flip
(bench/counterfactuals.py).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from core.base.messages import msg
from core.base.segment import word_spans
from core.base.text import display_piece, with_mask_token
from core.inspect import counterfactual_proposals as P
from core.inspect.attribution import attribute
from core.inspect.attribution_inputs import AttributionConfig, target_classes, target_logits
from core.models.spec import LoadedModel
from core.runtime.backend import model_op

TARGETS = ("class", "pair", "mask")
GOALS = ("flip", "lower")
PROPOSERS = ("mlm", "hotflip")
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class CounterfactualConfig:
    """What to change and how hard to search. ``__post_init__`` raises ValueError with the fix."""

    target: str = "class"
    text: str = ""
    text_b: str = ""  # the pair target's second sentence
    budget: int = 2  # edits at most (0 finds nothing)
    beam: int = 4  # edited texts kept after each round
    candidates: int = 8  # replacements proposed per word
    positions: int = 6  # words tried per round, in attribution order
    goal: str = "flip"
    proposer: str = "mlm"
    top: int = 10  # counterfactuals kept

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(msg("counterfactual.unknown_target", target=self.target, choices=", ".join(TARGETS)))
        if not self.text.strip() or (self.target == "pair" and not self.text_b.strip()):
            raise ValueError(msg("counterfactual.no_text_to_edit"))
        if self.goal not in GOALS or self.proposer not in PROPOSERS:
            raise ValueError(msg("counterfactual.unknown_goal_or_proposer", goal=self.goal, proposer=self.proposer))
        for name, low, high in (("budget", 0, 5), ("beam", 1, 16), ("candidates", 1, 32), ("positions", 1, 30)):
            value = getattr(self, name)
            if not low <= value <= high:
                raise ValueError(msg("counterfactual.setting_not_in_range", name=name, value=value, low=low, high=high))


@dataclass(frozen=True)
class Edit:
    part: int  # 0: the text, 1: the second sentence
    start: int  # the word's span in the ORIGINAL text
    end: int
    old: str
    new: str


@dataclass(frozen=True)
class Counterfactual:
    texts: tuple[str, ...]  # the edited text (and second sentence)
    edits: tuple[Edit, ...]
    prediction: str  # the new top answer (a Message for NSP/SOP)
    p_prediction: float
    p_original: float  # the probability left to the original answer
    flipped: bool
    pll: float  # fluency: pseudo-log-likelihood under the proposing MLM ...
    pll_original: float  # ... and the original text's

    @property
    def fluency_change(self) -> float:
        return self.pll - self.pll_original


@dataclass(frozen=True)
class CounterfactualResult:
    original: str  # the original answer (a Message for NSP/SOP) ...
    p_original: float  # ... and its probability
    texts: tuple[str, ...]
    words: tuple[tuple[int, int, int, str, float], ...]  # (part, start, end, word, attribution) in attribution order
    found: tuple[Counterfactual, ...]  # flips first (fewest edits, then lowest p_original), else the lowest
    evaluated: int  # edited texts scored
    proposer: str  # "mlm: <checkpoint>" or "hotflip"
    seconds: float
    budget: int
    goal: str


def apply(texts: tuple[str, ...], edits: tuple[Edit, ...]) -> tuple[str, ...]:
    """The texts with ``edits`` made (spans of the original texts; made right to left so they stay valid)."""
    out = list(texts)
    for e in sorted(edits, key=lambda e: (e.part, -e.start)):
        out[e.part] = out[e.part][: e.start] + e.new + out[e.part][e.end :]
    return tuple(out)


def _shift(texts_edits: tuple[Edit, ...], part: int, start: int) -> int:
    """Where an original offset lies once ``texts_edits`` (earlier in the same part) are made."""
    return start + sum(len(e.new) - len(e.old) for e in texts_edits if e.part == part and e.end <= start)


def answer_probs(lm: LoadedModel, target: str, rows: list[tuple[str, ...]]):
    """The answer distribution of each text: classes, NSP/SOP classes, or the vocabulary at the first mask."""
    import torch  # lazy: torch loads in seconds; the page's imports reach this module

    out = []
    with torch.no_grad():
        for begin in range(0, len(rows), 32):
            batch = P.encode_rows(lm, rows[begin : begin + 32])
            pos = None
            if target == "mask":
                pos = (batch["input_ids"] == lm.tokenizer.mask_token_id).int().argmax(1).tolist()
            logits = target_logits(lm.model, target, batch, pos)
            out.append(torch.softmax(logits.float(), -1).cpu().numpy())
    return np.concatenate(out)


def _label(lm: LoadedModel, target: str, index: int) -> str:
    if target == "mask":
        return display_piece(lm.tokenizer.convert_ids_to_tokens(int(index)), lm.tokenizer)
    if target == "pair":  # NSP/SOP's classes as a Message: the page names them in its language
        return msg(f"attribution.pair_class.{lm.family.pair_head}.{index}")
    names = target_classes(lm, target)
    return names[index] if index < len(names) else str(index)


def word_order(lm: LoadedModel, cfg: CounterfactualConfig, texts: tuple[str, ...], answer: int):
    """The words of the texts (jieba's 词 for Chinese), most important first: Occlusion's attribution of the answer,
    summed over each word's tokens. The mask itself is never a word to edit."""
    acfg = AttributionConfig(
        target=cfg.target,
        text=texts[0],
        text_b=texts[1] if len(texts) > 1 else "",
        methods=("occlusion",),
        class_index=answer if cfg.target != "mask" else 0,
        faithfulness=False,
    )
    res = attribute(lm, acfg)
    scores = res.methods[0].scores
    enc = lm.tokenizer(*texts, truncation=True, max_length=lm.max_tokens, return_offsets_mapping=True)
    offsets, seq_ids = enc["offset_mapping"], enc.sequence_ids(0)
    words = []
    mask = re.escape(lm.tokenizer.mask_token or "\x00")
    for part, text in enumerate(texts):
        masks = [m.span() for m in re.finditer(mask, text)]
        for start, end in word_spans(text):
            if any(s < end and start < e for s, e in masks):
                continue  # the letters inside "[MASK]" / "<mask>": the mask is never edited
            toks = [p for p, (s, e) in enumerate(offsets) if seq_ids[p] == part and s < end and e > start]
            if toks:
                words.append((part, start, end, text[start:end], float(sum(scores[p] for p in toks))))
    return sorted(words, key=lambda w: -w[4])


@model_op
def counterfactuals(
    lm: LoadedModel, cfg: CounterfactualConfig, mlm: LoadedModel | None = None, progress: Progress | None = None
) -> CounterfactualResult:
    """Search counterfactuals of ``cfg`` on ``lm``; ``mlm`` proposes the words and scores fluency (None: ``lm``
    itself, which has an MLM head for the mask and pair targets; a classifier searched with HotFlip and no MLM gets
    no fluency, NaN). ``progress(fraction, message)`` may raise to cancel."""
    report = progress or (lambda frac, message: None)
    t0 = time.perf_counter()
    proposer = mlm or lm
    if cfg.target == "class" and mlm is None and cfg.proposer == "mlm":
        raise ValueError(msg("counterfactual.no_mlm_to_propose_words"))
    fluency = mlm if mlm is not None or cfg.target == "class" else lm
    texts = tuple(
        with_mask_token(x, lm.tokenizer.mask_token)
        for x in ((cfg.text, cfg.text_b) if cfg.target == "pair" else (cfg.text,))
    )
    if cfg.target == "mask" and lm.tokenizer.mask_token not in texts[0]:
        raise ValueError(msg("counterfactual.no_mask_in_text", mask_token=lm.tokenizer.mask_token))
    if cfg.target == "pair" and lm.family.pair_head is None:
        raise ValueError(lm.family.pair_head_note)
    report(0.0, msg("progress.counterfactual.order"))
    probs = answer_probs(lm, cfg.target, [texts])[0]
    answer = int(probs.argmax())
    words = word_order(lm, cfg, texts, answer)
    tried = words[: cfg.positions]
    beam: list[tuple[Edit, ...]] = [()]
    scored: dict[tuple[str, ...], tuple[tuple[Edit, ...], np.ndarray]] = {}
    flips: list[tuple[Edit, ...]] = []
    for depth in range(1, cfg.budget + 1):
        report((depth - 1) / max(cfg.budget, 1), msg("progress.counterfactual.round", edits=depth, budget=cfg.budget))
        asks = [(edits, w) for edits in beam for w in tried if all((e.part, e.start) != (w[0], w[1]) for e in edits)]
        if not asks:
            break
        here = [apply(texts, edits) for edits, _ in asks]
        spans = [(w[0], _shift(edits, w[0], w[1]), _shift(edits, w[0], w[1]) + w[2] - w[1]) for edits, w in asks]
        if cfg.proposer == "hotflip":  # one gradient per distinct text: every word of a beam state from one backward
            proposals: list[list[str]] = [[] for _ in asks]
            for h in dict.fromkeys(here):
                at = [i for i, x in enumerate(here) if x == h]
                got = P.hotflip_proposals(lm, h, [spans[i] for i in at], answer, cfg.target, cfg.candidates)
                for i, cands in zip(at, got):
                    proposals[i] = cands
        else:
            proposals = P.mlm_proposals(proposer, here, spans, cfg.candidates)
        new: dict[tuple[str, ...], tuple[Edit, ...]] = {}  # by text: two orders of the same edits are one text
        for (edits, w), cands in zip(asks, proposals):
            for c in cands:
                e = edits + (Edit(w[0], w[1], w[2], w[3], c),)
                t = apply(texts, e)
                if t not in scored:
                    new.setdefault(t, e)
        if not new:
            break
        rows_new = list(new.items())
        p = answer_probs(lm, cfg.target, [t for t, _ in rows_new])
        for (t, e), row in zip(rows_new, p):
            scored[t] = (e, row)
        round_flips = [e for (t, e), row in zip(rows_new, p) if int(row.argmax()) != answer]
        flips += round_flips
        if round_flips and cfg.goal == "flip":
            break
        order = np.argsort([row[answer] for row in p], kind="stable")
        beam = [rows_new[i][1] for i in order[: cfg.beam]]
    report(0.95, msg("progress.counterfactual.fluency"))

    def p_left(e: tuple[Edit, ...]) -> float:
        return float(scored[apply(texts, e)][1][answer])

    if cfg.goal == "flip" and flips:  # the fewest edits that flip, then the lowest probability left
        chosen = sorted(flips, key=lambda e: (len(e), p_left(e)))[: cfg.top]
    else:  # the lowest probability left, however many edits it took (within the budget)
        chosen = sorted((e for e, _ in scored.values()), key=p_left)[: cfg.top]
    rows = [apply(texts, e) for e in chosen]
    pll = P.pseudo_log_likelihood(fluency, [texts] + rows)
    found = []
    for e, t, fl in zip(chosen, rows, pll[1:]):
        row = scored[t][1]
        top = int(row.argmax())
        found.append(
            Counterfactual(
                t,
                e,
                _label(lm, cfg.target, top),
                float(row[top]),
                float(row[answer]),
                top != answer,
                float(fl),
                float(pll[0]),
            )
        )
    report(1.0, msg("progress.done"))
    return CounterfactualResult(
        original=_label(lm, cfg.target, answer),
        p_original=float(probs[answer]),
        texts=texts,
        words=tuple(words),
        found=tuple(found),
        evaluated=len(scored),
        proposer="hotflip" if cfg.proposer == "hotflip" else f"mlm: {proposer.spec.checkpoint}",
        seconds=time.perf_counter() - t0,
        budget=cfg.budget,
        goal=cfg.goal,
    )

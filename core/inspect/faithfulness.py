"""How faithful an attribution is to the model: ERASER's comprehensiveness and sufficiency (DeYoung et al. 2020).

Remove the top-k% tokens an attribution ranks highest and see the explained probability fall (comprehensiveness:
p(x) - p(x without them), higher is more faithful); keep only those tokens and see it hold (sufficiency:
p(x) - p(only them), lower is more faithful). Both at 1, 5, 10, 20 and 50% of the tokens that can be removed, and
as AOPC, their mean over those levels. Each method is measured against two baselines on the same input: a random
ranking (the mean over several seeded permutations) and the method's own ranking reversed.

The probability is the softmax of what the attribution explains: the candidate word at the mask (for "A rather than
B", p(A) / (p(A) + p(B)): the sigmoid of the logit difference the map explains), the NSP/SOP class, the classifier's
class, or the word's predicted tag.

Removal, one rule documented here and shown on the page: every removed token becomes the tokenizer's mask token
("mask"), the token every family's masked-LM pretraining used for a token that is not there; a tokenizer without a
mask token has its tokens deleted instead ("delete"), and the page lets a user ask for deletion on any model. Special
tokens ([CLS], [SEP], the explained [MASK]) and the word whose tag is explained (every piece of it) are never removed.

Cost: every ranking's rows for one level go through the model in one batched forward (more only when the rows
exceed core.inspect.attribution_inputs.TOKEN_BUDGET); identical rows are run once. ferret and Interpreto compute
these metrics in notebooks; this module computes them from the ranks the attribution methods already produced,
on the shared model, with no hooks, so it runs beside every saliency map (core.inspect.attribution).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.base.messages import msg
from core.inspect.attribution_inputs import TOKEN_BUDGET, NotApplicable, Prepared, target_logits

LEVELS = (0.01, 0.05, 0.10, 0.20, 0.50)  # ERASER's bins
RANDOM_SEEDS = 5  # random rankings averaged for the random baseline
REMOVALS = ("mask", "delete")
RANDOM, REVERSED = "random", "reversed"


@dataclass(frozen=True)
class Curve:
    """One ranking's metrics: comprehensiveness and sufficiency per level (probability drops, in [-1, 1])."""

    key: str  # a method's key, or "random"
    comp: tuple[float, ...]
    suff: tuple[float, ...]

    @property
    def aopc_comp(self) -> float:
        return float(np.mean(self.comp))

    @property
    def aopc_suff(self) -> float:
        return float(np.mean(self.suff))


@dataclass(frozen=True)
class Faithfulness:
    """The metrics of every method of one attribution run, with the random and the reversed baselines."""

    levels: tuple[float, ...]
    ks: tuple[int, ...]  # tokens removed (or kept) at each level
    removable: int  # tokens that can be removed (not special, not the explained word)
    removal: str  # "mask" or "delete"
    p_x: float  # the explained probability on the whole input
    methods: tuple[Curve, ...]
    reversed: tuple[Curve, ...]  # each method's ranking reversed, in the order of ``methods``
    random: Curve  # the mean over ``seeds`` random rankings
    random_sd: Curve  # ... and their standard deviation across seeds
    seeds: int
    forwards: int  # batched forward calls made
    rows: int  # distinct rows they ran

    def method(self, key: str) -> Curve | None:
        return next((c for c in self.methods if c.key == key), None)

    def reversed_of(self, key: str) -> Curve | None:
        return next((c for c in self.reversed if c.key == key), None)


def default_removal(tokenizer) -> str:
    """The documented replacement: the mask token where the tokenizer has one, else deletion."""
    return "mask" if getattr(tokenizer, "mask_token_id", None) is not None else "delete"


def counts(levels: tuple[float, ...], removable: int) -> tuple[int, ...]:
    """Tokens per level: ceil(level x removable), at least 1 and at most all (a 12-token sentence still loses one
    token at 1%, where rounding down would remove nothing and make the smallest levels meaningless)."""
    return tuple(min(removable, max(1, math.ceil(level * removable - 1e-9))) for level in levels)


def planned_rows(methods: int, removable: int, levels: tuple[float, ...] = LEVELS, seeds: int = RANDOM_SEEDS) -> int:
    """At most how many rows ``measure`` runs: the whole input, then two per ranking (the method's own, reversed, and
    each random seed) for each distinct token count (identical rows, which chance makes, run once)."""
    return 1 + 2 * (2 * methods + seeds) * len(set(counts(levels, removable)))


def ranking(scores: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Positions of ``candidates`` from the highest score down (ties: the earlier position first)."""
    order = np.argsort(-np.asarray(scores, float)[candidates], kind="mergesort")
    return candidates[order]


def orderings(scores: dict[str, np.ndarray], candidates: np.ndarray, seeds: int, seed) -> dict[object, np.ndarray]:
    """Every ranking measured: each method's (by its key), each reversed ((REVERSED, key)) and ``seeds`` random
    permutations ((RANDOM, i)) drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    orders: dict[object, np.ndarray] = {key: ranking(s, candidates) for key, s in scores.items()}
    orders.update({(REVERSED, key): o[::-1] for key, o in list(orders.items())})
    orders.update({(RANDOM, i): rng.permutation(candidates) for i in range(seeds)})
    return orders


def cut(fixed: np.ndarray, order: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The two rows of one ranking at ``k`` tokens (True = kept): without its top ``k`` (comprehensiveness), and
    only them besides the ``fixed`` tokens (sufficiency)."""
    without = np.ones(len(fixed), bool)
    without[order[:k]] = False
    only = fixed.copy()
    only[order[:k]] = True
    return without, only


def _rows_of(lm, prep: Prepared, keeps: list[np.ndarray], removal: str):
    """The batch for ``keeps`` (one bool row per input over the tokens: True = kept) and each row's target position:
    removed tokens become the mask token, or are deleted (then the rows are right-padded)."""
    import torch  # lazy: torch loads in seconds; the page's imports reach this module

    ids = prep.ids[0]
    keep = torch.as_tensor(np.stack(keeps), device=ids.device)
    if removal == "mask":
        mask_id = lm.tokenizer.mask_token_id
        batch = {"input_ids": torch.where(keep, ids, torch.full_like(ids, mask_id))}
        batch.update({k: v.expand(len(keeps), -1) for k, v in prep.extra.items()})
        pos = [prep.target_pos] * len(keeps)
        return batch, pos
    lengths = keep.sum(1)
    width = int(lengths.max())
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0
    fields = {"input_ids": (ids, pad), **{k: (v[0], 0) for k, v in prep.extra.items()}}
    batch = {}
    for name, (row, fill) in fields.items():
        out = torch.full((len(keeps), width), fill, dtype=row.dtype, device=row.device)
        for r in range(len(keeps)):
            kept = row[keep[r]]
            out[r, : len(kept)] = kept
        batch[name] = out
    # ones over each row's kept tokens, zeros over its padding (whether or not the tokenizer returned a mask)
    batch["attention_mask"] = (torch.arange(width, device=ids.device)[None] < lengths[:, None]).long()
    tp = prep.target_pos
    pos = [None if tp is None else int(keep[r, :tp].sum()) for r in range(len(keeps))]
    return batch, pos


def probabilities(
    lm, prep: Prepared, keeps: list[np.ndarray], removal: str, calls: list[int] | None = None
) -> np.ndarray:
    """The explained probability of each row of ``keeps``, in batches within the token budget (each forward call
    appends its rows to ``calls``). For "A rather than B" it is p(A) / (p(A) + p(B)), the sigmoid of the logit
    difference the map explains."""
    import torch  # lazy: torch loads in seconds; the page's imports reach this module

    seq = prep.ids.shape[1]
    per_call = max(1, TOKEN_BUDGET // max(seq, 1))
    out = []
    with torch.no_grad():
        for start in range(0, len(keeps), per_call):
            batch, pos = _rows_of(lm, prep, keeps[start : start + per_call], removal)
            logits = target_logits(lm.model, prep.target, batch, pos)
            if logits is None:
                raise NotApplicable(msg("faithfulness.no_target_logits", target=prep.target))
            if calls is not None:
                calls.append(len(pos))
            a, b = prep.words if prep.target == "mask" else (prep.target_index, None)
            if b is not None:
                p = torch.sigmoid(logits[:, a].float() - logits[:, b].float())
            else:
                p = torch.softmax(logits.float(), -1)[:, prep.target_index]
            out.append(p.cpu().numpy())
    return np.concatenate(out).astype(np.float64)


def measure(
    lm,
    prep: Prepared,
    scores: dict[str, np.ndarray],
    removal: str = "",
    levels: tuple[float, ...] = LEVELS,
    seeds: int = RANDOM_SEEDS,
    seed: int | Sequence[int] = 0,
) -> Faithfulness:
    """Comprehensiveness and sufficiency of each method's ``scores`` (key -> one score per token of ``prep``), with
    ``seeds`` random rankings and each ranking reversed, at ``levels``. One batched forward per level (plus the
    whole input's row in the first). Raises ValueError for a removal that does not apply, NotApplicable when the
    input has no token to remove."""
    removal = removal or default_removal(lm.tokenizer)
    if removal not in REMOVALS:
        raise ValueError(msg("faithfulness.unknown_removal_use_one", removal=removal, choices=", ".join(REMOVALS)))
    if removal == "mask" and lm.tokenizer.mask_token_id is None:
        raise ValueError(msg("faithfulness.no_mask_token_to_remove_with"))
    seq = prep.ids.shape[1]
    fixed = prep.fixed if prep.fixed is not None else prep.special
    candidates = np.flatnonzero(~fixed)
    if len(candidates) == 0:
        raise NotApplicable(msg("faithfulness.no_tokens_to_remove"))
    ks = counts(levels, len(candidates))
    orders = orderings(scores, candidates, seeds, seed)

    whole = np.ones(seq, bool)
    p: dict[bytes, float] = {}
    calls: list[int] = []
    for li, k in enumerate(ks):
        wanted: dict[bytes, np.ndarray] = {}
        if li == 0:
            wanted[whole.tobytes()] = whole
        for order in orders.values():
            for row in cut(fixed, order, k):
                wanted.setdefault(row.tobytes(), row)
        todo = [b for b in wanted if b not in p]
        if todo:
            probs = probabilities(lm, prep, [wanted[b] for b in todo], removal, calls)
            p.update(zip(todo, probs.tolist()))
    p_x = p[whole.tobytes()]

    def curve(key: str, order: np.ndarray) -> Curve:
        comp, suff = [], []
        for k in ks:
            without, only = cut(fixed, order, k)
            comp.append(p_x - p[without.tobytes()])
            suff.append(p_x - p[only.tobytes()])
        return Curve(key, tuple(comp), tuple(suff))

    randoms = [curve(RANDOM, orders[(RANDOM, i)]) for i in range(seeds)]
    comp = np.array([c.comp for c in randoms])
    suff = np.array([c.suff for c in randoms])
    return Faithfulness(
        levels=tuple(levels),
        ks=ks,
        removable=len(candidates),
        removal=removal,
        p_x=p_x,
        methods=tuple(curve(key, orders[key]) for key in scores),
        reversed=tuple(curve(key, orders[(REVERSED, key)]) for key in scores),
        random=Curve(RANDOM, tuple(comp.mean(0)), tuple(suff.mean(0))),
        random_sd=Curve(RANDOM, tuple(comp.std(0)), tuple(suff.std(0))),
        seeds=seeds,
        forwards=len(calls),
        rows=len(p),
    )


# ---------------------------------------------------------------------------------------------- over many inputs
@dataclass(frozen=True)
class MethodRank:
    """One method's AOPCs averaged over the inputs of a batch, and its random baseline's on the same inputs."""

    key: str
    inputs: int
    comp: float
    comp_sd: float
    suff: float
    suff_sd: float
    random_comp: float
    random_suff: float


@dataclass(frozen=True)
class Ranking:
    methods: tuple[MethodRank, ...]  # in the order they were run
    most_comprehensive: str  # the highest mean comprehensiveness AOPC
    most_sufficient: str  # the lowest mean sufficiency AOPC
    inputs: int


def rank_methods(measured: list[Faithfulness]) -> Ranking:
    """Which method was the most comprehensive and which the most sufficient over these inputs (their mean AOPCs).
    Raises ValueError when no input was measured."""
    measured = [m for m in measured if m is not None]
    if not measured:
        raise ValueError(msg("faithfulness.no_measured_inputs_to_rank"))
    keys = [c.key for c in measured[0].methods]
    ranks = []
    for key in keys:
        rows = [(c, m.random) for m in measured if (c := m.method(key)) is not None]
        comp = np.array([c.aopc_comp for c, _ in rows])
        suff = np.array([c.aopc_suff for c, _ in rows])
        ranks.append(
            MethodRank(
                key,
                len(rows),
                float(comp.mean()),
                float(comp.std()),
                float(suff.mean()),
                float(suff.std()),
                float(np.mean([r.aopc_comp for _, r in rows])),
                float(np.mean([r.aopc_suff for _, r in rows])),
            )
        )
    return Ranking(
        tuple(ranks),
        max(ranks, key=lambda r: r.comp).key,
        min(ranks, key=lambda r: r.suff).key,
        len(measured),
    )

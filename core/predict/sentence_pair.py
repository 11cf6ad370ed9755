"""Sentence pairs: BERT's Next Sentence Prediction and ALBERT's Sentence Order Prediction heads.

Only the pooled [CLS] vector goes through the pair head (the MLM head is never run here). RoBERTa and
DistilBERT have no pair head; asking them raises PairError with the registry's explanation of why.
The probe scores (A, B), (B, A) and (A, a sentence on another topic): NSP mostly tells topics apart, SOP
needs the order.
"""

from __future__ import annotations

import csv
import io
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.base.messages import Problem, msg
from core.base.paths import ASSETS
from core.base.segment import han_words, has_han
from core.base.settings import current
from core.base.text import removed_note, strip_typed_specials
from core.models.loading import LoadedModel
from core.models.packed_linear import packed_forward
from core.registry import (
    FAMILIES,
    PAIR_HEADS,
    family,
    pair_head_module,
)
from core.registry import (
    PAIR_PROB_LABELS as PROB_LABELS,  # noqa: F401  (re-exported)
)
from core.runtime.backend import batched, model_op

MAX_CHARS = 5_000
MAX_ROWS = 500
CHUNK = 32
POSITIVE = {"1", "true", "yes", "isnext", "next", "in order", "ordered", "pos", "positive"}
NEGATIVE = {"0", "false", "no", "notnext", "random", "swapped", "reversed", "neg", "negative"}
_STOP = set(
    "the a an and or but of to in on at for with by from as is are was were be been it its this that "
    "these those he she they we you i his her their our my your them him us me not no so than then there "
    "has have had do does did will would can could all after before when while into over".split()
)

# Chinese function words (as jieba cuts them): they carry no topic
_STOP_ZH = set(
    "的 地 得 是 了 着 过 我 你 他 她 它 我们 你们 他们 她们 咱们 在 这 那 这个 那个 这里 那里 很 和 与 也 就 都 "
    "不 没 没有 有 一个 吗 呢 吧 啊 会 要 能 说 去 到 上 下 里 还 又 把 被 给 让 对 从 向 为 因为 所以 但是 如果".split()
)


class PairError(Problem, ValueError):
    """The pair task cannot run for this model or input; the message says why and what to do."""


# ---------------------------------------------------------------------------------------------- config / results
@dataclass(frozen=True)
class PairHead:
    kind: str | None  # "nsp", "sop" or None
    name: str
    prob_label: str
    note: str


@dataclass(frozen=True)
class PairConfig:
    """Two sentences: A comes first in the text, B is the candidate continuation."""

    a: str
    b: str
    seed: int = 0  # picks the other-topic sentence of the probe

    def __post_init__(self) -> None:
        limit = min(MAX_CHARS, current().max_text_chars)  # the server's limit (lower on the hosted demo)
        for name, s in (("A", self.a), ("B", self.b)):
            if not isinstance(s, str) or not s.strip():
                raise ValueError(msg("pair.sentence_empty_write_one", name=name))
            if len(s) > limit:
                raise ValueError(msg("pair.sentence_has_characters_limit", name=name, n_s=len(s), limit=limit))


@dataclass(frozen=True)
class PairScore:
    label: str  # "(A, B)", "(B, A)", "(A, other topic)"
    first: str
    second: str
    prob: float  # P(IsNext) for NSP, P(in order) for SOP
    tokens: tuple[str, ...]
    truncated: bool


@dataclass(frozen=True)
class PairResult:
    checkpoint: str
    family: str
    head: str  # "nsp" or "sop"
    prob_label: str
    scores: tuple[PairScore, ...]
    latency_ms: float
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PairRow:
    a: str
    b: str
    label: int  # 1 = B follows A (NSP) / in order (SOP)


@dataclass(frozen=True)
class BatchPairResult:
    checkpoint: str
    head: str
    prob_label: str
    rows: tuple[PairRow, ...]
    probs: tuple[float, ...]
    preds: tuple[int, ...]
    accuracy: float
    confusion: tuple[tuple[int, int], tuple[int, int]]  # [true label][predicted label], labels (0, 1)
    threshold: float
    latency_ms: float
    truncated_rows: int = 0
    notes: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------- heads
def pair_head(family_key: str) -> PairHead:
    """What the family's pair head is (from the registry), or kind None with the reason it has none."""
    fam = family(family_key)
    kind = fam.pair_head
    return PairHead(
        kind,
        PAIR_HEADS.get(kind, "none") if kind else "none",
        PROB_LABELS.get(kind, "") if kind else "",
        fam.pair_head_note,
    )


def check_pair(lm: LoadedModel) -> PairHead:
    """The head to use, or PairError: no pair head in the family, or its weights are not in the checkpoint."""
    head = pair_head(lm.spec.family)
    if head.kind is None:
        with_head = " or ".join(f"{f.label} ({f.pair_head.upper()})" for f in FAMILIES.values() if f.pair_head)
        raise PairError(msg("pair.pick_sidebar_score_sentence", note=head.note, with_head=with_head))
    if pair_head_module(lm.model) is None:
        raise PairError(msg("pair.no_pair_head", model_class=type(lm.model).__name__, name=head.name))
    missing = [k for k in lm.missing_keys if "seq_relationship" in k or "sop_classifier" in k]
    if missing:
        raise PairError(
            msg(
                "pair.saved_without_pair_head",
                checkpoint=lm.spec.checkpoint,
                name=head.name,
                missing=", ".join(missing),
            )
        )
    return head


Progress = Callable[..., None]  # progress(fraction, message); a job's ctx.progress also raises on Cancel


def score_pairs(
    lm: LoadedModel,
    pairs: Sequence[tuple[str, str]],
    progress: Progress | None = None,
) -> tuple[list[float], list[tuple[str, ...]], list[bool]]:
    """P(positive) of the pair head for each (first, second), batched; plus tokens and whether each was cut.

    Concurrent calls on the same model without a progress callback (one per session thread) run as one batch
    (core.runtime.serving). Raises PairError when the model has no usable pair head.
    """
    if progress is not None or not pairs:
        return _score_pairs_progress(lm, list(pairs), progress)

    return batched(lm, "score_pairs", _score_pairs_batch, list(pairs))


def _score_pairs_batch(lm: LoadedModel, groups: Sequence[Sequence[tuple[str, str]]]) -> list:
    """Several callers' pair lists as one scoring pass, split back into one (probs, tokens, cut) per caller."""
    probs, tokens, cut = score_pairs_now(lm, [p for g in groups for p in g])
    out, i = [], 0
    for g in groups:
        out.append((probs[i : i + len(g)], tokens[i : i + len(g)], cut[i : i + len(g)]))
        i += len(g)
    return out


@model_op
def _score_pairs_progress(
    lm: LoadedModel,
    pairs: list[tuple[str, str]],
    progress: Progress | None = None,
) -> tuple[list[float], list[tuple[str, ...]], list[bool]]:
    """A long pair batch (a job with progress and Cancel), where the backend keeps the model."""
    return score_pairs_now(lm, pairs, progress)


def score_pairs_now(
    lm: LoadedModel,
    pairs: Sequence[tuple[str, str]],
    progress: Progress | None = None,
) -> tuple[list[float], list[tuple[str, ...]], list[bool]]:
    import torch

    check_pair(lm)
    tok, model = lm.tokenizer, lm.model
    head = pair_head_module(model)
    assert head is not None  # check_pair raised for a model without its pair head module
    limit = lm.max_tokens
    probs: list[float] = []
    tokens: list[tuple[str, ...]] = []
    cut: list[bool] = []
    # the whole forward on packed linears (core.models.packed_linear: ~1.6x the default kernels on a short pair)
    with torch.inference_mode(), packed_forward(model):
        for i in range(0, len(pairs), CHUNK):
            chunk = pairs[i : i + CHUNK]
            firsts, seconds = [p[0] for p in chunk], [p[1] for p in chunk]
            full = tok(firsts, seconds)["input_ids"]
            enc = tok(firsts, seconds, truncation="longest_first", max_length=limit, padding=True, return_tensors="pt")
            kwargs = {
                k: v.to(lm.device) for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")
            }
            pooled = model.base_model(**kwargs).pooler_output  # (N, H): the [CLS] vector after the pooler
            p = head(pooled).float().softmax(-1)[:, 0]  # label 0 = IsNext (NSP) / in order (SOP)
            probs += p.tolist()
            for j, ids in enumerate(enc["input_ids"].tolist()):
                n = int(enc["attention_mask"][j].sum())
                tokens.append(tuple(tok.convert_ids_to_tokens(ids[:n])))
                cut.append(len(full[j]) > limit)
            if progress is not None:
                progress(len(probs) / len(pairs), msg("progress.pairs", done=len(probs), total=len(pairs)))
    return probs, tokens, cut


# ---------------------------------------------------------------------------------------------- probe
def _content_words(s: str) -> set[str]:
    """Lower-cased words that carry topic: Latin words of 3+ letters that are not stop words, and Chinese 词
    (jieba's, core.base.segment) that are not function words (_STOP_ZH). 公园 and 公共汽车 share a character but
    no word, so they are different topics."""
    latin = {w for w in re.findall(r"[a-z\u00c0-\u024f]+", s.lower()) if w not in _STOP and len(w) > 2}
    return latin | {s[a:b] for a, b in han_words(s) if s[a:b] not in _STOP_ZH}


def example_sentences(lang: str = "en") -> list[str]:
    """The plain example sentences of assets/examples/<lang>.txt (the probe's pool of other topics)."""
    path = ASSETS / "examples" / f"{lang}.txt"
    return [
        ln.strip()
        for ln in path.read_text(encoding="utf-8").splitlines()
        if ln.strip() and not ln.startswith("Example sentences")
    ]


def other_topic(a: str, b: str, seed: int = 0, pool: Sequence[str] | None = None) -> str:
    """A sentence from the examples that shares no content word with A or B (random among those, by seed)."""
    if pool is None:
        pool = [s for s in example_sentences("zh" if has_han(a) else "en")]
        if has_han(a):
            pool = [s for s in pool if has_han(s)]
        else:
            pool = [s for s in pool if not has_han(s)]
    used = _content_words(a) | _content_words(b)
    fresh = [s for s in pool if s.strip() not in (a.strip(), b.strip()) and not (_content_words(s) & used)]
    candidates = fresh or [s for s in pool if s.strip() not in (a.strip(), b.strip())]
    if not candidates:
        raise PairError(msg("pair.no_other_topic_example"))
    return random.Random(seed).choice(candidates)


def predict_pair(lm: LoadedModel, cfg: PairConfig, probe: bool = True) -> PairResult:
    """Score (A, B) and (B, A), and with ``probe`` also (A, a sentence on another topic), in one batch.

    Raises PairError for a family without a pair head (the message says why it has none).
    """
    head = check_pair(lm)
    t0 = time.perf_counter()
    a, found_a = strip_typed_specials(cfg.a)
    b, found_b = strip_typed_specials(cfg.b)
    if not a.strip() or not b.strip():
        raise PairError(
            msg(
                "pair.sentence_holds_only_special",
                sentence="A" if not a.strip() else "B",
                found=", ".join(found_a or found_b),
            )
        )
    notes = [removed_note(tuple(dict.fromkeys(found_a + found_b)), "the sentences")] if found_a or found_b else []
    pairs = [("(A, B)", a, b), ("(B, A)", b, a)]
    if probe:
        pairs.append(("(A, other topic)", a, other_topic(a, b, cfg.seed)))
    probs, tokens, cut = score_pairs(lm, [(f, s) for _, f, s in pairs])
    if any(cut):
        notes.append(msg("pair.pair_longer_than_tokens", max_tokens=lm.max_tokens, checkpoint=lm.spec.checkpoint))
    unk = lm.tokenizer.unk_token
    if any(unk in t for t in tokens):
        notes.append(msg("pair.some_characters_unknown_tokenizer", unk=unk))
    scores = tuple(PairScore(lbl, f, s, p, t, c) for (lbl, f, s), p, t, c in zip(pairs, probs, tokens, cut))
    assert head.kind is not None  # check_pair raised for a family without a pair head
    return PairResult(
        lm.spec.checkpoint,
        lm.spec.family,
        head.kind,
        head.prob_label,
        scores,
        (time.perf_counter() - t0) * 1000,
        tuple(notes),
    )


# ---------------------------------------------------------------------------------------------- batch
def parse_pairs_csv(text: str, max_rows: int = MAX_ROWS) -> tuple[PairRow, ...]:
    """Rows of a CSV with header a,b,label (label 1 = B follows A / in order, 0 = not).

    Raises ValueError naming the problem: no header, missing columns, too many rows, a bad label or an empty cell.
    """

    max_rows = min(max_rows, current().max_batch_rows)  # the server's limit (lower on the hosted demo)
    if not text or not text.strip():
        raise ValueError(msg("pair.csv_empty_paste_upload"))
    try:
        reader = csv.DictReader(io.StringIO(text.strip().lstrip("\ufeff")))
        header = [h.strip().lower() for h in (reader.fieldnames or [])]
    except csv.Error as e:
        raise ValueError(msg("pair.csv_cannot_read_use", error=e)) from e
    missing = [c for c in ("a", "b", "label") if c not in header]
    if missing:
        raise ValueError(msg("pair.csv_missing_columns", missing=", ".join(missing), found=", ".join(header) or "none"))
    rows: list[PairRow] = []
    for n, raw in enumerate(reader, start=2):
        rec = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items() if isinstance(v, str) or v is None}
        if not any(rec.values()):
            continue
        if len(rows) >= max_rows:
            raise ValueError(msg("pair.csv_has_more_than", max_rows=max_rows))
        if not rec.get("a") or not rec.get("b"):
            raise ValueError(msg("pair.line_sentence_empty_every", n=n, sentence="A" if not rec.get("a") else "B"))
        lab = rec.get("label", "").lower()
        if lab in POSITIVE:
            y = 1
        elif lab in NEGATIVE:
            y = 0
        else:
            raise ValueError(msg("pair.label_not_0_or_1", n=n, label=rec.get("label")))
        rows.append(PairRow(rec["a"], rec["b"], y))
    if not rows:
        raise ValueError(msg("pair.csv_no_rows"))
    return tuple(rows)


def score_batch(
    lm: LoadedModel, rows: Sequence[PairRow], threshold: float = 0.5, progress: Progress | None = None
) -> BatchPairResult:
    """Score labelled pairs in batches; accuracy and a confusion matrix against the labels.

    ``progress(fraction, message)`` is called after each chunk (a job's ctx.progress, which also stops on Cancel).
    Raises PairError when the model has no usable pair head, ValueError for a threshold outside (0, 1).
    """
    if not 0 < threshold < 1:
        raise ValueError(msg("pair.threshold_must_between_got", threshold=threshold))
    head = check_pair(lm)
    if not rows:
        raise ValueError(msg("pair.no_rows_to_score"))
    t0 = time.perf_counter()
    cleaned = [(strip_typed_specials(r.a), strip_typed_specials(r.b)) for r in rows]
    found = tuple(dict.fromkeys(tok for (_, fa), (_, fb) in cleaned for tok in fa + fb))
    probs, _, cut = score_pairs(lm, [(ca, cb) for (ca, _), (cb, _) in cleaned], progress)
    preds = [int(p >= threshold) for p in probs]
    cm = [[0, 0], [0, 0]]
    for r, p in zip(rows, preds):
        cm[r.label][p] += 1
    acc = sum(int(r.label == p) for r, p in zip(rows, preds)) / len(rows)
    assert head.kind is not None  # check_pair raised for a family without a pair head
    return BatchPairResult(
        lm.spec.checkpoint,
        head.kind,
        head.prob_label,
        tuple(rows),
        tuple(probs),
        tuple(preds),
        acc,
        ((cm[0][0], cm[0][1]), (cm[1][0], cm[1][1])),
        threshold,
        (time.perf_counter() - t0) * 1000,
        sum(cut),
        (removed_note(found, "the rows"),) if found else (),
    )

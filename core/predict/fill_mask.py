"""Fill-mask: predict the words behind [MASK] with any family's MLM head.

The user always writes ``[MASK]`` (``<mask>`` works too); it is mapped to the model's own mask token (the one
rule of every page, core.base.text.with_mask_token). The
encoder runs once over each batch (texts sorted by length, in chunks, so padding stays small); its last layer
and the MLM head run at the masked positions only (core/models/masked_forward.py), so the vocabulary projection
(hidden x vocab, the most expensive matmul of the head) is never computed for the other tokens. On CPU the
linears use oneDNN-packed weights (core/models/packed_linear.py). Several masks are filled independently (one pass) or
one at a time, most confident first (one pass per mask).
"""

from __future__ import annotations

import math
import re
import statistics
import time
import unicodedata
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace

from core import registry
from core.base import text as text_rules
from core.base.caches import register as register_cache
from core.base.messages import Items, Problem, msg
from core.base.paths import ASSETS
from core.base.segment import is_cjk, is_han, regroup
from core.base.settings import current
from core.models import loading as models
from core.models.loading import LoadedModel
from core.models.masked_forward import masked_logits
from core.runtime.backend import batched, model_op

USER_MASK = "[MASK]"
STRATEGIES = ("independent", "iterative")
MAX_TOP_K = 50
MAX_MASKS = 20
MAX_CHARS = 20_000
MAX_LINES = 64  # texts per batch from the page's "one text per line" mode
BATCH_CHUNK = 16  # texts per forward pass in a batch (sorted by length, so chunks carry little padding)
MASK_SHARE_WARN = 0.15  # BERT masked 15% of tokens in pretraining; more masks leave less context
TYPED_SPECIALS = text_rules.TYPED_SPECIALS  # typed ones are removed (the tokenizer adds the model's own)
WORD_START_PIECES = ("▁", "Ġ")  # SentencePiece / byte-level BPE word-start markers standing alone
_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]|[^\W_]+(?:['’][^\W_]+)*")


class FillMaskError(Problem, ValueError):
    """The input or the checkpoint cannot be used for fill-mask; the message names the problem and the fix."""


# ---------------------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class FillMaskConfig:
    """What to predict. ``word`` (an index into ``words(text)``) masks that whole word instead of [MASK]s."""

    text: str
    top_k: int = 5
    strategy: str = "independent"
    word: int | None = None
    max_masks: int = MAX_MASKS

    def __post_init__(self) -> None:
        if not isinstance(self.top_k, int) or not 1 <= self.top_k <= MAX_TOP_K:
            raise ValueError(msg("fill_mask.top_k_must_whole", max_top_k=MAX_TOP_K, top_k=self.top_k))
        if self.strategy not in STRATEGIES:
            raise ValueError(
                msg("fill_mask.unknown_fill_strategy_use", strategy=self.strategy, choices=", ".join(STRATEGIES))
            )
        text_rules.check_text(
            self.text, max_chars=MAX_CHARS, empty_hint=msg("fill_mask.hint_empty"), long_hint=msg("fill_mask.hint_long")
        )
        n = count_masks(self.text)
        if self.word is not None:
            if n:
                raise ValueError(msg("fill_mask.mask_word_works_plain"))
            ws = words(self.text)
            if not ws:
                raise ValueError(msg("fill_mask.no_words_to_mask"))
            if not 0 <= self.word < len(ws):
                raise ValueError(msg("fill_mask.no_such_word", word=self.word, n_ws=len(ws)))
            return
        if n == 0:
            raise ValueError(msg("fill_mask.no_mask_in_text"))
        if n > self.max_masks:
            raise ValueError(msg("fill_mask.too_many_masks_little_context", n=n, max_masks=self.max_masks))
        if not any(ch.isalnum() for ch in text_rules.MASK_PATTERN.sub(" ", self.text)):
            raise ValueError(msg("fill_mask.only_masks_no_context"))


# ---------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Candidate:
    token_id: int
    piece: str  # the tokenizer's own piece: '##ing', 'Ġthe', '▁the'
    text: str  # the piece decoded to plain text
    prob: float


@dataclass(frozen=True)
class MaskPrediction:
    position: int  # index into FillMaskResult.tokens
    candidates: tuple[Candidate, ...]  # top-k of this mask's own distribution (first pass, all masks open)
    entropy: float  # nats
    original: Candidate | None = None  # whole-word mode: the piece that was masked, with its probability
    original_rank: int | None = None  # 0 = the model's first choice


@dataclass(frozen=True)
class FillMaskResult:
    """One text through one model: tokenization, each mask's top-k, and the joint fill."""

    checkpoint: str
    family: str
    text: str  # as the user wrote it
    model_text: str  # with the model's mask token, typed special tokens removed
    tokens: tuple[str, ...]  # pieces the model read, special tokens included
    mask_positions: tuple[int, ...]
    masks: tuple[MaskPrediction, ...]
    strategy: str
    fill_order: tuple[int, ...]  # indices into masks, in the order they were filled
    fill_pieces: tuple[str, ...]  # chosen piece per mask (same order as masks)
    fill_probs: tuple[float, ...]  # probability of the chosen piece when it was chosen (same order as masks)
    filled_text: str
    joint_log_prob: float
    latency_ms: float
    notes: tuple[str, ...] = ()
    truncation: str | None = None
    masked_word: str | None = None
    batch_size: int = 1  # texts run together; latency_ms is then this text's share of the batch's time

    @property
    def joint_prob(self) -> float:
        return math.exp(self.joint_log_prob)


@dataclass(frozen=True)
class CompareResult:
    results: tuple[FillMaskResult, ...]  # latency_ms: the median of the warm calls
    first_ms: tuple[float, ...] = ()  # per model, the first call's time (one-time costs included), out of the median
    repeats: int = 1  # warm calls per model that the median is taken over


@dataclass(frozen=True)
class Word:
    text: str
    start: int
    end: int


# ---------------------------------------------------------------------------------------------- text helpers
def examples(lang: str = "en") -> list[str]:
    """Example sentences with [MASK] shipped in assets/examples/fill_mask_<lang>.txt (empty list if none)."""
    path = ASSETS / "examples" / f"fill_mask_{lang}.txt"
    if not path.exists():
        return []
    return [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def count_masks(text: str) -> int:
    """How many [MASK] / <mask> markers the user wrote (any case)."""
    return len(text_rules.MASK_PATTERN.findall(text))


def words(text: str) -> tuple[Word, ...]:
    """The words a user can pick for whole-word masking: letters/digits; Chinese 词 from the segmenter
    (core.base.segment: 中国, 首都, 北京); each other CJK character (kana, hangul) a word."""
    return tuple(Word(text[a:b], a, b) for a, b in regroup(text, [m.span() for m in _WORD.finditer(text)]))


def to_model_text(text: str, mask_token: str) -> tuple[str, tuple[str, ...]]:
    """Map [MASK]/<mask> to ``mask_token`` and drop typed special tokens; returns (text, notes)."""
    notes: list[str] = []
    text, found = text_rules.strip_typed_specials(text)
    if found:
        notes.append(msg("fill_mask.removed_specials", removed=text_rules.removed_note(found)))
    return text_rules.with_mask_token(text, mask_token), tuple(notes)


HAN_VOCAB = 2500  # Han pieces a Chinese vocabulary holds at least (the 2,500 common characters; bert-base-uncased: 488)
# tokenizer -> its Han pieces; weak keys: an entry goes with its tokenizer (an id() key could be reused by another)
_HAN_PIECES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
register_cache(f"{__name__}.han_pieces", _HAN_PIECES.clear)


def _han_pieces(tok) -> int:
    try:
        return _HAN_PIECES[tok]
    except (KeyError, TypeError):
        pass
    vocab: dict[str, int] = getattr(tok, "get_vocab", dict)()
    n = sum(1 for p in vocab if (w := p.lstrip("#▁Ġ")) and all(is_han(c) for c in w))
    try:
        _HAN_PIECES[tok] = n
    except TypeError:  # not weak-referenceable: counted again next time
        pass
    return n


def reads_cjk(checkpoint: str, text: str, pieces: Sequence[str], offsets: Sequence[tuple[int, int]], tok) -> bool:
    """Whether the model reads the CJK characters of ``text`` as text: a checkpoint the registry knows by its language
    (zh or multi: the bundled XLM-R, bert-base-chinese, hfl's...; en: the minis); any other by its tokenizer, which
    must keep every CJK character inside a piece of its own text (not [UNK], not a byte-level piece) and hold a
    Chinese vocabulary (HAN_VOCAB pieces: bert-base-uncased's few hundred characters are not one)."""
    lang = registry.language_of(checkpoint)
    if lang is not None:
        return lang in registry.CHINESE_LANGUAGES
    unk = getattr(tok, "unk_token", None)
    for i, c in enumerate(text):
        if is_cjk(c) and not any(s <= i < e and p != unk and c in p for p, (s, e) in zip(pieces, offsets)):
            return False
    return _han_pieces(tok) >= HAN_VOCAB


def _script_notes(
    text: str, pieces: Sequence[str], offsets: Sequence[tuple[int, int]], tok, checkpoint: str = ""
) -> list[str]:
    """Say what the tokenizer did with emoji, CJK (unless the model reads it: ``reads_cjk``), right-to-left and
    combining characters."""
    notes: list[str] = []
    unk = tok.unk_token
    lost = sorted({text[s:e] for p, (s, e) in zip(pieces, offsets) if p == unk and e > s})
    if lost:
        notes.append(
            msg("fill_mask.note_unknown_pieces", n=len(lost), unk=unk, pieces=" ".join(repr(x) for x in lost[:10]))
        )
    emoji = [c for c in text if unicodedata.category(c) == "So"]
    if emoji and not lost:
        n = sum(1 for p, (s, e) in zip(pieces, offsets) if any(unicodedata.category(c) == "So" for c in text[s:e]))
        notes.append(msg("fill_mask.note_emoji", emoji="".join(dict.fromkeys(emoji)), n=n))
    if any(is_cjk(c) for c in text) and not reads_cjk(checkpoint, text, pieces, offsets, tok):
        notes.append(msg("fill_mask.note_cjk"))
    if any(unicodedata.bidirectional(c) in ("R", "AL") for c in text):
        notes.append(msg("fill_mask.note_rtl"))
    if any(unicodedata.combining(c) for c in text):
        nfc = unicodedata.normalize("NFC", text)
        norm = getattr(getattr(tok, "backend_tokenizer", None), "normalizer", None)
        seen = norm.normalize_str(text) if norm is not None else text
        stripped = not any(unicodedata.combining(c) for c in unicodedata.normalize("NFD", seen))
        notes.append(
            msg("fill_mask.note_combining_stripped")
            if stripped
            else msg("fill_mask.note_combining_kept_nfc" if nfc != text else "fill_mask.note_combining_kept")
        )
    return notes


# ---------------------------------------------------------------------------------------------- model helpers
def mlm_head(model) -> registry.MlmHead:
    """The MLM head as a function hidden (M, H) -> logits (M, V); raises FillMaskError when there is none."""
    head = registry.mlm_head(model)
    if head is not None:
        return head
    raise FillMaskError(msg("fill_mask.no_mlm_head", model_class=type(model).__name__))


def check_mlm(lm: LoadedModel) -> None:
    """Raise FillMaskError when the checkpoint cannot fill masks (no MLM head, or its weights are missing)."""
    mlm_head(lm.model)
    if lm.tokenizer.mask_token is None or lm.tokenizer.mask_token_id is None:
        raise FillMaskError(msg("fill_mask.no_mask_token", checkpoint=lm.spec.checkpoint))
    if lm.head_missing:
        missing = ", ".join(k for k in lm.missing_keys[:4])
        raise FillMaskError(
            msg(
                "fill_mask.no_trained_mlm_head",
                checkpoint=lm.spec.checkpoint,
                missing=missing,
                saved_as=_saved_as(lm),
                suggestion=_mlm_suggestion(lm.spec.family),
            )
        )


def _saved_as(lm: LoadedModel) -> str:
    """What a checkpoint without an MLM head is, from the architecture its config.json names."""
    arch = next(iter(getattr(lm.model.config, "architectures", None) or ()), "")
    for suffix, what in (
        ("ForSequenceClassification", "a fine-tuned classifier"),
        ("ForTokenClassification", "a fine-tuned token classifier"),
        ("ForQuestionAnswering", "a fine-tuned question-answering model"),
        ("ForMultipleChoice", "a fine-tuned multiple-choice model"),
    ):
        if arch.endswith(suffix):
            return msg("fill_mask.saved_with_task_head", what=what, arch=arch)
    if arch:
        return msg("fill_mask.saved_without_mlm_head", arch=arch)
    return "it was saved without its masked-language-model head (e.g. a sentence-embedding model)"


def _mlm_suggestion(family: str) -> str:
    """Checkpoints with an MLM head that can be had here: the family's bundled mini, and official ones present."""
    fam = registry.family(family)
    present = [c.id for c in fam.checkpoints if models.resolve(c.id).source != models.Source.UNAVAILABLE]
    ids = ([registry.bundled_id(family)] if fam.bundled else []) + present[:1]
    if not ids:
        return "a checkpoint saved with its MLM head (its *ForMaskedLM or *ForPreTraining model), typed under custom"
    return " or ".join(ids) + " (in the sidebar's Checkpoint list)"


@dataclass(frozen=True)
class Encoded:
    """One text ready for the model: ids with special tokens, where the masks are, and what was changed."""

    ids: tuple[int, ...]  # with special tokens
    mask_positions: tuple[int, ...]
    model_text: str
    notes: tuple[str, ...]
    truncation: str | None
    originals: tuple[int, ...] | None  # whole-word mode: the ids that were masked
    masked_word: str | None


def _window(n: int, cap: int, lo: int, hi: int) -> int:
    """Start of a ``cap``-token window over ``n`` tokens holding positions lo..hi, centred on them."""
    start = (lo + hi) // 2 - cap // 2
    return max(max(0, hi - cap + 1), min(start, lo, n - cap))


def encode(lm: LoadedModel, cfg: FillMaskConfig) -> Encoded:
    """Tokenize, map the masks, fit the model's window. Raises FillMaskError for input it cannot use."""
    tok = lm.tokenizer
    mask_id = tok.mask_token_id
    if cfg.word is None:
        model_text, text_notes = to_model_text(cfg.text, tok.mask_token)
        if not any(ch.isalnum() for ch in text_rules.MASK_PATTERN.sub(" ", model_text.replace(tok.mask_token, " "))):
            raise FillMaskError(msg("fill_mask.only_masks_without_specials"))
    else:
        model_text, text_notes = to_model_text(cfg.text, tok.mask_token)
        if text_notes:
            raise FillMaskError(msg("fill_mask.mask_word_needs_plain"))
    enc = tok(model_text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]
    pieces = tok.convert_ids_to_tokens(ids)
    notes = list(text_notes) + _script_notes(model_text, pieces, offsets, tok, lm.spec.checkpoint)
    originals, masked_word = None, None
    if cfg.word is not None:
        w = words(model_text)[cfg.word]
        pos = [i for i, (s, e) in enumerate(offsets) if s < w.end and e > w.start]
        if not pos:
            raise FillMaskError(msg("fill_mask.word_has_no_tokens", text=w.text))
        if pos[0] > 0 and pieces[pos[0] - 1] in WORD_START_PIECES:  # a lone ▁/Ġ opens this word: it is part of it
            pos.insert(0, pos[0] - 1)
        if len(pos) > cfg.max_masks:
            raise FillMaskError(
                msg("fill_mask.word_too_many_tokens", text=w.text, n_pos=len(pos), max_masks=cfg.max_masks)
            )
        originals = tuple(ids[i] for i in pos)
        for i in pos:
            ids[i] = mask_id
        masked_word = w.text
        # A piece that reaches past the word (XLM-R's "的水" for 水果 in 我喜欢吃的水果) masks its neighbour too: say so
        spill = (
            model_text[min(offsets[i][0] for i in pos) : w.start] + model_text[w.end : max(offsets[i][1] for i in pos)]
        )
        if spill.strip():
            spanned = Items(
                model_text[offsets[i][0] : offsets[i][1]]
                for i in pos
                if offsets[i][0] < w.start or offsets[i][1] > w.end
            )
            notes.append(msg("fill_mask.note_mask_spills", word=w.text, pieces=spanned, extra=spill.strip()))
    positions = [i for i, t in enumerate(ids) if t == mask_id]
    if not positions:
        raise FillMaskError(msg("fill_mask.no_mask_after_tokenizing"))
    if cfg.word is None and len(positions) > cfg.max_masks:
        raise FillMaskError(msg("fill_mask.too_many_masks", n_positions=len(positions), max_masks=cfg.max_masks))
    if len(positions) >= 3 and len(positions) / len(ids) > MASK_SHARE_WARN:
        notes.append(
            msg("fill_mask.note_many_masks", n=len(positions), total=len(ids), share=len(positions) / len(ids))
        )
    cap = lm.max_tokens - 2
    truncation = None
    if len(ids) > cap:
        lo, hi = positions[0], positions[-1]
        if hi - lo + 1 > cap:
            raise FillMaskError(
                msg(
                    "fill_mask.masks_span_too_wide",
                    n_span=hi - lo + 1,
                    checkpoint=lm.spec.checkpoint,
                    max_tokens=cap + 2,
                )
            )
        start = _window(len(ids), cap, lo, hi)
        cut_end = len(ids) - (start + cap)
        truncation = msg(
            "fill_mask.text_cut_to_window",
            n_ids=len(ids),
            checkpoint=lm.spec.checkpoint,
            max_tokens=cap + 2,
            first_kept=start + 1,
            last_kept=start + cap,
            start=start,
            cut_end=cut_end,
        )
        ids = ids[start : start + cap]
        positions = [p - start for p in positions]
    ids = [tok.cls_token_id] + ids + [tok.sep_token_id]
    return Encoded(
        tuple(ids), tuple(p + 1 for p in positions), model_text, tuple(notes), truncation, originals, masked_word
    )


# ---------------------------------------------------------------------------------------------- prediction
def _pad(rows: list[list[int]], pad_id: int, device: str):
    import torch

    t = max(len(r) for r in rows)
    ids = torch.full((len(rows), t), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rows), t), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        attn[i, : len(r)] = 1
    if len({len(r) for r in rows}) == 1:
        return ids.to(device), None  # nothing padded: the encoder can skip the attention mask
    return ids.to(device), attn.to(device)


def lone_marker_ids(tok) -> list[int]:
    """Ids of the word-start markers standing alone ("▁", "Ġ") in this vocabulary."""
    ids = tok.convert_tokens_to_ids(list(WORD_START_PIECES))
    return sorted({i for i in ids if i is not None and i != tok.unk_token_id})


def _candidates(tok, probs_row, k: int) -> tuple[Candidate, ...]:
    import torch

    p, i = torch.topk(probs_row, k)
    ids = i.tolist()
    pieces = tok.convert_ids_to_tokens(ids)
    return tuple(Candidate(t, pc, tok.decode([t]).strip(), float(pv)) for t, pc, pv in zip(ids, pieces, p.tolist()))


def _fill_step(
    model, head, tok, pad_id, device, chunk, step, encs, configs, rows, open_masks, first, chosen, order
) -> None:
    """One forward over the texts in ``chunk``: record first-pass distributions, fill the chosen masks."""
    import torch

    ids, attn = _pad([rows[b] for b in chunk], pad_id, device)
    r_idx = [i for i, b in enumerate(chunk) for _ in open_masks[b]]
    c_idx = [encs[b].mask_positions[m] for b in chunk for m in open_masks[b]]
    # the encoder over the batch (its last layer at the masks only), then the MLM head there only: (M, V)
    logits = masked_logits(
        model, head, ids, attn, torch.tensor(r_idx, device=device), torch.tensor(c_idx, device=device)
    )
    probs = logits.float().softmax(-1)  # (M, V)
    lone = lone_marker_ids(tok)
    text_of_row = [b for b in chunk for _ in open_masks[b]]
    typed = [i for i, b in enumerate(text_of_row) if encs[b].originals is None]
    if lone and typed:
        # A typed [MASK] stands for a whole word (ALBERT's tokenizer makes it one piece): a bare "▁"/"Ġ" there is
        # a word start with no word, never an answer, so it is neither offered nor filled in. The other pieces keep
        # the model's own probabilities (not renormalised). Whole-word masks keep it: there a lone marker is one
        # of the word's own pieces.
        rows_t = torch.tensor(typed, device=probs.device)
        probs[rows_t[:, None], torch.tensor(lone, device=probs.device)[None, :]] = 0.0
    top_p, top_i = probs.max(-1)
    if step == 0:  # each mask's own distribution, all masks open
        ent = -(probs * probs.clamp_min(1e-12).log()).sum(-1)
    r = 0
    for b in chunk:
        e, c, opened = encs[b], configs[b], open_masks[b]
        if step == 0:
            for j, m in enumerate(opened):
                orig, rank = None, None
                if e.originals is not None:
                    oid, po = e.originals[m], probs[r + j, e.originals[m]]
                    rank = int((probs[r + j] > po).sum())
                    orig = Candidate(oid, tok.convert_ids_to_tokens(oid), tok.decode([oid]).strip(), float(po))
                first[b].append(
                    MaskPrediction(
                        e.mask_positions[m], _candidates(tok, probs[r + j], c.top_k), float(ent[r + j]), orig, rank
                    )
                )
        # independent: take every mask's first choice; iterative: only the most confident open mask
        picks = (
            range(len(opened))
            if c.strategy == "independent"
            else [max(range(len(opened)), key=lambda j: float(top_p[r + j]))]
        )
        for j in picks:
            m = opened[j]
            chosen[b][m] = (int(top_i[r + j]), float(top_p[r + j]))
            order[b].append(m)
            rows[b][e.mask_positions[m]] = chosen[b][m][0]
        r += len(opened)
        open_masks[b] = [m for m in opened if m not in chosen[b]]


@model_op
def fill_mask_batch(lm: LoadedModel, configs: Sequence[FillMaskConfig]) -> tuple[FillMaskResult, ...]:
    """Fill the masks of several texts with one model, batched: per fill step, one forward per chunk of
    BATCH_CHUNK texts of similar length.

    Returns one FillMaskResult per config. Raises FillMaskError for a checkpoint without an MLM head or for
    input the model cannot read (the message says why and what to do).
    """

    import torch

    if not configs:
        return ()
    check_mlm(lm)
    t0 = time.perf_counter()
    tok, model = lm.tokenizer, lm.model
    head = mlm_head(model)
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    encs = [encode(lm, c) for c in configs]
    rows = [list(e.ids) for e in encs]
    open_masks = [list(range(len(e.mask_positions))) for e in encs]  # per text: mask indices not yet filled
    first: list[list[MaskPrediction]] = [[] for _ in encs]
    chosen: list[dict[int, tuple[int, float]]] = [{} for _ in encs]  # mask index -> (token id, prob)
    order: list[list[int]] = [[] for _ in encs]
    active = list(range(len(encs)))
    step = 0
    with torch.inference_mode():
        while active:
            # similar lengths together, so little compute goes to padding
            by_len = sorted(active, key=lambda b: len(rows[b]))
            for chunk in (by_len[i : i + BATCH_CHUNK] for i in range(0, len(by_len), BATCH_CHUNK)):
                _fill_step(
                    model,
                    head,
                    tok,
                    pad_id,
                    lm.device,
                    chunk,
                    step,
                    encs,
                    configs,
                    rows,
                    open_masks,
                    first,
                    chosen,
                    order,
                )
            active = [b for b in active if open_masks[b]]
            step += 1
    elapsed = (time.perf_counter() - t0) * 1000 / len(encs)
    out = []
    for b, (e, c) in enumerate(zip(encs, configs)):
        fill_ids = [chosen[b][m][0] for m in range(len(e.mask_positions))]
        fill_p = tuple(chosen[b][m][1] for m in range(len(e.mask_positions)))
        out.append(
            FillMaskResult(
                checkpoint=lm.spec.checkpoint,
                family=lm.spec.family,
                text=c.text,
                model_text=e.model_text,
                tokens=tuple(tok.convert_ids_to_tokens(list(e.ids))),
                mask_positions=e.mask_positions,
                masks=tuple(first[b]),
                strategy=c.strategy,
                fill_order=tuple(order[b]),
                fill_pieces=tuple(tok.convert_ids_to_tokens(fill_ids)),
                fill_probs=fill_p,
                filled_text=tok.decode(rows[b][1:-1], skip_special_tokens=False).strip(),
                joint_log_prob=float(sum(math.log(max(p, 1e-300)) for p in fill_p)),
                latency_ms=elapsed,
                notes=e.notes,
                truncation=e.truncation,
                masked_word=e.masked_word,
                batch_size=len(encs),
            )
        )
    return tuple(out)


def configs_from_lines(
    text: str, top_k: int = 5, strategy: str = "independent", max_lines: int = MAX_LINES
) -> list[FillMaskConfig]:
    """One FillMaskConfig per non-empty line (to be run as one batch); ValueError names the line at fault."""
    lines = [(i, ln) for i, ln in enumerate((text or "").splitlines(), start=1) if ln.strip()]
    if not lines:
        raise ValueError(msg("fill_mask.text_empty_write_one"))

    max_lines = min(max_lines, current().max_batch_rows)  # the server's limit (lower on the hosted demo)
    if len(lines) > max_lines:
        raise ValueError(msg("fill_mask.too_many_lines", n_lines=len(lines), max_lines=max_lines))
    out = []
    for i, ln in lines:
        try:
            out.append(FillMaskConfig(ln, top_k=top_k, strategy=strategy))
        except ValueError as e:
            raise ValueError(msg("fill_mask.line", line=i, error=e)) from None
    return out


def fill_mask(lm: LoadedModel, cfg: FillMaskConfig) -> FillMaskResult:
    """Fill the masks of one text. Raises FillMaskError (a ValueError) with a message for the user.

    Concurrent calls on the same model (one per Streamlit session thread) run as one batch (core.runtime.backend: here
    core.runtime.serving, on Ray the model's Serve deployment); the result is this text's alone, with its own wall time as the latency.
    """

    t0 = time.perf_counter()
    res = batched(lm, "fill_mask", fill_mask_batch, cfg)
    return replace(res, latency_ms=(time.perf_counter() - t0) * 1000, batch_size=1)


COMPARE_REPEATS = 3  # warm calls per model in compare(): the median of these is the latency shown


def compare(
    models: Sequence[LoadedModel], cfg: FillMaskConfig, warmup: bool = True, repeats: int = COMPARE_REPEATS
) -> CompareResult:
    """The same text through 2-4 models, one result each with its own latency.

    With ``warmup`` each model runs the text once first (its time kept as ``first_ms``, out of the median), so no
    column pays for a cold start; the latency is then the median of ``repeats`` warm calls, so one slow call (a
    busy shared machine) does not make a model look slow. Raises FillMaskError naming the model that cannot fill
    masks.
    """
    if not 2 <= len(models) <= 4:
        raise FillMaskError(msg("fill_mask.compare_needs_models_got", n_models=len(models)))
    for m in models:
        check_mlm(m)
    out, first = [], []
    for m in models:
        if warmup:
            first.append(fill_mask(m, cfg).latency_ms)
        warm = [fill_mask(m, cfg) for _ in range(max(1, repeats))]
        out.append(replace(warm[-1], latency_ms=statistics.median(r.latency_ms for r in warm)))
    return CompareResult(tuple(out), tuple(first), max(1, repeats))

"""Replaced token detection (ELECTRA's pretraining task): which words of a sentence look replaced?

A discriminator (a family whose registry ``classes`` has an "rtd" class, e.g. ``ElectraForPreTraining``) gives one
logit per token; its sigmoid is the probability that the token was put there by a generator instead of being the
original. ``score`` returns it per token and per word (the tokenizer's own ``word_ids``; a word's probability is
its most suspicious piece's).

To make the view checkable, ``score`` can first corrupt the text the way ELECTRA's pretraining does: ``corrupt``
random words are masked (all their pieces) and a generator (the family's MLM checkpoint) samples a replacement for
each masked piece in one pass. The discriminator then reads the corrupted ids, and the result says which words were
replaced, so the replaced words should be the ones that score high.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np

from core import registry
from core.base import text as text_rules
from core.base.fields import bounded, check_bounds
from core.base.messages import Problem, msg
from core.base.text import MASK_PATTERN
from core.models import loading as models
from core.models.loading import LoadedModel, ModelSpec

RTD_TASK = "rtd"  # the registry task whose class is a family's discriminator
THRESHOLD = 0.5  # sigmoid(0): the discriminator's own decision line
MAX_CHARS = 2_000
MAX_CORRUPT = 10  # words the generator may replace in one text
MAX_SEED = 2**31 - 1


class ReplacedTokensError(Problem, ValueError):
    """The input or the checkpoints cannot be used for replaced token detection; the message says what to do."""


# ---------------------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class RtdConfig:
    """What to score: ``text`` as written (``corrupt`` = 0), or with ``corrupt`` random words replaced by a
    generator's samples first (``seed`` picks the words and the samples)."""

    text: str
    corrupt: int = bounded(0, 0, MAX_CORRUPT, step=1, label="Words to replace")
    seed: int = bounded(0, 0, MAX_SEED, step=1, label="Seed")

    def __post_init__(self) -> None:
        text_rules.check_text(
            self.text, max_chars=MAX_CHARS, empty_hint=msg("replaced.hint_empty"), long_hint=msg("replaced.hint_long")
        )
        if MASK_PATTERN.search(self.text):
            raise ValueError(msg("replaced.text_has_mask_discriminator"))
        if not any(ch.isalnum() for ch in self.text):
            raise ValueError(msg("replaced.no_words"))
        check_bounds(self)


# ---------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class TokenScore:
    piece: str  # the piece the discriminator read (after any replacement)
    prob: float  # P(replaced) = sigmoid(logit)
    logit: float
    word: int | None  # index into ReplacedTokensResult.words; None for special tokens
    replaced: bool  # the generator put this piece here (always False when nothing was corrupted)
    original: str | None = None  # the piece before the generator replaced it


@dataclass(frozen=True)
class WordScore:
    text: str  # as the discriminator read it (the generator's replacement when replaced)
    prob: float  # its most suspicious piece's P(replaced)
    positions: tuple[int, ...]  # its pieces, indices into ReplacedTokensResult.tokens
    replaced: bool  # at least one of its pieces was replaced by the generator
    original: str | None = None  # the word as written, when the generator replaced it


@dataclass(frozen=True)
class ReplacedTokensResult:
    """One text through one discriminator (after an optional corruption by a generator)."""

    checkpoint: str
    family: str
    text: str  # what the discriminator read, as text (the user's text with the replacements)
    original_text: str  # as the user wrote it (typed special tokens removed)
    tokens: tuple[TokenScore, ...]  # special tokens included
    words: tuple[WordScore, ...]
    generator: str | None  # the generator's checkpoint when words were replaced
    latency_ms: float  # the discriminator's forward
    threshold: float = THRESHOLD
    notes: tuple[str, ...] = ()
    truncation: str | None = None

    @property
    def flagged(self) -> tuple[int, ...]:
        """Indices of the words the discriminator calls replaced (P >= threshold)."""
        return tuple(i for i, w in enumerate(self.words) if w.prob >= self.threshold)

    @property
    def replaced_words(self) -> tuple[int, ...]:
        return tuple(i for i, w in enumerate(self.words) if w.replaced)


# ---------------------------------------------------------------------------------------------- roles
def rtd_class(family_key: str) -> str | None:
    """The family's discriminator class name, or None when the family has no replaced-token-detection head."""
    return registry.family(family_key).classes.get(RTD_TASK)


def architectures(spec: ModelSpec) -> tuple[str, ...]:
    """The architectures a checkpoint's config names, without loading weights: its folder's config.json when it
    can be had here, else the shipped official config (assets/configs); () when neither is known."""
    res = models.resolve(spec.checkpoint)
    cfg: dict = {}
    if res.path is not None:
        try:
            cfg = models.read_config(res.path)
        except registry.ModelLoadError:
            return ()
    else:
        shipped = registry.CONFIG_DIR / (spec.checkpoint.replace("/", "__") + ".json")
        if shipped.exists():
            cfg = json.loads(shipped.read_text())
    return tuple(cfg.get("architectures") or ())


def role(spec: ModelSpec | None) -> str | None:
    """ "discriminator" when the checkpoint is its family's RTD model, "generator" when its family has one but this
    checkpoint is the MLM model, None for a family without replaced token detection (or no model picked)."""
    if spec is None:
        return None
    cls = rtd_class(spec.family)
    if cls is None:
        return None
    return "discriminator" if cls in architectures(spec) else "generator"


def load_discriminator(spec: ModelSpec) -> LoadedModel:
    """The discriminator of ``spec`` (through core.models.loading.load, task "rtd"). Raises ReplacedTokensError when the
    family has no RTD head, ModelLoadError when the checkpoint cannot be had."""
    if rtd_class(spec.family) is None:
        raise ReplacedTokensError(msg("replaced.no_rtd_head", label=registry.family(spec.family).label))
    return models.load(spec, RTD_TASK)


def check_discriminator(lm: LoadedModel) -> None:
    """Raise ReplacedTokensError unless ``lm`` is its family's discriminator with trained head weights."""
    import transformers

    cls_name = rtd_class(lm.spec.family)
    if cls_name is None or not isinstance(lm.model, getattr(transformers, cls_name)):
        raise ReplacedTokensError(
            msg(
                "replaced.loaded_without_rtd_head",
                checkpoint=lm.spec.checkpoint,
                model_class=type(lm.model).__name__,
                suggestion=cls_name or "a family with one",
            )
        )
    missing = [k for k in lm.missing_keys if "prediction" in k]
    if missing:
        arch = next(iter(getattr(lm.model.config, "architectures", None) or ()), "another class")
        raise ReplacedTokensError(
            msg(
                "replaced.no_trained_rtd_head",
                checkpoint=lm.spec.checkpoint,
                missing=", ".join(missing[:3]),
                arch=arch,
            )
        )


# ---------------------------------------------------------------------------------------------- scoring
def _inputs(lm: LoadedModel, ids: list[int], device: str) -> dict:
    """Model inputs for one sequence: ids, mask, and segment ids where the family takes them."""
    import torch

    x = {
        "input_ids": torch.tensor([ids], device=device),
        "attention_mask": torch.ones((1, len(ids)), dtype=torch.long, device=device),
    }
    if lm.family.token_types:
        x["token_type_ids"] = torch.zeros((1, len(ids)), dtype=torch.long, device=device)
    return x


def _same_vocab(a, b) -> bool:
    return len(a) == len(b) and a.mask_token_id == b.mask_token_id and a.get_vocab() == b.get_vocab()


def _corrupt(
    gen: LoadedModel, tok, ids: list[int], word_pos: list[list[int]], cfg: RtdConfig
) -> tuple[list[int], list[int]]:
    """Mask ``cfg.corrupt`` random words (every piece of each) and sample the generator's replacement for each
    masked piece in one pass, as ELECTRA's pretraining does. Returns (new ids, the words chosen)."""
    import torch

    # transformers' own question "does this model end in a vocabulary projection?" (an MLM head)
    if gen.model.get_output_embeddings() is None or gen.head_missing:
        raise ReplacedTokensError(msg("replaced.no_trained_mlm_head", checkpoint=gen.spec.checkpoint))
    if gen.tokenizer.mask_token_id is None:
        raise ReplacedTokensError(msg("replaced.no_mask_token", checkpoint=gen.spec.checkpoint))
    pieces = tok.convert_ids_to_tokens(ids)
    candidates = [w for w, pos in enumerate(word_pos) if any(ch.isalnum() for p in pos for ch in pieces[p])]
    if cfg.corrupt > len(candidates):
        raise ReplacedTokensError(msg("replaced.too_few_words", n_candidates=len(candidates)))
    rng = np.random.default_rng(cfg.seed)  # a per-call generator: never the process-wide RNG (a shared server)
    chosen = sorted(int(w) for w in rng.choice(candidates, size=cfg.corrupt, replace=False))
    positions = [p for w in chosen for p in word_pos[w]]
    masked = list(ids)
    for p in positions:
        masked[p] = gen.tokenizer.mask_token_id
    with torch.inference_mode():
        logits = gen.model(**_inputs(gen, masked, gen.device)).logits[0, positions].float().cpu()  # (M, V)
        # The replacement is never a special token, and never the original piece: ELECTRA counts a sampled original
        # as "not replaced", but here every chosen word is meant to come back replaced, so the view can be checked.
        logits[:, list(tok.all_special_ids)] = float("-inf")
        logits[torch.arange(len(positions)), torch.tensor([ids[p] for p in positions])] = float("-inf")
        g = torch.Generator(device="cpu").manual_seed(cfg.seed)
        sampled = torch.multinomial(logits.softmax(-1), 1, generator=g)[:, 0].tolist()
    out = list(ids)
    for p, s in zip(positions, sampled):
        out[p] = int(s)
    return out, chosen


def score(lm: LoadedModel, cfg: RtdConfig, generator: LoadedModel | None = None) -> ReplacedTokensResult:
    """P(replaced) for every token and word of ``cfg.text`` by the discriminator ``lm``; with ``cfg.corrupt`` > 0,
    after ``generator`` replaced that many words. Raises ReplacedTokensError (a ValueError) with what to do."""
    import torch

    check_discriminator(lm)
    tok = lm.tokenizer
    text, found = text_rules.strip_typed_specials(cfg.text)
    notes = [text_rules.removed_note(found)] if found else []
    if not any(ch.isalnum() for ch in text):
        raise ReplacedTokensError(msg("replaced.no_words_without_specials"))
    if cfg.corrupt:
        if generator is None:
            raise ReplacedTokensError(msg("replaced.replacing_words_needs_generator"))
        if not _same_vocab(generator.tokenizer, tok):
            raise ReplacedTokensError(
                msg(
                    "replaced.vocabularies_differ",
                    checkpoint=generator.spec.checkpoint,
                    checkpoint2=lm.spec.checkpoint,
                )
            )
    enc = tok(text, add_special_tokens=True, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    wid = enc.word_ids()
    offsets = [tuple(o) for o in enc["offset_mapping"]]
    truncation = None
    cap = lm.max_tokens
    if len(ids) > cap:  # keep the start and the closing special token
        truncation = msg(
            "replaced.text_too_long", n_ids=len(ids), checkpoint=lm.spec.checkpoint, cap=cap, n_scored=cap - 2
        )
        ids, wid, offsets = ids[: cap - 1] + ids[-1:], wid[: cap - 1] + wid[-1:], offsets[: cap - 1] + offsets[-1:]
    # words in reading order, each with its pieces' positions (the tokenizer's word_ids: None for specials)
    order: dict[int, int] = {}
    word_pos: list[list[int]] = []
    for p, w in enumerate(wid):
        if w is None:
            continue
        if w not in order:
            order[w] = len(word_pos)
            word_pos.append([])
        word_pos[order[w]].append(p)
    original_ids = list(ids)
    chosen: list[int] = []
    if cfg.corrupt and generator is not None:  # corrupt without a generator raised above
        ids, chosen = _corrupt(generator, tok, ids, word_pos, cfg)
    t0 = time.perf_counter()
    with torch.inference_mode():
        logits = lm.model(**_inputs(lm, ids, lm.device)).logits[0].float()  # (T,): one logit per token
    latency = (time.perf_counter() - t0) * 1000
    probs = torch.sigmoid(logits).tolist()
    logits = logits.tolist()
    pieces, orig_pieces = tok.convert_ids_to_tokens(ids), tok.convert_ids_to_tokens(original_ids)
    tokens = tuple(
        TokenScore(
            pieces[p],
            probs[p],
            logits[p],
            order.get(wid[p]) if wid[p] is not None else None,
            ids[p] != original_ids[p],
            orig_pieces[p] if ids[p] != original_ids[p] else None,
        )
        for p in range(len(ids))
    )
    words, parts, last = [], [], 0
    for pos in word_pos:
        start, end = offsets[pos[0]][0], offsets[pos[-1]][1]
        written = text[start:end]
        replaced = any(tokens[p].replaced for p in pos)
        shown = tok.decode([ids[p] for p in pos]).strip() if replaced else written
        words.append(WordScore(shown, max(probs[p] for p in pos), tuple(pos), replaced, written if replaced else None))
        parts += [text[last:start], shown]
        last = end
    read = "".join(parts) + text[last:] if chosen else text
    return ReplacedTokensResult(
        checkpoint=lm.spec.checkpoint,
        family=lm.spec.family,
        text=read,
        original_text=text,
        tokens=tokens,
        words=tuple(words),
        generator=generator.spec.checkpoint if chosen and generator is not None else None,
        latency_ms=latency,
        notes=tuple(notes),
        truncation=truncation,
    )

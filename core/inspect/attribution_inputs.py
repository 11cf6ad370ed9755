"""What an attribution explains and on what: the config, the prepared input, and the explained scalar.

Every method explains one scalar ``f``: the logit of a candidate word at a mask (or the difference of two words'
logits, "A rather than B"), the logit of an NSP/SOP class, the logit of a sequence-classification class, or the
logit of one word's predicted tag. ``prepare`` tokenizes and checks the input against the model and builds that
scalar; ``Scorer`` computes it from word-embedding vectors (``inputs_embeds``) on a model, in batches of at most
``forward_batch`` rows. Baselines replace every non-special token's embedding by the [PAD] or [MASK] embedding, or
by zeros; special tokens keep their own. core.inspect.attribution runs the methods on what this module prepares,
and core.inspect.attribution_estimate sizes a run before it starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.base.messages import msg
from core.base.settings import current
from core.base.text import MASK_PATTERN, display_piece, with_mask_token
from core.inspect.attribution_methods import METHODS, NotApplicable
from core.models.loading import LoadedModel
from core.predict.fill_mask import MAX_MASKS, count_masks
from core.registry import mlm_head

TARGETS = {
    "mask": "a masked word",
    "pair": "the NSP/SOP decision",
    "class": "a classifier's class",
    "token": "one word's tag (a token classifier)",
}
BASELINES = {"pad": "[PAD] embedding", "mask": "[MASK] embedding", "zeros": "zero vector"}
PAIR_CLASSES = {"nsp": ("B follows A", "B is random"), "sop": ("in order", "swapped")}  # by Family.pair_head
TOKEN_BUDGET = 16384  # tokens per forward batch; bounds memory for long inputs whatever the batch size asked


# ------------------------------------------------------------------------------------------------ config
@dataclass(frozen=True)
class AttributionConfig:
    """What to explain and how. ``__post_init__`` raises ValueError with a fix-it message."""

    target: str = "mask"  # one of TARGETS
    text: str = ""
    text_b: str = ""  # second sentence for the pair target
    mask_index: int = 0  # which mask (0 = first) when the text has several
    word: str = ""  # candidate word at the mask; "" = the model's top prediction
    contrast_word: str = ""  # "word rather than contrast_word": explains logit(word) - logit(contrast_word)
    class_index: int = 0  # NSP/SOP class or classifier class
    word_index: int = 0  # token target: which word (0 = the first); its predicted tag is explained
    methods: tuple[str, ...] = ("lig",)
    baseline: str = "pad"
    n_steps: int = 50
    internal_batch_size: int = 50
    n_samples: int = 200  # KernelSHAP / LIME perturbations
    layer_steps: int = 0  # >0: per-layer LayerIG at each encoder layer with this many steps; 0 = off
    seed: int = 0
    faithfulness: bool = True  # comprehensiveness and sufficiency of every method (core.inspect.faithfulness)
    removal: str = ""  # how faithfulness removes a token: "mask", "delete"; "" = the model's default (the mask token)

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(msg("attribution.unknown_target_use_one", target=self.target, choices=", ".join(TARGETS)))
        if not self.text.strip():
            raise ValueError(msg("attribution.input_empty_type_sentence"))
        if self.target == "pair" and not self.text_b.strip():
            raise ValueError(msg("attribution.sentence_pair_target_needs"))
        if not self.methods:
            raise ValueError(msg("attribution.pick_least_one_attribution"))
        bad = [m for m in self.methods if m not in METHODS]  # the registry's keys
        if bad:
            raise ValueError(
                msg("attribution.unknown_method_s_use", unknown=", ".join(bad), choices=", ".join(METHODS))
            )
        if self.baseline not in BASELINES:
            raise ValueError(
                msg("attribution.unknown_baseline_use_one", baseline=self.baseline, choices=", ".join(BASELINES))
            )
        top = min(1000, current().max_attribution_steps)  # the server's limit (lower on the hosted demo)
        if not 2 <= self.n_steps <= top:
            raise ValueError(msg("attribution.n_steps_must_between", top=top, n_steps=self.n_steps))
        if not 1 <= self.internal_batch_size <= 1000:
            raise ValueError(msg("attribution.internal_batch_size_must", internal_batch_size=self.internal_batch_size))
        if not 10 <= self.n_samples <= 5000:
            raise ValueError(msg("attribution.kernelshap_lime_samples_must", n_samples=self.n_samples))
        if not 0 <= self.layer_steps <= min(300, top):
            raise ValueError(
                msg("attribution.per_layer_steps_must", max_steps=min(300, top), layer_steps=self.layer_steps)
            )
        if self.removal not in ("", "mask", "delete"):
            raise ValueError(msg("faithfulness.unknown_removal_use_one", removal=self.removal, choices="mask, delete"))
        if self.mask_index < 0 or self.class_index < 0 or self.word_index < 0:
            raise ValueError(msg("attribution.mask_class_indices_start"))
        if self.contrast_word.strip() and self.target != "mask":
            raise ValueError(msg("attribution.rather_than_contrastive_works"))
        if self.target == "mask":  # Fill-mask's limits: with too many masks every score is zero and nothing is learnt
            masks = count_masks(self.text)
            if masks > MAX_MASKS:
                raise ValueError(msg("attribution.too_many_masks", masks=masks, max_masks=MAX_MASKS))
            if masks and not any(ch.isalnum() for ch in MASK_PATTERN.sub(" ", self.text)):
                raise ValueError(msg("attribution.only_masks_no_context"))


# ------------------------------------------------------------------------------------------------ setup
@dataclass
class Prepared:
    """A tokenized, checked input with its baseline and the scalar to explain (internal to one call)."""

    lm: LoadedModel
    ids: Any  # (1, seq) long
    extra: dict  # attention_mask, token_type_ids (1, seq)
    special: np.ndarray
    embeds: Any  # (1, seq, E)
    base: Any  # (1, seq, E)
    score: Callable[[Any], Any]  # full model output -> (b,) explained scalar
    target_label: str
    candidates: tuple[tuple[str, float], ...]
    notes: list[str] = field(default_factory=list)
    mask_pos: int | None = None  # mask target: run the MLM head at this position only (not over every token)
    words: tuple[int, int | None] = (0, None)  # mask target: word id, contrast word id
    f_x: float = 0.0  # the explained score on the input and on the baseline (set by attribute)
    f_b: float = 0.0
    target: str = "mask"  # what is explained (AttributionConfig.target) ...
    target_pos: int | None = None  # ... at which token (the mask, the tagged word's first piece; None: the input)
    target_index: int = 0  # ... and which logit: the word's vocabulary id, or the class / tag
    fixed: np.ndarray | None = None  # (seq,) bool: tokens faithfulness never removes (set by prepare)


def _mlm_logits(out):
    logits = getattr(out, "prediction_logits", None)
    if logits is None:
        logits = getattr(out, "logits", None)
    return logits


def pair_logits(out):
    """The sentence-pair (NSP/SOP) logits (b, 2) of a pretraining model's output; None without that head.

    transformers names the field per architecture, so it is found by shape: the one 2-D ``*logits`` field (the
    MLM logits beside it are 3-D). Only called for a family whose registry entry has a pair head."""
    found = [v for k, v in out.items() if k.endswith("logits") and v is not None and v.dim() == 2]
    return found[0] if len(found) == 1 else None


def word_id(lm: LoadedModel, word: str, at_start: bool) -> int:
    """The single vocabulary id a mask would predict for ``word``; ValueError naming the problem otherwise."""
    tok = lm.tokenizer
    w = word.strip()
    if not w:
        raise ValueError(msg("attribution.candidate_word_empty_type"))
    if " " in w:
        raise ValueError(msg("attribution.several_words_one_mask", word=w))
    # A word after a space, as the tokenizer sees it there: byte-level BPE gives it its Ġ marker, while WordPiece
    # and SentencePiece ignore the space (▁ marks every word start anyway). Asking the tokenizer this way needs no
    # per-tokenizer rule.
    text = w if at_start else " " + w
    ids = tok(text, add_special_tokens=False)["input_ids"]
    if not ids or ids == [tok.unk_token_id]:
        raise ValueError(msg("attribution.word_not_in_vocab", word=w, unk_token=tok.unk_token))
    if len(ids) > 1:
        pieces = tok.convert_ids_to_tokens(ids)
        raise ValueError(
            msg(
                "attribution.word_is_several_pieces",
                word=w,
                n_ids=len(ids),
                split=" + ".join(pieces),
                first_piece=pieces[0],
            )
        )
    if tok.unk_token_id is not None and ids[0] == tok.unk_token_id:
        raise ValueError(msg("attribution.word_not_in_vocab_plain", word=w))
    return int(ids[0])


def model_texts(lm: LoadedModel, cfg: AttributionConfig) -> tuple[str, ...]:
    """The text (with the pair target: both sentences) as the tokenizer reads it: a typed [MASK] / <mask> as the
    tokenizer's own mask token (core.base.text.with_mask_token, as on Fill-mask and Attention)."""
    texts = (cfg.text, cfg.text_b) if cfg.target == "pair" else (cfg.text,)
    return tuple(with_mask_token(t, lm.tokenizer.mask_token) for t in texts)


def prepare(lm: LoadedModel, cfg: AttributionConfig) -> Prepared:
    """Tokenize, check the input against the model, and build the scalar to explain. Raises ValueError."""
    import torch  # lazy: torch takes seconds to load; importing this module (a page's imports) should not

    tok, model, fam = lm.tokenizer, lm.model, lm.family
    enc = tok(*model_texts(lm, cfg), return_tensors="pt")
    ids = enc["input_ids"]
    limit = lm.max_tokens
    if ids.shape[1] > limit:
        raise ValueError(msg("attribution.input_too_long", shape=ids.shape[1], limit=limit))
    if ids.shape[1] <= 2 and cfg.target != "pair":
        raise ValueError(msg("attribution.no_words_after_tokenizing"))
    names = set(getattr(tok, "model_input_names", ["input_ids", "attention_mask"]))
    extra = {k: v.to(lm.device) for k, v in enc.items() if k != "input_ids" and k in names}
    ids = ids.to(lm.device)
    specials = set(tok.all_special_ids) - {tok.unk_token_id}
    special = np.array([int(i) in specials for i in ids[0].tolist()])
    notes: list[str] = []
    with torch.no_grad():
        out = model(input_ids=ids, **extra)

    keep_also: list[int] = []  # positions besides the specials never removed by faithfulness (the tagged word)
    where_: int | None  # the explained position (mask, tagged word) or None (the whole input), set by each branch
    score: Callable[..., Any]  # the model's output -> the attributed scalar per batch row (each branch binds its own)
    names_: tuple[str, ...]
    if cfg.target == "mask":
        logits = _mlm_logits(out)
        if logits is None or logits.dim() != 3:
            raise NotApplicable(msg("attribution.no_mlm_head"))
        mask_pos = (ids[0] == tok.mask_token_id).nonzero().flatten().tolist()
        if not mask_pos:
            raise ValueError(msg("attribution.no_mask_in_text", mask_token=tok.mask_token))  # hfl: [MASK]
        if cfg.mask_index >= len(mask_pos):
            raise ValueError(msg("attribution.no_such_mask", n_mask_pos=len(mask_pos), mask_number=cfg.mask_index + 1))
        pos = mask_pos[cfg.mask_index]
        probs = torch.softmax(logits[0, pos].float(), -1)
        top = torch.topk(probs, 8)
        candidates = tuple(
            (display_piece(tok.convert_ids_to_tokens(int(i)), tok), float(p)) for p, i in zip(top.values, top.indices)
        )
        at_start = pos == 1
        a = word_id(lm, cfg.word, at_start) if cfg.word.strip() else int(top.indices[0])
        a_tok = display_piece(tok.convert_ids_to_tokens(a), tok)
        where = (
            msg("attribution.where.mask_n", n=cfg.mask_index + 1)
            if len(mask_pos) > 1
            else msg("attribution.where.mask")
        )
        if cfg.contrast_word.strip():
            b = word_id(lm, cfg.contrast_word, at_start)
            if b == a:
                raise ValueError(msg("attribution.two_words_same_token"))
            b_tok = display_piece(tok.convert_ids_to_tokens(b), tok)

            def score(o, pos=pos, a=a, b=b):
                lg = _mlm_logits(o)
                return lg[:, pos, a] - lg[:, pos, b]

            label = msg("attribution.target.contrast", word=a_tok, other=b_tok, where=where)
        else:

            def score(o, pos=pos, a=a):
                return _mlm_logits(o)[:, pos, a]

            label = msg("attribution.target.word", word=a_tok, where=where)
        if lm.head_missing:
            notes.append(msg("attribution.untrained_mlm_head"))
        where_, which = pos, a
    elif cfg.target == "pair":
        logits = pair_logits(out)
        if fam.pair_head is None:
            raise NotApplicable(fam.pair_head_note)
        if logits is None:
            raise NotApplicable(msg("attribution.loaded_without_pair_head", head=fam.pair_head.upper()))
        names_ = PAIR_CLASSES[fam.pair_head]
        if cfg.class_index >= len(names_):
            raise ValueError(
                msg("attribution.no_such_pair_class", head=fam.pair_head.upper(), class_index=cfg.class_index)
            )
        c = cfg.class_index
        probs = torch.softmax(logits[0].float(), -1)
        candidates = tuple((n, float(p)) for n, p in zip(names_, probs))

        def score(o, c=c):
            return pair_logits(o)[:, c]

        where_, which = None, c

        label = msg(
            "attribution.target.pair",
            head=fam.pair_head.upper(),
            name=msg(f"attribution.pair_class.{fam.pair_head}.{c}"),
        )
        if lm.head_missing:
            notes.append(msg("attribution.untrained_head", head=fam.pair_head.upper()))
    elif (
        cfg.target == "token"
    ):  # the logit of the predicted tag at one word's first piece (core.train.finetune task "token")
        logits = getattr(out, "logits", None)
        if logits is None or logits.dim() != 3:
            raise NotApplicable(msg("attribution.no_token_head"))
        word_ids = enc.word_ids(0)
        firsts = [p for p, w in enumerate(word_ids) if w is not None and (p == 0 or word_ids[p - 1] != w)]
        if cfg.word_index >= len(firsts):
            raise ValueError(msg("attribution.no_such_word", n_firsts=len(firsts), word_number=cfg.word_index + 1))
        pos = firsts[cfg.word_index]
        id2label = getattr(model.config, "id2label", None) or {}
        names_ = tuple(str(id2label.get(i, f"tag {i}")) for i in range(logits.shape[-1]))
        probs = torch.softmax(logits[0, pos].float(), -1)
        candidates = tuple((nm, float(p)) for nm, p in zip(names_, probs))
        c = int(probs.argmax())

        def score(o, pos=pos, c=c):
            return o.logits[:, pos, c]

        where_, which = pos, c
        keep_also = [p for p, w in enumerate(word_ids) if w is not None and w == word_ids[pos]]  # the word's pieces

        piece = display_piece(tok.convert_ids_to_tokens(int(ids[0, pos])), tok)
        label = msg("attribution.target.tag", name=names_[c], word=cfg.word_index + 1, piece=piece)
    else:
        logits = getattr(out, "logits", None)
        if logits is None or logits.dim() != 2:
            raise NotApplicable(msg("attribution.no_sequence_head"))
        n = logits.shape[-1]
        if cfg.class_index >= n:
            raise ValueError(msg("attribution.no_such_class", n=n, last_class=n - 1, class_index=cfg.class_index))
        id2label = getattr(model.config, "id2label", None) or {}
        names_ = tuple(str(id2label.get(i, f"class {i}")) for i in range(n))
        probs = torch.softmax(logits[0].float(), -1)
        candidates = tuple((nm, float(p)) for nm, p in zip(names_, probs))
        c = cfg.class_index

        def score(o, c=c):
            return o.logits[:, c]

        where_, which = None, c

        label = msg("attribution.target.class", name=names_[c])
        if lm.head_missing:
            notes.append(msg("attribution.untrained_classifier_head"))

    emb_layer = model.get_input_embeddings()
    with torch.no_grad():
        embeds = emb_layer(ids).detach()
        if cfg.baseline == "zeros":
            base = embeds.clone()
            base[0, torch.as_tensor(~special, device=embeds.device)] = 0.0
        else:
            fill = tok.pad_token_id if cfg.baseline == "pad" else tok.mask_token_id
            base_ids = ids.clone()
            base_ids[0, torch.as_tensor(~special, device=ids.device)] = fill
            base = emb_layer(base_ids).detach()
    prep = Prepared(lm, ids, extra, special, embeds, base, score, label, candidates, notes)
    prep.target, prep.target_pos, prep.target_index = cfg.target, where_, which
    prep.fixed = prep.special.copy()  # what faithfulness never removes: specials, the explained mask, the tagged word
    prep.fixed[[p for p in [where_, *keep_also] if p is not None]] = True
    if cfg.target == "mask":
        prep.mask_pos, prep.words = pos, (a, b if cfg.contrast_word.strip() else None)
    return prep


# ------------------------------------------------------------------------------------------------ forward
def explained(model, prep: Prepared, embeds):
    """f(embeds) -> (b,): the explained scalar, the attention mask etc. broadcast to the batch.

    For a masked word the MLM head runs at the mask only: (b, V) logits instead of (b, seq, V), which keeps
    memory bounded for long inputs and big vocabularies.
    """
    b = embeds.shape[0]
    extra = {k: v.expand(b, -1) for k, v in prep.extra.items()}
    if prep.mask_pos is not None:
        head = mlm_head(model)
        base = getattr(model, getattr(model, "base_model_prefix", ""), None)
        if head is not None and base is not None:
            logits = head(base(inputs_embeds=embeds, **extra)[0][:, prep.mask_pos])  # (b, V)
            a, c = prep.words
            return logits[:, a] - logits[:, c] if c is not None else logits[:, a]
    return prep.score(model(inputs_embeds=embeds, **extra))


def target_logits(model, target: str, batch: dict, positions=None):
    """The logits a target reads, (rows, vocabulary or classes), from a batch of ids (or ``inputs_embeds``) with
    their masks: at ``positions`` (an int, or one per row) for the mask and token targets; None when the model has
    no such output. For a masked word the MLM head runs at the positions only, not over every token."""
    import torch  # lazy: torch takes seconds to load; importing this module (a page's imports) should not

    rows = next(iter(batch.values())).shape[0]
    at = None
    if target in ("mask", "token"):
        at = torch.as_tensor(positions if not isinstance(positions, int) else [positions] * rows)
    head = mlm_head(model) if target == "mask" else None
    if head is not None and at is not None:
        hidden = model.base_model(**batch)[0]
        return head(hidden[torch.arange(rows, device=hidden.device), at.to(hidden.device)])
    out = model(**batch)
    if target == "pair":
        return pair_logits(out)
    logits = getattr(out, "logits", None)
    if logits is None:
        return None
    if at is not None:
        if logits.dim() != 3:
            return None
        logits = logits[torch.arange(rows, device=logits.device), at.to(logits.device)]
    return logits if logits.dim() == 2 else None


class Scorer:
    """f(embeds) -> (b,) on a model, broadcasting the attention mask; reports progress per forward call."""

    def __init__(self, model, prep: Prepared, on_call: Callable[[], None] | None = None):
        self.model, self.prep, self.on_call = model, prep, on_call

    def __call__(self, embeds):
        if self.on_call is not None:
            self.on_call()
        return explained(self.model, self.prep, embeds)


def module_scorer(model, prep: Prepared):
    """The scorer as an nn.Module (DeepLift needs one whose submodules it can hook)."""
    import torch  # lazy: torch takes seconds to load; importing this module (a page's imports) should not

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, embeds):
            return explained(self.model, prep, embeds)

    return Wrapped().eval()


def forward_batch(cfg: AttributionConfig, seq: int) -> int:
    """The forward batch: what was asked, capped so batch x seq stays within TOKEN_BUDGET (bounded memory)."""
    return max(1, min(cfg.internal_batch_size, TOKEN_BUDGET // max(seq, 1)))


def target_classes(lm: LoadedModel, target: str) -> tuple[str, ...]:
    """Class names the target offers (NSP/SOP or the classifier's labels); () for the mask target."""
    if target == "pair":
        ph = lm.family.pair_head
        return PAIR_CLASSES[ph] if ph else ()
    if target in ("class", "token"):
        cfg = lm.model.config
        n = int(getattr(cfg, "num_labels", 2))
        id2label = getattr(cfg, "id2label", None) or {}
        return tuple(str(id2label.get(i, f"class {i}")) for i in range(n))
    return ()

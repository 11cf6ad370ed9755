"""Which input tokens drive a prediction: captum attributions for a masked word, the NSP/SOP decision, or a class.

Every method explains one scalar ``f``: the logit of a candidate word at a mask (or the difference of two words'
logits, "A rather than B"), the logit of an NSP/SOP class, or the logit of a sequence-classification class.

The model is fed word-embedding vectors (``inputs_embeds``), so the attributions land on the output of the
word-embedding layer; that is exactly what captum's ``LayerIntegratedGradients`` on that layer computes, and it
lets the baseline be any vector ([PAD], [MASK] or zeros). Special tokens ([CLS], [SEP], the target mask) keep
their own embedding in every baseline, so their attribution is zero by construction for IG/DeepLift/Occlusion/
KernelSHAP/LIME. Nothing here hooks the shared model: the methods that must hook modules (per-layer IG, DeepLift)
work on a deep copy that lives only for the call.

The methods are a registry, core.inspect.attribution_methods.METHODS (key, label, runner, cost, settings, description);
this module prepares the input and the scalar, runs the methods a config names, and exports the results.
"""
from __future__ import annotations

import copy
import csv
import html
import io
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from core.inspect.attribution_methods import METHODS, Inputs, NotApplicable, per_token
from core.inspect.attribution_methods import unavailable_methods  # noqa: F401 (re-exported: pages and tests ask here)
from core.runtime.backend import model_op
from core.models.loading import LoadedModel
from core.registry import mlm_head

TARGETS = {"mask": "a masked word", "pair": "the NSP/SOP decision", "class": "a classifier's class",
           "token": "one word's tag (a token classifier)"}
BASELINES = {"pad": "[PAD] embedding", "mask": "[MASK] embedding", "zeros": "zero vector"}
PAIR_CLASSES = {"nsp": ("B follows A", "B is random"), "sop": ("in order", "swapped")}  # by Family.pair_head
IG = "lig"  # the Integrated Gradients entry of core.inspect.attribution_methods.METHODS (its delta is checked here)
DELTA_WARN = 0.05  # |delta| above this share of |f(x) - f(baseline)| gets a warning: raise n_steps
TOKEN_BUDGET = 16384  # tokens per forward batch; bounds memory for long inputs whatever the batch size asked
MAX_BATCH_ROWS = 200

Progress = Callable[[float, str], None]


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

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"Unknown target {self.target!r}: use one of {', '.join(TARGETS)}.")
        if not self.text.strip():
            raise ValueError("The input is empty: type a sentence to explain.")
        if self.target == "pair" and not self.text_b.strip():
            raise ValueError("The sentence-pair target needs a second sentence (B): type one.")
        if not self.methods:
            raise ValueError("Pick at least one attribution method.")
        bad = [m for m in self.methods if m not in METHODS]  # the registry's keys
        if bad:
            raise ValueError(f"Unknown method(s) {', '.join(bad)}: use {', '.join(METHODS)}.")
        if self.baseline not in BASELINES:
            raise ValueError(f"Unknown baseline {self.baseline!r}: use one of {', '.join(BASELINES)}.")
        from core.base.settings import current

        top = min(1000, current().max_attribution_steps)  # the server's limit (lower on the hosted demo)
        if not 2 <= self.n_steps <= top:
            raise ValueError(f"n_steps must be between 2 and {top} (got {self.n_steps}); 50 is a good start.")
        if not 1 <= self.internal_batch_size <= 1000:
            raise ValueError(f"Internal batch size must be between 1 and 1000 (got {self.internal_batch_size}).")
        if not 10 <= self.n_samples <= 5000:
            raise ValueError(f"KernelSHAP/LIME samples must be between 10 and 5000 (got {self.n_samples}).")
        if not 0 <= self.layer_steps <= min(300, top):
            raise ValueError(f"Per-layer steps must be between 0 (off) and {min(300, top)} (got {self.layer_steps}).")
        if self.mask_index < 0 or self.class_index < 0 or self.word_index < 0:
            raise ValueError("Mask and class indices start at 0; negative values are not allowed.")
        if self.contrast_word.strip() and self.target != "mask":
            raise ValueError("'Rather than' (contrastive) works only for a masked word: clear the second word.")
        if self.target == "mask":  # Fill-mask's limits: with too many masks every score is zero and nothing is learnt
            from core.predict.fill_mask import MASK_PATTERN, MAX_MASKS, count_masks

            masks = count_masks(self.text)
            if masks > MAX_MASKS:
                raise ValueError(f"The text has {masks} masks; at most {MAX_MASKS} are allowed. With that many the "
                                 "model has almost no context left: keep the masks you care about and write the rest.")
            if masks and not any(ch.isalnum() for ch in MASK_PATTERN.sub(" ", self.text)):
                raise ValueError("The text is only masks: there is no context to predict from. "
                                 "Add words around the [MASK]s.")


# ------------------------------------------------------------------------------------------------ results
@dataclass(frozen=True)
class MethodAttribution:
    method: str
    label: str
    scores: np.ndarray  # (seq,) one value per token; 0 at special tokens for baseline-based methods
    delta: float | None  # IG/DeepLift convergence delta: sum(scores) - (f(x) - f(baseline))
    seconds: float
    note: str = ""


@dataclass(frozen=True)
class AttributionResult:
    """Attributions of one input for one target; numpy and plain Python only."""

    family: str
    checkpoint: str
    target: str
    target_label: str  # e.g. "'paris' rather than 'london' at mask 1"
    tokens: tuple[str, ...]
    special: np.ndarray  # (seq,) bool: tokens kept fixed in every baseline
    f_x: float  # the explained score on the input
    f_baseline: float  # ... and on the baseline
    baseline: str
    methods: tuple[MethodAttribution, ...]
    rank_corr: np.ndarray  # (methods, methods) Spearman over non-special tokens
    layer_scores: np.ndarray | None = None  # (layers, seq) LayerIG per layer, row 0 = embeddings output
    layer_names: tuple[str, ...] = ()
    candidates: tuple[tuple[str, float], ...] = ()  # top predictions (word, probability) or classes
    skipped: tuple[tuple[str, str], ...] = ()  # (method, why it does not apply)
    notes: tuple[str, ...] = ()

    def method(self, key: str) -> MethodAttribution | None:
        return next((m for m in self.methods if m.method == key), None)

    @property
    def delta_warning(self) -> str | None:
        """A warning when IG's convergence delta is large against f(x) - f(baseline); None when fine."""
        m = self.method(IG)
        if m is None or m.delta is None:
            return None
        scale = max(abs(self.f_x - self.f_baseline), 1e-6)
        if abs(m.delta) > DELTA_WARN * scale and abs(m.delta) > 1e-4:
            return (f"Integrated Gradients' convergence delta is {m.delta:+.4f}, {abs(m.delta) / scale:.0%} of "
                    f"f(x) − f(baseline) = {self.f_x - self.f_baseline:+.4f}: the path integral is coarse. "
                    "Raise n_steps.")
        return None


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


def _mlm_logits(out):
    logits = getattr(out, "prediction_logits", None)
    if logits is None:
        logits = getattr(out, "logits", None)
    return logits


def _pair_logits(out):
    """The sentence-pair (NSP/SOP) logits (b, 2) of a pretraining model's output; None without that head.

    transformers names the field per architecture, so it is found by shape: the one 2-D ``*logits`` field (the
    MLM logits beside it are 3-D). Only called for a family whose registry entry has a pair head."""
    found = [v for k, v in out.items() if k.endswith("logits") and v is not None and v.dim() == 2]
    return found[0] if len(found) == 1 else None


def _word_id(lm: LoadedModel, word: str, at_start: bool) -> int:
    """The single vocabulary id a mask would predict for ``word``; ValueError naming the problem otherwise."""
    tok = lm.tokenizer
    w = word.strip()
    if not w:
        raise ValueError("The candidate word is empty: type a word or leave it blank for the top prediction.")
    if " " in w:
        raise ValueError(f"{w!r} is several words; one mask predicts one token. Type a single word.")
    # A word after a space, as the tokenizer sees it there: byte-level BPE gives it its Ġ marker, while WordPiece
    # and SentencePiece ignore the space (▁ marks every word start anyway). Asking the tokenizer this way needs no
    # per-tokenizer rule.
    text = w if at_start else " " + w
    ids = tok(text, add_special_tokens=False)["input_ids"]
    if not ids or ids == [tok.unk_token_id]:
        raise ValueError(f"{w!r} is not in this model's vocabulary (it becomes {tok.unk_token!r}). "
                         "Pick a word the tokenizer knows, or leave it blank to explain the top prediction.")
    if len(ids) > 1:
        pieces = tok.convert_ids_to_tokens(ids)
        raise ValueError(f"{w!r} is {len(ids)} sub-tokens here ({' + '.join(pieces)}), but one mask predicts one "
                         f"token. Pick a single-token word, or explain its first piece {pieces[0]!r} instead.")
    if tok.unk_token_id is not None and ids[0] == tok.unk_token_id:
        raise ValueError(f"{w!r} is not in this model's vocabulary. Pick another word.")
    return int(ids[0])


def prepare(lm: LoadedModel, cfg: AttributionConfig) -> Prepared:
    """Tokenize, check the input against the model, and build the scalar to explain. Raises ValueError."""
    import torch

    tok, model, fam = lm.tokenizer, lm.model, lm.family
    if cfg.target == "pair":
        enc = tok(cfg.text, cfg.text_b, return_tensors="pt")
    else:
        enc = tok(cfg.text, return_tensors="pt")
    ids = enc["input_ids"]
    limit = lm.max_tokens
    if ids.shape[1] > limit:
        raise ValueError(f"The input is {ids.shape[1]} tokens, but this model reads at most {limit}. "
                         "Shorten it (attributions are per token, so a long text is hard to read anyway).")
    if ids.shape[1] <= 2 and cfg.target != "pair":
        raise ValueError("The input has no words once tokenized: type a sentence.")
    names = set(getattr(tok, "model_input_names", ["input_ids", "attention_mask"]))
    extra = {k: v.to(lm.device) for k, v in enc.items() if k != "input_ids" and k in names}
    ids = ids.to(lm.device)
    specials = set(tok.all_special_ids) - {tok.unk_token_id}
    special = np.array([int(i) in specials for i in ids[0].tolist()])
    notes: list[str] = []
    with torch.no_grad():
        out = model(input_ids=ids, **extra)

    if cfg.target == "mask":
        logits = _mlm_logits(out)
        if logits is None or logits.dim() != 3:
            raise NotApplicable("This model has no masked-language-model head: load it for fill-mask, or pick "
                                "another target.")
        mask_pos = (ids[0] == tok.mask_token_id).nonzero().flatten().tolist()
        if not mask_pos:
            raise ValueError(f"The text has no mask: put {fam.mask_token} where the word to explain goes.")
        if cfg.mask_index >= len(mask_pos):
            raise ValueError(f"The text has {len(mask_pos)} mask(s); mask {cfg.mask_index + 1} does not exist.")
        pos = mask_pos[cfg.mask_index]
        probs = torch.softmax(logits[0, pos].float(), -1)
        top = torch.topk(probs, 8)
        candidates = tuple((tok.convert_ids_to_tokens(int(i)), float(p)) for p, i in zip(top.values, top.indices))
        at_start = pos == 1
        a = _word_id(lm, cfg.word, at_start) if cfg.word.strip() else int(top.indices[0])
        a_tok = tok.convert_ids_to_tokens(a)
        where = f"mask {cfg.mask_index + 1}" if len(mask_pos) > 1 else "the mask"
        if cfg.contrast_word.strip():
            b = _word_id(lm, cfg.contrast_word, at_start)
            if b == a:
                raise ValueError("The two words are the same token: pick two different words to contrast.")
            b_tok = tok.convert_ids_to_tokens(b)

            def score(o, pos=pos, a=a, b=b):
                lg = _mlm_logits(o)
                return lg[:, pos, a] - lg[:, pos, b]
            label = f"logit({a_tok!r}) − logit({b_tok!r}) at {where}: why {a_tok!r} rather than {b_tok!r}"
        else:
            def score(o, pos=pos, a=a):
                return _mlm_logits(o)[:, pos, a]
            label = f"logit of {a_tok!r} at {where}"
        if lm.head_missing:
            notes.append("This checkpoint has no trained MLM head (it is random): the attributions explain noise.")
    elif cfg.target == "pair":
        logits = _pair_logits(out)
        if fam.pair_head is None:
            raise NotApplicable(fam.pair_head_note)
        if logits is None:
            raise NotApplicable(f"This model was loaded without its {fam.pair_head.upper()} head: load it for "
                                "pretraining (the sentence-pair page does).")
        names_ = PAIR_CLASSES[fam.pair_head]
        if cfg.class_index >= len(names_):
            raise ValueError(f"The {fam.pair_head.upper()} head has 2 classes; class {cfg.class_index} does not exist.")
        c = cfg.class_index
        probs = torch.softmax(logits[0].float(), -1)
        candidates = tuple((n, float(p)) for n, p in zip(names_, probs))

        def score(o, c=c):
            return _pair_logits(o)[:, c]
        label = f"{fam.pair_head.upper()} logit of '{names_[c]}'"
        if lm.head_missing:
            notes.append(f"This checkpoint has no trained {fam.pair_head.upper()} head: the attributions explain noise.")
    elif cfg.target == "token":  # the logit of the predicted tag at one word's first piece (core.train.finetune task "token")
        logits = getattr(out, "logits", None)
        if logits is None or logits.dim() != 3:
            raise NotApplicable("This model has no token-classification head: fine-tune one on the Fine-tune page "
                                "(task: token classification) and load it for token classification.")
        word_ids = enc.word_ids(0)
        firsts = [p for p, w in enumerate(word_ids) if w is not None and (p == 0 or word_ids[p - 1] != w)]
        if cfg.word_index >= len(firsts):
            raise ValueError(f"The text has {len(firsts)} word(s); word {cfg.word_index + 1} does not exist.")
        pos = firsts[cfg.word_index]
        id2label = getattr(model.config, "id2label", None) or {}
        names_ = tuple(str(id2label.get(i, f"tag {i}")) for i in range(logits.shape[-1]))
        probs = torch.softmax(logits[0, pos].float(), -1)
        candidates = tuple((nm, float(p)) for nm, p in zip(names_, probs))
        c = int(probs.argmax())

        def score(o, pos=pos, c=c):
            return o.logits[:, pos, c]
        piece = tok.convert_ids_to_tokens(int(ids[0, pos]))
        label = f"logit of tag '{names_[c]}' at word {cfg.word_index + 1} ({piece!r})"
    else:
        logits = getattr(out, "logits", None)
        if logits is None or logits.dim() != 2:
            raise NotApplicable("This model has no sequence-classification head: load a classifier (fine-tune one "
                                "on the Fine-tune page, or point the sidebar at a classification checkpoint).")
        n = logits.shape[-1]
        if cfg.class_index >= n:
            raise ValueError(f"The classifier has {n} classes (0..{n - 1}); class {cfg.class_index} does not exist.")
        id2label = getattr(model.config, "id2label", None) or {}
        names_ = tuple(str(id2label.get(i, f"class {i}")) for i in range(n))
        probs = torch.softmax(logits[0].float(), -1)
        candidates = tuple((nm, float(p)) for nm, p in zip(names_, probs))
        c = cfg.class_index

        def score(o, c=c):
            return o.logits[:, c]
        label = f"logit of class '{names_[c]}'"
        if lm.head_missing:
            notes.append("This checkpoint's classification head is random (not in the checkpoint): fine-tune first.")

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
    if cfg.target == "mask":
        prep.mask_pos, prep.words = pos, (a, b if cfg.contrast_word.strip() else None)
    return prep


# ------------------------------------------------------------------------------------------------ forward
def _explained(model, prep: Prepared, embeds):
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


class _Scorer:
    """f(embeds) -> (b,) on a model, broadcasting the attention mask; reports progress per forward call."""

    def __init__(self, model, prep: Prepared, on_call: Callable[[], None] | None = None):
        self.model, self.prep, self.on_call = model, prep, on_call

    def __call__(self, embeds):
        if self.on_call is not None:
            self.on_call()
        return _explained(self.model, self.prep, embeds)


def _module_scorer(model, prep: Prepared):
    """The scorer as an nn.Module (DeepLift needs one whose submodules it can hook)."""
    import torch

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, embeds):
            return _explained(self.model, prep, embeds)

    return Wrapped().eval()


def _batch(cfg: AttributionConfig, seq: int) -> int:
    """The forward batch: what was asked, capped so batch x seq stays within TOKEN_BUDGET (bounded memory)."""
    return max(1, min(cfg.internal_batch_size, TOKEN_BUDGET // max(seq, 1)))


def _run_method(key: str, prep: Prepared, cfg: AttributionConfig, tick: Callable[[], None]) -> MethodAttribution:
    """One registered method on the prepared input (core.inspect.attribution_methods runs captum)."""
    m = METHODS[key]
    inputs = Inputs(embeds=prep.embeds, base=prep.base, special=prep.special, f_x=prep.f_x, f_b=prep.f_b,
                    forward=_Scorer(prep.lm.model, prep, tick), module_on=lambda model: _module_scorer(model, prep),
                    model=prep.lm.model, cfg=cfg, batch=_batch(cfg, prep.embeds.shape[1]), tick=tick,
                    baseline_label=BASELINES[cfg.baseline])
    t0 = time.perf_counter()
    out = m.run(inputs)
    scores = out.scores
    if m.takes_baseline:  # specials equal their baseline: exactly 0, whatever numerical noise the method left
        scores = np.where(prep.special, 0.0, scores)
    return MethodAttribution(key, m.label, scores.astype(np.float64), out.delta, time.perf_counter() - t0, out.note)


def _encoder_layers(model) -> tuple[list, list[str]] | None:
    """[the embeddings' last module] + the encoder's layer modules, with their names; None when no layer list is
    found. (A layer shared across depth, Family.shared_layers, is refused before: one module, several passes.)

    Found through transformers' generic API: under ``model.base_model``, the first list of ``num_hidden_layers``
    modules of one class (config ``attribute_map`` gives every family that name)."""
    import torch

    n = int(getattr(model.config, "num_hidden_layers", 0) or 0)
    if n <= 0:
        return None
    base = model.base_model
    layers = next((mod for mod in base.modules() if isinstance(mod, torch.nn.ModuleList) and len(mod) == n
                   and len({type(m) for m in mod}) == 1), None)
    if layers is None:
        return None
    emb = getattr(base, "embeddings", None)
    # the embeddings' last op (their norm), not the embeddings module itself: some embeddings modules are called
    # with input_ids=None when fed inputs_embeds, and LayerIG needs a module whose output it can replace
    emb = next((getattr(emb, n_) for n_ in ("LayerNorm", "norm", "layer_norm")
                if isinstance(getattr(emb, n_, None), torch.nn.Module)), emb)
    mods = ([emb] if emb is not None else []) + list(layers)
    names = (["embeddings"] if emb is not None else []) + [f"layer {i + 1}" for i in range(n)]
    return mods, names


def _hookable(mods: list, probe: Callable[[], Any]) -> list:
    """Per module, the one whose output LayerIG can take: the module itself when it returns tensors, else (a layer
    returning None beside its hidden states, as DeBERTa-v2's does without attentions; captum's hook clones every
    output) its last norm, which is the layer's last op in a post-norm encoder. ``probe`` runs one forward."""
    import torch

    outs: dict[int, Any] = {}
    hooks = [m.register_forward_hook(lambda mod, _i, o, j=j: outs.__setitem__(j, o)) for j, m in enumerate(mods)]
    try:
        with torch.no_grad():
            probe()
    finally:
        for h in hooks:
            h.remove()
    picked = []
    for j, mod in enumerate(mods):
        o = outs.get(j)
        if torch.is_tensor(o) or (isinstance(o, tuple) and o and all(torch.is_tensor(x) for x in o)):
            picked.append(mod)
            continue
        norms = [m for m in mod.modules()
                 if isinstance(m, torch.nn.LayerNorm) or "layernorm" in type(m).__name__.lower()]
        if not norms:
            raise NotApplicable(f"{type(mod).__name__} returns no tensor output LayerIG can hook, and has no norm as "
                                "its last op: per-layer attribution is not available for this architecture.")
        picked.append(norms[-1])
    return picked


def _layer_attributions(prep: Prepared, cfg: AttributionConfig, report: Callable[[float, str], None]):
    """LayerIG at the embeddings output and after each encoder layer, on a copy of the model."""
    from captum.attr import LayerIntegratedGradients

    fam = prep.lm.family
    if fam.shared_layers:
        raise NotApplicable(f"This model runs one shared layer at every depth ({fam.label}'s cross-layer sharing): "
                            "LayerIG hooks a module, so it cannot tell the passes apart. Per-layer attribution "
                            "needs a model with a layer of its own per depth.")
    work = copy.deepcopy(prep.lm.model)  # LayerIG hooks modules: never on the shared model
    found = _encoder_layers(work)
    if found is None:
        raise NotApplicable(f"The encoder layers of {type(work).__name__} could not be located (no list of "
                            "num_hidden_layers layer modules under its base model), so per-layer attribution is "
                            "not available for it. The methods above still are.")
    mods, names = found
    mods = _hookable(mods, lambda: _Scorer(work, prep)(prep.embeds))
    bs = _batch(cfg, prep.embeds.shape[1])
    rows = []
    for i, (mod, name) in enumerate(zip(mods, names)):
        report(i / len(mods), f"per-layer IG: {name}")
        lig = LayerIntegratedGradients(_Scorer(work, prep), mod)
        attr = lig.attribute(prep.embeds, baselines=prep.base, n_steps=cfg.layer_steps, internal_batch_size=bs)
        if isinstance(attr, (tuple, list)):
            attr = attr[0]
        rows.append(per_token(attr, "sum"))
    return np.stack(rows), tuple(names)


def _ranks(a: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their average rank (scipy's rankdata 'average')."""
    ranks = np.empty(len(a))
    ranks[np.argsort(a, kind="mergesort")] = np.arange(1, len(a) + 1)
    _, inv = np.unique(a, return_inverse=True)
    return (np.bincount(inv, ranks) / np.bincount(inv))[inv]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation (average ranks for ties); nan when either side is constant."""
    ra, rb = _ranks(np.asarray(a, float)), _ranks(np.asarray(b, float))
    if np.std(ra) == 0 or np.std(rb) == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


@model_op
def attribute(lm: LoadedModel, cfg: AttributionConfig, progress: Progress | None = None) -> AttributionResult:
    """Run every method in ``cfg`` on ``lm`` and return an AttributionResult.

    ``progress(fraction, message)`` is called between forward batches (captum calls our forward once per
    batch); it may raise to cancel. Raises ValueError (bad input) or NotApplicable (target the model lacks).
    A method that does not apply is skipped with its reason in ``skipped`` unless it was the only one.
    """
    import torch

    report = progress or (lambda frac, msg: None)
    prep = prepare(lm, cfg)
    seq = prep.embeds.shape[1]
    bs = _batch(cfg, seq)
    weights = {k: METHODS[k].cost(seq, cfg, bs).calls for k in cfg.methods}  # progress ticks per method
    n_layers = int(getattr(lm.model.config, "num_hidden_layers", 1)) + 1
    layer_cost = math.ceil(cfg.layer_steps / bs) * n_layers if cfg.layer_steps else 0
    total = sum(weights.values()) + layer_cost
    done = [0]

    methods: list[MethodAttribution] = []
    skipped: list[tuple[str, str]] = []
    with torch.no_grad():
        both = _Scorer(lm.model, prep)(torch.cat([prep.embeds, prep.base]))  # (2,): f(x), f(baseline)
        f_x, f_b = float(both[0]), float(both[1])
    prep.f_x, prep.f_b = f_x, f_b
    for key in cfg.methods:
        start, label = done[0], METHODS[key].label

        def tick(key=key, start=start, label=label):
            done[0] = min(done[0] + 1, start + weights[key])
            report(done[0] / total, f"{label}: batch {done[0] - start}/{weights[key]}")

        report(done[0] / total, f"{label} …")
        try:
            methods.append(_run_method(key, prep, cfg, tick))
        except NotApplicable as e:
            skipped.append((key, str(e)))
        done[0] = start + weights[key]
    if not methods:
        raise NotApplicable(" ".join(f"{METHODS[k].label}: {why}" for k, why in skipped))
    layer_scores, layer_names, notes = None, (), list(prep.notes)
    if cfg.layer_steps:
        base_done = done[0]
        try:
            layer_scores, layer_names = _layer_attributions(
                prep, cfg, lambda fr, msg: report((base_done + fr * layer_cost) / total, msg))
        except NotApplicable as e:
            skipped.append(("layers", str(e)))
    keep = ~prep.special
    m = len(methods)
    corr = np.eye(m)
    for i in range(m):
        for j in range(i + 1, m):
            corr[i, j] = corr[j, i] = spearman(methods[i].scores[keep], methods[j].scores[keep])
    report(1.0, "done")
    return AttributionResult(
        family=lm.spec.family, checkpoint=lm.spec.checkpoint, target=cfg.target, target_label=prep.target_label,
        tokens=tuple(lm.tokenizer.convert_ids_to_tokens(prep.ids[0].tolist())), special=prep.special,
        f_x=f_x, f_baseline=f_b, baseline=cfg.baseline, methods=tuple(methods), rank_corr=corr,
        layer_scores=layer_scores, layer_names=layer_names, candidates=prep.candidates, skipped=tuple(skipped),
        notes=tuple(notes))


# ------------------------------------------------------------------------------------------------ batch
@dataclass(frozen=True)
class BatchRow:
    text: str
    text_b: str = ""
    word: str = ""
    class_index: int | None = None


@dataclass(frozen=True)
class BatchResult:
    rows: tuple[BatchRow, ...]
    results: tuple[AttributionResult | None, ...]  # None where the row failed
    errors: tuple[str | None, ...]


def read_batch_csv(data: str | bytes) -> tuple[BatchRow, ...]:
    """Parse a CSV with a ``text`` column (optional ``text_b``, ``word``, ``class``). Raises ValueError."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ValueError("The CSV is not UTF-8 text: save it as UTF-8 and upload it again.") from None
    if not data.strip():
        raise ValueError("The CSV is empty: it needs a header row with a 'text' column and one sentence per row.")
    reader = csv.DictReader(io.StringIO(data))
    cols = [c.strip().lower() for c in (reader.fieldnames or [])]
    if "text" not in cols:
        raise ValueError(f"The CSV needs a 'text' column (found: {', '.join(cols) or 'none'}). "
                         "Add a header row: text[,text_b][,word][,class].")
    rows = []
    for n, raw in enumerate(reader, start=2):
        r = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items()}
        if not r.get("text"):
            continue
        cls = r.get("class", "")
        if cls and not cls.isdigit():
            raise ValueError(f"Line {n}: class must be a class number (0, 1, …), got {cls!r}.")
        rows.append(BatchRow(r["text"], r.get("text_b", ""), r.get("word", ""), int(cls) if cls else None))
    if not rows:
        raise ValueError("The CSV has no non-empty 'text' rows.")
    if len(rows) > MAX_BATCH_ROWS:
        raise ValueError(f"The CSV has {len(rows)} rows; the limit is {MAX_BATCH_ROWS}. Split it.")
    return tuple(rows)


@model_op
def attribute_batch(lm: LoadedModel, rows: tuple[BatchRow, ...], settings: dict[str, Any],
                    progress: Progress | None = None) -> BatchResult:
    """Attribute each row: ``settings`` are AttributionConfig fields (target, methods, baseline, ...) without the
    text; each row brings its text, text_b, and optionally its word and class.

    A row that fails (bad word, no mask, too long) keeps its error message; the others go on.
    """
    report = progress or (lambda frac, msg: None)
    check_batch_settings(settings)
    results: list[AttributionResult | None] = []
    errors: list[str | None] = []
    for i, row in enumerate(rows):
        def sub(frac: float, msg: str, i=i) -> None:
            report((i + frac) / len(rows), f"row {i + 1}/{len(rows)}: {msg}")
        try:
            params = {**settings, "layer_steps": 0, "text": row.text, "text_b": row.text_b}
            if row.word:
                params["word"] = row.word
            if row.class_index is not None:
                params["class_index"] = row.class_index
            c = AttributionConfig(**params)
            results.append(attribute(lm, c, sub))
            errors.append(None)
        except ValueError as e:
            results.append(None)
            errors.append(str(e))
    return BatchResult(tuple(rows), tuple(results), tuple(errors))


def check_batch_settings(settings: dict[str, Any]) -> None:
    """Raise ValueError (with the fix) when batch settings are invalid, before any row runs."""
    bad = {"text", "text_b"} & set(settings)
    if bad:
        raise ValueError(f"Batch settings must not hold {', '.join(sorted(bad))}: each CSV row brings its own text.")
    try:
        AttributionConfig(**settings, text="check", text_b="check")
    except TypeError as e:
        raise ValueError(f"Unknown batch setting: {e}") from None


def batch_to_csv(batch: BatchResult) -> str:
    """Long format: row, text, target, method, token_index, token, special, score (errors as rows too)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["row", "text", "target", "method", "token_index", "token", "special", "score", "error"])
    for i, (row, res, err) in enumerate(zip(batch.rows, batch.results, batch.errors), start=1):
        if res is None:
            w.writerow([i, row.text, "", "", "", "", "", "", err])
            continue
        for m in res.methods:
            for t, (tok, sp, s) in enumerate(zip(res.tokens, res.special, m.scores)):
                w.writerow([i, row.text, res.target_label, m.method, t, tok, int(sp), f"{s:.6g}", ""])
    return buf.getvalue()


# ------------------------------------------------------------------------------------------------ HTML
def color(value: float, scale: float) -> str:
    """Diverging colour: red for negative, white at 0, green for positive, saturating at |scale|."""
    v = 0.0 if scale <= 0 else max(-1.0, min(1.0, value / scale))
    if v >= 0:
        r, g, b = (int(255 - v * (255 - c)) for c in (26, 152, 80))
    else:
        r, g, b = (int(255 + v * (255 - c)) for c in (215, 48, 39))
    return f"#{r:02x}{g:02x}{b:02x}"


def tokens_html(tokens: tuple[str, ...], scores: np.ndarray, special: np.ndarray | None = None) -> str:
    """Tokens as escaped <span>s coloured by score (diverging), with the score as a tooltip."""
    scale = float(np.max(np.abs(scores))) if len(scores) else 0.0
    spans = []
    for i, (t, s) in enumerate(zip(tokens, scores)):
        sp = special is not None and bool(special[i])
        style = f"background:{color(float(s), scale)};padding:2px 3px;margin:1px;border-radius:3px;" + \
                ("opacity:.55;font-style:italic;" if sp else "")
        spans.append(f'<span class="attr-tok" style="{style}" title="{html.escape(f"{s:+.4f}")}">'
                     f"{html.escape(t)}</span>")
    return '<div class="attr-line" style="line-height:2;font-family:monospace">' + " ".join(spans) + "</div>"


def batch_to_html(batch: BatchResult) -> str:
    """A standalone HTML page (no scripts, no external resources) of every row's coloured tokens."""
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>EncoderLab attributions</title>",
             "<style>body{font-family:sans-serif;margin:2em}h3{margin-bottom:.2em}.m{color:#555;font-size:.9em}"
             ".err{color:#b00}</style></head><body><h1>Attributions</h1>",
             "<p class='m'>Green pushes the explained score up, red pushes it down; faded tokens are special "
             "tokens kept fixed in the baseline.</p>"]
    for i, (row, res, err) in enumerate(zip(batch.rows, batch.results, batch.errors), start=1):
        parts.append(f"<h3>{i}. {html.escape(row.text)}</h3>")
        if res is None:
            parts.append(f"<p class='err'>{html.escape(err or '')}</p>")
            continue
        parts.append(f"<p class='m'>{html.escape(res.target_label)} · f(x) = {res.f_x:+.3f}</p>")
        for m in res.methods:
            parts.append(f"<p class='m'>{html.escape(m.label)}</p>" + tokens_html(res.tokens, m.scores, res.special))
    parts.append("</body></html>")
    return "".join(parts)


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

"""Activation patching (causal tracing, Meng et al. 2022; practice after Heimersheim & Nanda 2024) and attribution
patching (Nanda 2023) for every family whose layers the registry can locate.

Two inputs of the same token length, a clean one and a corrupted one, and a metric: the logit difference between the
clean and the corrupted answer at the one ``[MASK]`` (target "mask"), between the NSP/SOP classes (target "pair") or
between a classifier's classes (target "class"). Exact patching runs one input (the base) with one activation taken
from the other input's run (the source), for every site (core.inspect.patching_sites):

- ``resid`` (depths + 1, seq): the residual stream per (depth, position), row 0 the embeddings;
- ``heads`` (layers, heads) over all positions, and ``heads_pos`` (layers, heads, seq) per position;
- ``mlp`` (layers,) over all positions, and ``mlp_pos`` (layers, seq) per position.

Denoising patches clean activations into the corrupted run; noising patches corrupted ones into the clean run. Every
number is normalised the same way: 0 is the corrupted run's metric, 1 the clean run's. The patched forwards are
batched, one site per row. Attribution patching estimates every site from two forwards and one backward: the base
metric plus (source activation - base activation) . d metric / d activation at the base run, summed over the site;
it is exact where the metric is linear in the site's activation.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.base.messages import Message, msg
from core.base.text import display_piece, with_mask_token
from core.inspect.attribution_inputs import target_classes, target_logits, word_id
from core.inspect.patching_sites import KINDS, PatchError, Run, Sites, hooked, running, sites
from core.models.spec import LoadedModel, max_tokens
from core.registry import mlm_head
from core.runtime.backend import model_op

TARGETS = ("mask", "pair", "class")
DIRECTIONS = ("denoise", "noise")  # clean into corrupted, or corrupted into clean
ROWS_PER_FORWARD = 32  # patched rows (one site each) per forward
MAX_ROWS = 20000  # one request's patched rows at most (bert-base, 32 tokens, every site per position: 5,564)
# a metric whose clean and corrupted values differ by less than this share of their size: nothing to restore
SAME_METRIC = 1e-6
# below this many logits between the clean and the corrupted metric, the normalised numbers are ratios of small
# differences: the result says so
SMALL_DIFFERENCE = 1.0
KEYS = ("resid", "heads", "heads_pos", "mlp", "mlp_pos")
CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

__all__ = ["PatchConfig", "PatchError", "PatchResult", "patch", "patched_metrics", "plan", "swap_word", "count_rows"]


@dataclass(frozen=True)
class PatchConfig:
    """What to patch and how. ``*_b``: the second sentence of each input, for the pair target. An empty answer is
    the model's own: the clean run's top guess, and the corrupted run's best guess other than it."""

    clean: str
    corrupted: str
    target: str = "mask"
    clean_b: str = ""
    corrupted_b: str = ""
    clean_answer: str = ""
    corrupted_answer: str = ""
    direction: str = "denoise"
    kinds: tuple[str, ...] = KINDS
    head_positions: bool = True  # heads also per (layer, head, position): most of the rows

    def __post_init__(self) -> None:
        if not self.clean.strip() or not self.corrupted.strip():
            raise PatchError(msg("patching.empty_text"))
        if self.target not in TARGETS:
            raise PatchError(msg("patching.unknown_target", target=self.target, choices=", ".join(TARGETS)))
        if self.direction not in DIRECTIONS:
            raise PatchError(msg("patching.unknown_direction", direction=self.direction, choices=", ".join(DIRECTIONS)))
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown or not self.kinds:
            raise PatchError(msg("patching.unknown_kinds", kinds=", ".join(unknown), choices=", ".join(KINDS)))
        object.__setattr__(self, "kinds", tuple(k for k in KINDS if k in self.kinds))
        if self.target == "pair" and not (self.clean_b.strip() and self.corrupted_b.strip()):
            raise PatchError(msg("patching.pair_needs_both"))


@dataclass(frozen=True, eq=False)
class PatchResult:
    """Exact and attribution patching of one (clean, corrupted) pair, each site normalised (0 corrupted, 1 clean),
    keyed as the module docstring says; a kind the model or the config leaves out is absent."""

    checkpoint: str
    config: PatchConfig
    tokens: tuple[str, ...]  # the clean input's pieces, as a person reads them
    corrupted_tokens: tuple[str, ...]
    answers: tuple[str, str]  # the clean and the corrupted answer (a piece, or a class name)
    position: int  # the mask's position (-1 for the pair and class targets)
    clean_metric: float
    corrupted_metric: float
    n_layers: int = 0
    exact: dict[str, np.ndarray] = field(default_factory=dict)
    attribution: dict[str, np.ndarray] = field(default_factory=dict)
    exact_seconds: float = 0.0
    attribution_seconds: float = 0.0
    rows: int = 0  # patched forwards (rows) exact patching ran
    notes: tuple[Message, ...] = ()

    def correlation(self, key: str | None = None) -> float:
        """Pearson correlation of exact and attribution patching over ``key`` (None: every per-position key); NaN
        when either side does not vary."""
        keys = [key] if key else [k for k in ("resid", "heads_pos", "mlp_pos") if k in self.exact]
        a = np.concatenate([self.exact[k].ravel() for k in keys]) if keys else np.zeros(0)
        b = np.concatenate([self.attribution[k].ravel() for k in keys]) if keys else np.zeros(0)
        if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
            return float("nan")
        return float(np.corrcoef(a, b)[0, 1])

    @property
    def speed_ratio(self) -> float:
        """How many times faster attribution patching ran than exact patching."""
        return self.exact_seconds / max(self.attribution_seconds, 1e-9)


# ---------------------------------------------------------------------------------------------- inputs
def _pieces(tok, ids: Sequence[int]) -> tuple[str, ...]:
    return tuple(display_piece(p, tok) for p in tok.convert_ids_to_tokens(list(ids)))


def _n_tokens(tok, text: str) -> int:
    return len(tok(with_mask_token(text, tok.mask_token))["input_ids"])


def swap_word(tokenizer, text: str, old: str, new: str) -> str:
    """``text`` with its first whole word ``old`` replaced by ``new`` (the corrupted input made from the clean one).
    Raises PatchError when ``old`` is not a word of the text, or when the swap changes the token count."""
    word = old.strip()
    # a whole word: no letter or digit right before or after it, except beside Chinese, which has no spaces
    before = "" if word[:1] and CJK.match(word[0]) else r"(?<!\w)"
    after = "" if word[-1:] and CJK.match(word[-1]) else r"(?!\w)"
    pattern = re.compile(before + re.escape(word) + after)
    if not word or not new.strip() or not pattern.search(text):
        raise PatchError(msg("patching.word_not_found", word=old.strip()))
    out = pattern.sub(lambda _: new.strip(), text, count=1)
    if _n_tokens(tokenizer, text) != _n_tokens(tokenizer, out):
        split_old = " · ".join(display_piece(p, tokenizer) for p in tokenizer.tokenize(" " + old.strip()))
        split_new = " · ".join(display_piece(p, tokenizer) for p in tokenizer.tokenize(" " + new.strip()))
        raise PatchError(
            msg("patching.swap_lengths_differ", old=old, new=new, old_pieces=split_old, new_pieces=split_new)
        )
    return out


def answer_fits(lm: LoadedModel, word: str) -> bool:
    """Whether ``word``, after a space, is one token of ``lm``'s vocabulary (an answer the mask metric can read)."""
    try:
        word_id(lm, word, at_start=False)
    except ValueError:
        return False
    return True


def count_rows(n_tokens: int, st: Sites, cfg: PatchConfig) -> int:
    """Patched rows exact patching runs on ``st`` for ``n_tokens`` tokens."""
    return len(_site_list(st, n_tokens, cfg))


def plan(lm: LoadedModel, cfg: PatchConfig) -> int:
    """The patched rows exact patching of ``cfg`` on ``lm`` would run, after every check that needs no forward (the
    token lengths, the mask, the answers, the number of rows): a page calls it before it starts the work. Raises
    PatchError as ``patch`` would."""
    enc_c = _encode(lm, cfg.clean, cfg.clean_b)
    position = _check_inputs(lm, cfg, enc_c, _encode(lm, cfg.corrupted, cfg.corrupted_b))
    if cfg.target == "mask":
        for word in (cfg.clean_answer, cfg.corrupted_answer):
            if word.strip():
                _word(lm, word, position)
    rows = count_rows(int(enc_c["input_ids"].shape[1]), sites(lm.model), cfg)
    if rows > MAX_ROWS:
        raise PatchError(msg("patching.too_many_rows", rows=rows, limit=MAX_ROWS))
    return rows


def _encode(lm: LoadedModel, text: str, text_b: str) -> dict[str, Any]:
    tok = lm.tokenizer
    texts = [with_mask_token(x, tok.mask_token) for x in ((text, text_b) if text_b.strip() else (text,))]
    enc = tok(*texts, return_tensors="pt")
    return {k: v.to(lm.device) for k, v in enc.items() if k in tok.model_input_names}


def _check_inputs(lm: LoadedModel, cfg: PatchConfig, enc_c: dict, enc_x: dict) -> int:
    """The mask's position (-1 for the pair and class targets); PatchError for inputs patching cannot use."""
    tok = lm.tokenizer
    ids_c, ids_x = enc_c["input_ids"][0].tolist(), enc_x["input_ids"][0].tolist()
    if len(ids_c) != len(ids_x):
        raise PatchError(
            msg(
                "patching.lengths_differ",
                n_clean=len(ids_c),
                n_corrupted=len(ids_x),
                clean=" · ".join(_pieces(tok, ids_c)),
                corrupted=" · ".join(_pieces(tok, ids_x)),
            )
        )
    limit = max_tokens(lm.model, tok)
    if len(ids_c) > limit:
        raise PatchError(msg("patching.too_long", n=len(ids_c), limit=limit))
    if cfg.target != "mask":
        return -1
    masks_c = [i for i, t in enumerate(ids_c) if t == tok.mask_token_id]
    masks_x = [i for i, t in enumerate(ids_x) if t == tok.mask_token_id]
    if len(masks_c) != 1 or masks_c != masks_x:
        raise PatchError(msg("patching.one_mask", mask=tok.mask_token or "[MASK]"))
    if mlm_head(lm.model) is None:
        raise PatchError(msg("patching.no_mlm_head", model_class=type(lm.model).__name__))
    return masks_c[0]


def _scores(lm: LoadedModel, target: str, position: int, enc: dict, rows: int = 1):
    """The target's logits (rows, vocabulary or classes) of ``enc`` (ids, or ``inputs_embeds``, with the masks)
    repeated over ``rows`` batch rows."""
    batch = {k: v.expand(rows, *v.shape[1:]) for k, v in enc.items()}
    logits = target_logits(lm.model, target, batch, position)
    if logits is None:
        raise PatchError(msg("patching.no_target_logits", target=target, model_class=type(lm.model).__name__))
    return logits


def _answers(lm: LoadedModel, cfg: PatchConfig, position: int, clean, corrupted) -> tuple[int, int, tuple[str, str]]:
    """The clean and the corrupted answer (vocabulary ids or classes) and how they read."""
    if cfg.target == "mask" and cfg.clean_answer.strip():
        a = _word(lm, cfg.clean_answer, position)
    else:
        a = int(clean.argmax())
    if cfg.target == "mask" and cfg.corrupted_answer.strip():
        b = _word(lm, cfg.corrupted_answer, position)
    else:
        b = next(int(i) for i in corrupted.argsort(descending=True).tolist() if i != a)
    if a == b:
        raise PatchError(msg("patching.same_answers", answer=cfg.clean_answer.strip()))
    if cfg.target == "mask":
        return a, b, (_pieces(lm.tokenizer, [a])[0], _pieces(lm.tokenizer, [b])[0])
    names = target_classes(lm, cfg.target)  # NSP/SOP's classes by name, or the classifier's labels
    return a, b, (names[a] if a < len(names) else str(a), names[b] if b < len(names) else str(b))


def _word(lm: LoadedModel, word: str, position: int) -> int:
    try:
        return word_id(lm, word, at_start=position <= 1)
    except ValueError as e:
        raise PatchError(msg("patching.bad_answer", word=word.strip(), reason=str(e))) from e


# ---------------------------------------------------------------------------------------------- runs
@dataclass
class _Pair:
    """Both inputs run once through the hooks: encodings, activations, the metric and its two values."""

    st: Sites
    owner: object
    enc_c: dict
    enc_x: dict
    acts_c: dict
    acts_x: dict
    position: int
    answers: tuple[str, str]
    metric: Callable[[Any], Any]
    m_c: float
    m_x: float

    def base_and_source(self, direction: str) -> tuple[dict, dict]:
        return (self.enc_x, self.acts_c) if direction == "denoise" else (self.enc_c, self.acts_x)


def _capture(lm, cfg, st, owner, enc, position):
    import torch

    run = Run(owner, capture=True)
    with torch.no_grad(), running(run):
        logits = _scores(lm, cfg.target, position, enc, 1)
    return logits[0], {k: _unbatched(st, k, v[0]) for k, v in run.acts.items()}


def _unbatched(st: Sites, key: tuple[str, int], x):
    """One row's activation: heads as (seq, heads, head_dim), the rest (seq, width)."""
    return x.unflatten(-1, (st.n_heads, st.head_dim)) if key[0] == "heads" else x


def _prepare(lm: LoadedModel, cfg: PatchConfig, st: Sites, owner: object) -> _Pair:
    enc_c = _encode(lm, cfg.clean, cfg.clean_b)
    enc_x = _encode(lm, cfg.corrupted, cfg.corrupted_b)
    position = _check_inputs(lm, cfg, enc_c, enc_x)
    logits_c, acts_c = _capture(lm, cfg, st, owner, enc_c, position)
    logits_x, acts_x = _capture(lm, cfg, st, owner, enc_x, position)
    a, b, answers = _answers(lm, cfg, position, logits_c, logits_x)

    def metric(logits):
        return logits[:, a].double() - logits[:, b].double()

    m_c, m_x = float(metric(logits_c[None])[0]), float(metric(logits_x[None])[0])
    if abs(m_c - m_x) <= SAME_METRIC * max(abs(m_c), abs(m_x), 1e-12):
        raise PatchError(msg("patching.same_metric", clean=answers[0], corrupted=answers[1]))
    return _Pair(st, owner, enc_c, enc_x, acts_c, acts_x, position, answers, metric, m_c, m_x)


Site = tuple[str, int, "int | None", "int | None", str, tuple[int, ...]]  # kind, index, position, head, key, where


def _site_list(st: Sites, n: int, cfg: PatchConfig) -> list[Site]:
    """Every site exact patching runs: (kind, index, position or None for all, head or None, result key, where)."""
    out: list[Site] = []
    L, H = st.n_layers, st.n_heads
    if "resid" in cfg.kinds:
        out += [("resid", d, p, None, "resid", (d, p)) for d in range(L + 1) for p in range(n)]
    if "heads" in cfg.kinds and "heads" in st.modules:
        out += [("heads", la, None, h, "heads", (la, h)) for la in range(L) for h in range(H)]
        if cfg.head_positions:
            out += [("heads", la, p, h, "heads_pos", (la, h, p)) for la in range(L) for h in range(H) for p in range(n)]
    if "mlp" in cfg.kinds and "mlp" in st.modules:
        out += [("mlp", la, None, None, "mlp", (la,)) for la in range(L)]
        out += [("mlp", la, p, None, "mlp_pos", (la, p)) for la in range(L) for p in range(n)]
    return out


def _patches(chunk: Sequence[Site], src: dict, n: int) -> dict:
    """(kind, index) -> (rows, positions, heads or None, values) for one forward: row r patches chunk[r]."""
    import torch

    groups: dict[tuple[str, int], tuple[list[int], list[int], list[int]]] = {}
    for row, (kind, idx, pos, head, _, _) in enumerate(chunk):
        if not kind:  # a row that patches nothing
            continue
        rows, positions, heads = groups.setdefault((kind, idx), ([], [], []))
        for p in range(n) if pos is None else (pos,):
            rows.append(row)
            positions.append(p)
            heads.append(-1 if head is None else head)
    out = {}
    for key, (rows, positions, heads) in groups.items():
        a = src[key]
        r, p = torch.tensor(rows, device=a.device), torch.tensor(positions, device=a.device)
        if key[0] == "heads":
            h = torch.tensor(heads, device=a.device)
            out[key] = (r, p, h, a[p, h])
        else:
            out[key] = (r, p, None, a[p])
    return out


def _exact(lm, cfg, pair: _Pair, listed: Sequence[Site], progress, rows_per_forward: int) -> list[float]:
    import torch

    base, src = pair.base_and_source(cfg.direction)
    n = int(base["input_ids"].shape[1])
    delta = pair.m_c - pair.m_x
    vals: list[float] = []
    with torch.no_grad():
        for i in range(0, len(listed), rows_per_forward):
            chunk = listed[i : i + rows_per_forward]
            with running(Run(pair.owner, patches=_patches(chunk, src, n))):
                m = pair.metric(_scores(lm, cfg.target, pair.position, base, len(chunk)))
            vals += ((m - pair.m_x) / delta).cpu().tolist()
            if progress is not None:
                done = i + len(chunk)
                progress(done / len(listed), msg("progress.patching.exact", done=done, total=len(listed)))
    return vals


def _attribute(lm, cfg, pair: _Pair, listed: Sequence[Site]) -> dict[str, np.ndarray]:
    """Attribution patching: the source run's activations, the base run's with gradients, one backward."""
    import torch

    st = pair.st
    denoise = cfg.direction == "denoise"
    _, src = _capture(lm, cfg, st, pair.owner, pair.enc_c if denoise else pair.enc_x, pair.position)
    base, _ = pair.base_and_source(cfg.direction)
    run = Run(pair.owner, capture=True)
    emb = lm.model.get_input_embeddings()
    fed = {k: v for k, v in base.items() if k != "input_ids"}
    with torch.enable_grad(), running(run):
        # the embeddings carry the graph, so a model whose weights want no gradient still gives activations one
        embeds = emb(base["input_ids"]).detach().requires_grad_(True)
        m = pair.metric(_scores(lm, cfg.target, pair.position, {**fed, "inputs_embeds": embeds}))
        keys = [k for k in run.acts if k[0] in cfg.kinds]
        grads = torch.autograd.grad(m.sum(), [run.acts[k] for k in keys], allow_unused=True)
    m_base = float(m[0].detach())
    est = {}
    for k, g in zip(keys, grads, strict=True):
        act = _unbatched(st, k, run.acts[k][0].detach())
        g = torch.zeros_like(act) if g is None else _unbatched(st, k, g[0])
        est[k] = ((src[k] - act) * g).sum(-1).double().cpu().numpy()  # (seq,), heads: (seq, heads)
    out = _empty(st, int(base["input_ids"].shape[1]), listed)
    delta = pair.m_c - pair.m_x
    for kind, idx, p, h, key, where in listed:
        e = est[(kind, idx)]
        v = e if h is None else e[:, h]
        out[key][where] = (m_base + (v.sum() if p is None else v[p]) - pair.m_x) / delta
    return out


def _empty(st: Sites, n: int, listed: Sequence[Site]) -> dict[str, np.ndarray]:
    L, H = st.n_layers, st.n_heads
    shapes = {"resid": (L + 1, n), "heads": (L, H), "heads_pos": (L, H, n), "mlp": (L,), "mlp_pos": (L, n)}
    return {k: np.zeros(shapes[k], dtype=np.float64) for k in KEYS if any(s[4] == k for s in listed)}


@model_op
def patch(lm: LoadedModel, cfg: PatchConfig, progress: Callable[..., None] | None = None) -> PatchResult:
    """Exact and attribution patching of ``cfg`` on ``lm`` (a LoadedModel whose head serves ``cfg.target``).
    ``progress(fraction, message)`` is called after each forward (a job's ctx.progress: it raises on Cancel).
    Raises PatchError for inputs of different token lengths, not one mask in the same place, an answer that is not
    one token, equal answers or metrics, too many rows, or a model whose layers cannot be located."""
    t0 = time.perf_counter()
    st = sites(lm.model)
    with hooked(st) as owner:
        pair = _prepare(lm, cfg, st, owner)
        n = int(pair.enc_c["input_ids"].shape[1])
        listed = _site_list(st, n, cfg)
        if len(listed) > MAX_ROWS:
            raise PatchError(msg("patching.too_many_rows", rows=len(listed), limit=MAX_ROWS))
        exact = _empty(st, n, listed)
        for s, v in zip(listed, _exact(lm, cfg, pair, listed, progress, ROWS_PER_FORWARD), strict=True):
            exact[s[4]][s[5]] = v
        exact_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        attribution = _attribute(lm, cfg, pair, listed)
        attr_s = time.perf_counter() - t1
    notes = [msg(f"patching.no_{k}") for k in ("heads", "mlp") if k in cfg.kinds and k not in st.modules]
    if abs(pair.m_c - pair.m_x) < SMALL_DIFFERENCE:
        notes.append(msg("patching.small_difference", logits=f"{abs(pair.m_c - pair.m_x):.2f}"))
    for grid in (*exact.values(), *attribution.values()):
        grid.setflags(write=False)
    tok = lm.tokenizer
    return PatchResult(
        checkpoint=lm.spec.checkpoint,
        config=cfg,
        tokens=_pieces(tok, pair.enc_c["input_ids"][0].tolist()),
        corrupted_tokens=_pieces(tok, pair.enc_x["input_ids"][0].tolist()),
        answers=pair.answers,
        position=pair.position,
        clean_metric=pair.m_c,
        corrupted_metric=pair.m_x,
        n_layers=st.n_layers,
        exact=exact,
        attribution=attribution,
        exact_seconds=exact_s,
        attribution_seconds=attr_s,
        rows=len(listed),
        notes=tuple(notes),
    )


@model_op
def patched_metrics(lm: LoadedModel, cfg: PatchConfig, chosen: Sequence[tuple]) -> np.ndarray:
    """The normalised metric with each entry of ``chosen`` patched in ``cfg.direction``, one forward row each: an
    entry is (kind, index, position or None for every position, head or None); () patches nothing. For checks and
    single questions; ``patch`` runs every site."""
    st = sites(lm.model)
    with hooked(st) as owner:
        pair = _prepare(lm, cfg, st, owner)
        listed: list[Site] = [(*c, "", ()) if c else ("", 0, None, None, "", ()) for c in chosen]
        return np.array(_exact(lm, cfg, pair, listed, None, ROWS_PER_FORWARD))

"""Layer lens: what the MLM head would predict at a mask after every layer, embeddings included.

Raw lens ("logit lens", nostalgebraist 2020): one forward of the text, the hidden state at each mask after every
layer (depth 0 = the embeddings, depth L = the last layer), and the model's own MLM head applied to all of them in
one batched product. The last row is exactly Fill-mask's answer: the same tokenization (core.predict.fill_mask.encode), the
same layers and kernels (core.models.masked_forward, packed linears on CPU), the same head
(core.inspect.lens_forward).

With ``mode="tuned"`` each intermediate depth first goes through the translator a tuned lens learnt for it
(core.inspect.tuned_lens: training, saving and loading them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from core.base.messages import msg
from core.base.text import display_piece
from core.inspect.lens_forward import LensError, apply_head, layer_states, n_layers
from core.inspect.tuned_lens import load_tuned
from core.models.loading import LoadedModel
from core.predict.fill_mask import Candidate, FillMaskConfig, check_mlm, count_masks, encode, lone_marker_ids
from core.runtime.backend import model_op

MODES = ("raw", "tuned")


# ---------------------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class LensConfig:
    """What to look at: a text with one or more [MASK]s, how many candidates per depth, raw or tuned lens."""

    text: str
    top_k: int = 5
    mode: str = "raw"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(msg("lens.unknown_lens_mode_use", mode=self.mode))
        if isinstance(self.text, str) and self.text.strip() and count_masks(self.text) == 0:
            raise ValueError(msg("lens.no_mask_in_text"))
        self.fill_config()  # the text rules and messages of Fill-mask (empty, too many masks, too long, top-k)

    def fill_config(self) -> FillMaskConfig:
        """The Fill-mask config of the same text (its first pass is the lens's last row)."""
        return FillMaskConfig(self.text, top_k=self.top_k)


# ---------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class MaskLens:
    """One mask seen through the lens at every depth (index 0 = embeddings .. L = last layer)."""

    position: int  # index into LensResult.tokens
    rows: tuple[tuple[Candidate, ...], ...]  # per depth: the top-k candidates
    answer: Candidate  # the last layer's first choice (Fill-mask's answer)
    answer_rank: tuple[int, ...]  # per depth: its rank (0 = first choice at that depth)
    answer_prob: tuple[float, ...]  # per depth: its probability
    kl: tuple[float, ...]  # per depth: KL(last layer || this depth) in nats (0 at the last)


@dataclass(frozen=True)
class LensResult:
    checkpoint: str
    family: str
    text: str  # as the user wrote it
    model_text: str
    tokens: tuple[str, ...]
    mask_positions: tuple[int, ...]
    n_layers: int  # depths are 0..n_layers
    mode: str  # "raw" or "tuned"
    masks: tuple[MaskLens, ...]
    latency_ms: float
    notes: tuple[str, ...] = ()
    truncation: str | None = None
    lens_key: str | None = None  # tuned: the key of the translators used

    @property
    def depths(self) -> int:
        return self.n_layers + 1


# ---------------------------------------------------------------------------------------------- forward
@model_op
def lens(lm: LoadedModel, cfg: LensConfig, tuned=None) -> LensResult:
    """The lens on ``cfg.text``: per mask, the top-k at every depth and the last layer's answer across depth.

    ``cfg.mode == "tuned"`` uses ``tuned`` (or this model's saved translators). Raises FillMaskError for a model
    without an MLM head or input it cannot read, LensError when a tuned lens is asked for and none exists.
    """
    import torch

    check_mlm(lm)
    t0 = time.perf_counter()
    key = None
    if cfg.mode == "tuned":
        if tuned is None:
            found = load_tuned(lm)
            if found is None:
                raise LensError(msg("lens.no_tuned_lens"))
            tuned, report = found
            key = report.key
        if tuned.n_layers != n_layers(lm.model):
            raise LensError(
                msg("lens.translator_layers_differ", n_layers=tuned.n_layers, model_layers=n_layers(lm.model))
            )
    tok, model = lm.tokenizer, lm.model
    enc = encode(lm, cfg.fill_config())
    L = n_layers(model)
    with torch.inference_mode():
        ids = torch.tensor([enc.ids], device=lm.device)
        states = layer_states(model, ids, list(enc.mask_positions))  # (D, M, H)
        if tuned is not None:
            states = torch.cat([tuned(states[:L]), states[L:]])
        d, m, h = states.shape
        logits = apply_head(model, states.reshape(d * m, h)).float()  # one head call for every depth: (D*M, V)
        logp = logits.log_softmax(-1).view(d, m, -1)
        probs = logp.exp()
        lone = lone_marker_ids(tok)
        if lone:  # as Fill-mask: a bare word-start marker is never an answer for a typed [MASK]
            probs[..., torch.tensor(lone, device=probs.device)] = 0.0
        top_p, top_i = torch.topk(probs, cfg.top_k, dim=-1)  # (D, M, k)
        answer = top_i[L, :, 0]  # (M,)
        ans_p = probs.gather(-1, answer[None, :, None].expand(d, m, 1))  # (D, M, 1)
        ranks = (probs > ans_p).sum(-1)  # (D, M)
        kl = (logp[L].exp()[None] * (logp[L][None] - logp)).sum(-1).clamp_min(0.0)  # KL(last || depth): (D, M)
    ids_all = top_i.flatten().tolist()
    uniq = sorted(set(ids_all))
    pieces = dict(zip(uniq, tok.convert_ids_to_tokens(uniq)))
    texts = {i: display_piece(pieces[i], tok) for i in uniq}  # the text each piece stands for, no Ġ/▁
    tp, ti = top_p.tolist(), top_i.tolist()
    ans_p_l, ranks_l, kl_l = ans_p[..., 0].tolist(), ranks.tolist(), kl.tolist()
    masks = []
    for j, pos in enumerate(enc.mask_positions):
        rows = tuple(
            tuple(Candidate(i, pieces[i], texts[i], float(p)) for i, p in zip(ti[dd][j], tp[dd][j])) for dd in range(d)
        )
        masks.append(
            MaskLens(
                position=pos,
                rows=rows,
                answer=rows[L][0],
                answer_rank=tuple(int(ranks_l[dd][j]) for dd in range(d)),
                answer_prob=tuple(float(ans_p_l[dd][j]) for dd in range(d)),
                kl=tuple(float(kl_l[dd][j]) for dd in range(d)),
            )
        )
    return LensResult(
        checkpoint=lm.spec.checkpoint,
        family=lm.spec.family,
        text=cfg.text,
        model_text=enc.model_text,
        tokens=tuple(tok.convert_ids_to_tokens(list(enc.ids))),
        mask_positions=enc.mask_positions,
        n_layers=L,
        mode=cfg.mode,
        masks=tuple(masks),
        latency_ms=(time.perf_counter() - t0) * 1000,
        notes=enc.notes,
        truncation=enc.truncation,
        lens_key=key,
    )

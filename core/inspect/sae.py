"""Sparse-autoencoder (SAE) features of one layer: a TopK SAE (Gao et al. 2024, "Scaling and evaluating sparse
autoencoders") trained on the hidden states after one layer of the current model, and its quality figures.

The SAE: x (a token's state after the layer, centred by b_pre and scaled by one number so its mean squared norm is
the width H) gives pre-activations W_enc x + b_enc; the k largest are kept (then ReLU), the rest are zero; the
reconstruction is W_dec codes + b_pre, unscaled, with unit-norm decoder rows (renormalised after every step). W_enc
starts as W_dec's transpose and b_pre at the data's mean. A feature that has not fired for DEAD_STEPS steps is dead;
the AuxK loss (weight 1/32, as in the paper) has the k_aux largest dead pre-activations reconstruct what the live
ones missed, which revives them.

Training rows: every non-special token's state at the layer over the bundled corpus's train split (or the user's
sentences), half of the sentences with 15% of their tokens masked, because Fill-mask and the MLM loss read the
layer at masks. Quality on the held-out split (or the last fifth of the user's sentences): the fraction of variance
explained, L0, dead features (%: never firing there), and the MLM loss recovered, (L_zero - L_sae) /
(L_zero - L_clean), with the layer's output at every token replaced by its reconstruction (L_sae) or by zeros
(L_zero), on held-out sentences with 15% of their tokens masked.

Why not a library: sae_lens and dictionary_learning target decoder LMs through TransformerLens or nnsight and know
neither these encoders' layouts nor their MLM heads; the TopK SAE itself is a few lines. The layer's output is read
and edited through core.inspect.patching_sites (hooks for one call, gated by a ContextVar): other sessions'
forwards of the same model never see an edit. core.inspect.sae_store saves, loads and browses a trained SAE.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.base.messages import Problem, msg
from core.base.settings import current
from core.data.masking import masked_batch
from core.inspect.patching_sites import Run, Stopped, hooked, running, sites
from core.models.spec import LoadedModel
from core.registry import mlm_head
from core.registry.shape import shape
from core.represent.bundled_corpus import corpus_sentences

MAX_STEPS, HOSTED_MAX_STEPS = 5000, 1500
MAX_EXPANSION = 32
DEAD_STEPS = 100  # a feature that has not fired for this many steps is dead (AuxK revives it)
AUX_COEF = 1 / 32
MASK_SHARE = 0.15
MAX_LENGTH = 64  # tokens per sentence, special tokens included
EVAL_SENTENCES = 600  # held-out sentences the figures and the browser are measured on
LOSS_SENTENCES = 256  # held-out sentences the MLM loss recovered is measured on
FORWARD_SENTENCES = 64  # sentences per forward when reading states
MAX_TEXTS = 20_000  # the person's sentences at most


class SAEError(Problem, ValueError):
    """An SAE that cannot be trained, found or used as asked; the message says why and what to do."""


@dataclass(frozen=True)
class SAEConfig:
    """How to train an SAE: the layer (1..L: the state after that layer), features per hidden unit (expansion),
    active features per token (k), optimizer steps, tokens per step, learning rate, seed, the corpus sentences read,
    and the text: empty ``texts`` means the bundled corpus in ``lang``, else the user's sentences."""

    layer: int
    expansion: int = 8
    k: int = 32
    steps: int = 1500
    batch_tokens: int = 2048
    lr: float = 5e-4
    seed: int = 0
    sentences: int = 8000
    texts: tuple[str, ...] = ()
    lang: str = "en"

    def __post_init__(self) -> None:
        cap = HOSTED_MAX_STEPS if current().hosted else MAX_STEPS
        checks = (
            (isinstance(self.layer, int) and self.layer >= 1, "sae.layer_out_of_range", dict(layer=self.layer)),
            (
                isinstance(self.expansion, int) and 1 <= self.expansion <= MAX_EXPANSION,
                "sae.expansion_out_of_range",
                dict(expansion=self.expansion, cap=MAX_EXPANSION),
            ),
            (isinstance(self.k, int) and 1 <= self.k <= 256, "sae.k_out_of_range", dict(active=self.k)),
            (
                isinstance(self.steps, int) and 1 <= self.steps <= cap,
                "sae.steps_out_of_range",
                dict(steps=self.steps, cap=cap),
            ),
            (
                isinstance(self.batch_tokens, int) and 64 <= self.batch_tokens <= 16384,
                "sae.batch_out_of_range",
                dict(batch_tokens=self.batch_tokens),
            ),
            (isinstance(self.lr, (int, float)) and 0 < self.lr <= 0.1, "sae.lr_out_of_range", dict(lr=self.lr)),
            (
                isinstance(self.sentences, int) and 50 <= self.sentences <= 50_000,
                "sae.sentences_out_of_range",
                dict(sentences=self.sentences),
            ),
        )
        for ok, kind, params in checks:
            if not ok:
                raise SAEError(msg(kind, **params))
        texts = tuple(s.strip() for s in self.texts if isinstance(s, str) and s.strip())
        if self.texts and len(texts) < 50:
            raise SAEError(msg("sae.too_few_texts", n=len(texts)))
        if len(texts) > MAX_TEXTS:
            raise SAEError(msg("sae.too_many_texts", n=len(texts), limit=MAX_TEXTS))
        object.__setattr__(self, "texts", texts)

    def check(self, lm: LoadedModel) -> None:
        """Raise SAEError when the layer or k does not fit this model."""
        n = sites(lm.model).n_layers
        if self.layer > n:
            raise SAEError(msg("sae.layer_out_of_range", layer=self.layer, n_layers=n))
        features = self.expansion * shape(lm.model.base_model.config).hidden
        if self.k >= features:
            raise SAEError(msg("sae.k_too_large", active=self.k, features=features))


def sae_module(hidden: int, features: int, k: int, seed: int = 0):
    """A TopK SAE (a torch module, built here so that importing this module does not import torch), its decoder
    drawn from ``seed`` (a generator of its own: the process's global seed is left alone)."""
    import torch

    class TopKSAE(torch.nn.Module):
        """W_enc (F, H), b_enc (F,), W_dec (F, H) with unit-norm rows, b_pre (H,), and the input scale."""

        def __init__(self) -> None:
            super().__init__()
            w = torch.randn(features, hidden, generator=torch.Generator().manual_seed(seed))
            w = w / w.norm(dim=1, keepdim=True)
            self.w_dec = torch.nn.Parameter(w)
            self.w_enc = torch.nn.Parameter(w.clone())
            self.b_enc = torch.nn.Parameter(torch.zeros(features))
            self.b_pre = torch.nn.Parameter(torch.zeros(hidden))
            self.register_buffer("scale", torch.tensor(1.0))
            self.k = k

        @property
        def features(self) -> int:
            return int(self.w_enc.shape[0])

        def pre(self, x):  # (N, H) raw states -> (N, F) pre-activations
            return (x * self.scale - self.b_pre) @ self.w_enc.t() + self.b_enc

        def encode(self, x):
            """(N, H) raw states -> (N, F) codes, at most k non-zero per row."""
            p = self.pre(x)
            val, idx = p.topk(self.k, dim=-1)
            return torch.zeros_like(p).scatter_(-1, idx, val.relu())

        def decode(self, codes):
            """(N, F) codes -> (N, H) reconstruction in the raw states' units."""
            return (codes @ self.w_dec + self.b_pre) / self.scale

        def forward(self, x):
            shape = x.shape
            return self.decode(self.encode(x.reshape(-1, shape[-1]))).reshape(shape)

        def direction(self, i: int):
            """Feature i's decoder direction in raw units (H,): what one unit of its activation adds."""
            return self.w_dec[i] / self.scale

    return TopKSAE()


# ---------------------------------------------------------------------------------------------- reading states
def layer_states(lm: LoadedModel, sentences: Sequence[str], layer: int, seed: int, share: float = 0.0):
    """(rows, H) float32: every real token's state after ``layer`` over ``sentences``, in order; with ``share``,
    every other sentence has that share of its tokens masked. Also (rows,) sentence index and (rows,) position."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    out, sent, pos = [], [], []
    with torch.no_grad(), hooked(sites(lm.model)) as owner:
        for i in range(0, len(sentences), FORWARD_SENTENCES):
            chunk = sentences[i : i + FORWARD_SENTENCES]
            masked = [share > 0 and (i + j) % 2 == 1 for j in range(len(chunk))]
            ids, attn, real, _, _ = masked_batch(lm.tokenizer, chunk, gen, share or MASK_SHARE, MAX_LENGTH, masked)
            run = Run(owner, capture=True, stop=("resid", layer))  # the layers above are never run
            try:
                with running(run):
                    lm.model.base_model(input_ids=ids.to(lm.device), attention_mask=attn.to(lm.device))
            except Stopped:
                pass
            hs = run.acts[("resid", layer)]
            rows, cols = real.nonzero(as_tuple=True)
            out.append(hs[rows.to(lm.device), cols.to(lm.device)].float().cpu())
            sent.append(rows + i)
            pos.append(cols)
    return torch.cat(out), torch.cat(sent), torch.cat(pos)


def states_at(lm: LoadedModel, inputs: dict, layer: int):
    """The states after ``layer`` (batch, T, H) of one encoded batch: the forward stops there."""
    import torch

    with torch.no_grad(), hooked(sites(lm.model)) as owner:
        run = Run(owner, capture=True, stop=("resid", layer))
        try:
            with running(run):
                lm.model.base_model(**inputs)
        except Stopped:
            pass
    return run.acts[("resid", layer)]


def training_text(cfg: SAEConfig) -> tuple[list[str], list[str]]:
    """(train sentences, held-out sentences): the user's (the last fifth held out) or the bundled corpus's."""
    if cfg.texts:
        cut = max(1, len(cfg.texts) // 5)
        return list(cfg.texts[:-cut]), list(cfg.texts[-cut:])
    train = corpus_sentences("train", cfg.lang)
    step = max(1, len(train) // cfg.sentences)  # spread over the whole corpus, not its first books
    return train[::step][: cfg.sentences], corpus_sentences("heldout", cfg.lang)[:EVAL_SENTENCES]


# ---------------------------------------------------------------------------------------------- training
def train_sae(
    lm: LoadedModel,
    cfg: SAEConfig,
    states,
    on_step: Callable[[int, int, float, float], None] | None = None,
):
    """Train a TopK SAE on ``states`` (rows, H). ``on_step(step, steps, normalised mse, dead share)`` after each
    step (it may raise to stop). Returns the SAE (eval mode, no gradients)."""
    import torch

    H = states.shape[1]
    F = cfg.expansion * H
    dev = lm.device  # trained where the model runs: a GPU when the server has one
    states = states.to(dev)
    sae = sae_module(H, F, cfg.k, cfg.seed).to(dev)
    mean = states.mean(0)
    with torch.no_grad():
        sae.scale.fill_(float((H / ((states - mean) ** 2).sum(1).mean()).sqrt()))
        sae.b_pre.copy_(mean * sae.scale)
    opt = torch.optim.Adam(sae.parameters(), lr=cfg.lr)
    since = torch.zeros(F, dtype=torch.long, device=dev)  # steps since each feature last fired
    k_aux = min(2 * cfg.k, F // 2)
    gen = torch.Generator().manual_seed(cfg.seed)
    for step in range(1, cfg.steps + 1):
        x = states[torch.randint(len(states), (cfg.batch_tokens,), generator=gen).to(dev)] * sae.scale
        xc = x - sae.b_pre
        p = xc @ sae.w_enc.t() + sae.b_enc
        val, idx = p.topk(cfg.k, dim=-1)
        val = val.relu()
        x_hat = torch.nn.functional.embedding_bag(idx, sae.w_dec, per_sample_weights=val, mode="sum") + sae.b_pre
        err = x - x_hat
        var = ((x - x.mean(0)) ** 2).sum()
        loss = (err**2).sum() / var
        dead = since > DEAD_STEPS
        if dead.any():  # AuxK: the largest dead pre-activations reconstruct the error
            pd = p.masked_fill(~dead, float("-inf"))
            kd = min(k_aux, int(dead.sum()))
            dval, didx = pd.topk(kd, dim=-1)
            e_hat = torch.nn.functional.embedding_bag(didx, sae.w_dec, per_sample_weights=dval.relu(), mode="sum")
            loss = loss + AUX_COEF * ((err.detach() - e_hat) ** 2).sum() / var
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            sae.w_dec.div_(sae.w_dec.norm(dim=1, keepdim=True).clamp_min(1e-8))
            fired = torch.zeros(F, dtype=torch.bool, device=dev)
            fired[idx[val > 0]] = True
            since = torch.where(fired, 0, since + 1)
        if on_step is not None:
            on_step(step, cfg.steps, float((err.detach() ** 2).sum() / var.detach()), float(dead.float().mean()))
    sae.eval()
    for q in sae.parameters():
        q.requires_grad_(False)
    return sae


# ---------------------------------------------------------------------------------------------- quality
@dataclass(frozen=True)
class Quality:
    """An SAE's figures on held-out text."""

    variance_explained: float
    l0: float  # mean active features per token
    dead_share: float  # features never firing on the held-out tokens
    loss_clean: float  # MLM loss, nats per masked token
    loss_sae: float  # with the layer's output replaced by its reconstruction
    loss_zero: float  # with the layer's output replaced by zeros
    tokens: int  # held-out tokens the first three are measured on

    @property
    def loss_recovered(self) -> float:
        """(L_zero - L_sae) / (L_zero - L_clean); NaN where zeroing the layer does not raise the loss (a random
        model), where the share means nothing."""
        gap = self.loss_zero - self.loss_clean
        return (self.loss_zero - self.loss_sae) / gap if gap > 1e-6 else float("nan")


def codes_of(sae, states, chunk: int = 4096):
    """(rows, F) codes of ``states`` (on the CPU) in chunks, computed where the SAE is; on the CPU."""
    import torch

    dev = sae.b_pre.device
    with torch.no_grad():
        return torch.cat([sae.encode(states[i : i + chunk].to(dev)).cpu() for i in range(0, len(states), chunk)])


def decoded(sae, codes, chunk: int = 4096):
    """(rows, H) reconstructions of ``codes`` (on the CPU), computed where the SAE is; on the CPU."""
    import torch

    dev = sae.b_pre.device
    with torch.no_grad():
        return torch.cat([sae.decode(codes[i : i + chunk].to(dev)).cpu() for i in range(0, len(codes), chunk)])


def mlm_losses(lm: LoadedModel, sae, layer: int, sentences: Sequence[str], seed: int) -> tuple[float, float, float]:
    """(clean, with the reconstruction, with zeros) MLM loss at 15% masked tokens of ``sentences``, nats."""
    import torch

    head = mlm_head(lm.model)
    if head is None:
        raise SAEError(msg("sae.no_mlm_head", model_class=type(lm.model).__name__))
    gen = torch.Generator().manual_seed(seed + 1)
    st = sites(lm.model)
    totals, n = [0.0, 0.0, 0.0], 0
    with torch.no_grad(), hooked(st) as owner:
        for i in range(0, len(sentences), FORWARD_SENTENCES):
            ids, attn, real, orig, pick = masked_batch(
                lm.tokenizer, sentences[i : i + FORWARD_SENTENCES], gen, MASK_SHARE, MAX_LENGTH
            )
            rows, cols = pick.nonzero(as_tuple=True)
            gold = orig[rows, cols].to(lm.device)
            on = real.to(lm.device)  # the tokens the SAE was trained on: specials and padding keep their states
            edits = (None, lambda h, on=on: _at(h, on, sae(h[on].float())), lambda h, on=on: _at(h, on, 0.0))
            for j, edit in enumerate(edits):
                run = Run(owner, edits={} if edit is None else {("resid", layer): edit})
                with running(run):
                    h = lm.model.base_model(input_ids=ids.to(lm.device), attention_mask=attn.to(lm.device))[0]
                logits = head(h[rows.to(lm.device), cols.to(lm.device)])
                totals[j] += float(torch.nn.functional.cross_entropy(logits.float(), gold, reduction="sum"))
            n += len(rows)
    clean, with_sae, zero = (t / max(n, 1) for t in totals)
    return clean, with_sae, zero


def _at(h, on, values):
    """``h`` with its rows at ``on`` (B, T) replaced by ``values`` (a tensor of those rows, or a number)."""
    out = h.clone()
    out[on] = values.to(h.dtype) if hasattr(values, "to") else values
    return out


def quality(lm: LoadedModel, sae, layer: int, eval_states, loss_sentences: Sequence[str], seed: int) -> Quality:
    codes = codes_of(sae, eval_states)
    import torch

    recon = decoded(sae, codes)
    with torch.no_grad():
        fve = 1 - float(((eval_states - recon) ** 2).sum() / ((eval_states - eval_states.mean(0)) ** 2).sum())
    fired = (codes > 0).any(0)
    clean, with_sae, zero = mlm_losses(lm, sae, layer, loss_sentences, seed)
    return Quality(
        variance_explained=fve,
        l0=float((codes > 0).sum(1).float().mean()),
        dead_share=float(1 - fired.float().mean()),
        loss_clean=clean,
        loss_sae=with_sae,
        loss_zero=zero,
        tokens=len(eval_states),
    )


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def summary_row(q: Quality) -> dict[str, float]:
    """The figures as one row (bench/sae.py and the page print them)."""
    return {
        "variance_explained": round(q.variance_explained, 4),
        "l0": round(q.l0, 2),
        "dead_share": round(q.dead_share, 4),
        "loss_recovered": round(q.loss_recovered, 4),
        "loss_clean": round(q.loss_clean, 4),
        "loss_sae": round(q.loss_sae, 4),
        "loss_zero": round(q.loss_zero, 4),
    }


def as_numpy(t) -> np.ndarray:
    return t.detach().cpu().numpy()

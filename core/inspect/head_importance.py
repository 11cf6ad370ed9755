"""Head importance (Michel et al., 2019, "Are Sixteen Heads Really Better than One?"): a gate of ones on each head's
output, the loss's gradient with respect to the gates, |d loss / d gate| summed over the batch, in one backward
pass per batch. Checked against exhaustive single-head ablation (Spearman rank correlation) and a pruning curve
(heads removed least-important first, against random order).

Loss: MLM cross-entropy on the bundled held-out text with a fixed-seed 15% masking (core.data.masking), or a
fine-tuned classifier's cross-entropy on its eval set. The gates use core.inspect.ablation's hooks, so the same thread
safety holds: a job computing importance never changes another session's forwards.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch  # core.data.masking and core.models.masked_forward load it anyway
import torch.nn.functional as F

from core.base.messages import Message, Problem, carry, msg
from core.data.masking import mask_tokens
from core.inspect.ablation import AblationConfig, ablated, base_model, default_texts, gated, layout
from core.models.loading import LoadedModel, ModelSpec, load
from core.models.masked_forward import masked_logits
from core.predict.classify import FinetunedModel, load_finetuned
from core.predict.fill_mask import check_mlm, mlm_head  # the head or FillMaskError (check_mlm ran first)

Progress = Callable[..., None]  # progress(fraction, message); a job's ctx.progress also raises on Cancel
PRUNING_FRACTIONS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
GRADIENT_UNITS = 3  # the gradient pass (forward + backward) costs about three loss passes
RANDOM_SEEDS = (0, 1, 2)


class ImportanceError(Problem, ValueError):
    """Importance cannot be computed for this model or data; the message says why and what to do."""


@dataclass(frozen=True)
class ImportanceResult:
    checkpoint: str
    task: str  # "mlm" or "classify"
    scores: np.ndarray  # (layers, heads) gradient importance, |dL/dgate| summed over the texts
    exhaustive: np.ndarray | None  # (layers, heads) loss increase when that one head is zeroed
    spearman: float | None  # rank correlation of scores and exhaustive
    pruning_fraction: tuple[float, ...]  # share of heads removed, 0 .. 1
    pruning_importance: tuple[float, ...]  # metric removing least-important first
    pruning_random: tuple[float, ...]  # same, random order (mean over RANDOM_SEEDS)
    metric: str  # "MLM loss" | "accuracy"
    n_texts: int
    seconds_gradient: float
    seconds_exhaustive: float | None


MLM_TEXTS = 64  # held-out sentences by default
MAX_TEXTS = 512
CHUNK = 32  # texts per forward
MAX_LEN = 64  # tokens per text
MASK_SEED = 0


@dataclass
class _Chunk:
    enc: dict[str, Any]  # input_ids, attention_mask (+ token_type_ids for pairs), on the model's device
    rows: torch.Tensor | None = None  # MLM: masked positions (rows, cols) and their original ids
    cols: torch.Tensor | None = None
    labels: torch.Tensor = field(kw_only=True)  # MLM: (M,) original ids; classify: (B,) class ids


def _is_classifier(lm) -> bool:
    return hasattr(lm, "label_names") and not hasattr(lm, "spec")


def _mlm_chunks(lm, texts: Sequence[str]) -> list[_Chunk]:
    """Tokenize, mask 15% (80/10/10) with a fixed seed (core.data.masking), CHUNK texts per chunk."""
    tok, model = lm.tokenizer, lm.model
    if tok.mask_token_id is None:
        raise ImportanceError(msg("importance.no_mask_token", checkpoint=lm.spec.checkpoint))
    dev = next(model.parameters()).device
    gen = torch.Generator().manual_seed(MASK_SEED)
    out: list[_Chunk] = []
    for i in range(0, len(texts), CHUNK):
        enc = tok(
            list(texts[i : i + CHUNK]),
            truncation=True,
            max_length=MAX_LEN,
            padding=True,
            return_tensors="pt",
            return_special_tokens_mask=True,
        )
        special = enc["special_tokens_mask"].bool() | (enc["attention_mask"] == 0)
        m = mask_tokens(
            enc["input_ids"], special, mask_id=tok.mask_token_id, vocab_size=int(model.config.vocab_size), generator=gen
        )
        rows, cols = (m.labels != -100).nonzero(as_tuple=True)
        out.append(
            _Chunk(
                {"input_ids": m.input_ids.to(dev), "attention_mask": enc["attention_mask"].to(dev)},
                rows.to(dev),
                cols.to(dev),
                labels=m.labels[rows, cols].to(dev),
            )
        )
    if sum(len(c.labels) for c in out) == 0:
        raise ImportanceError(msg("importance.no_token_masked"))
    return out


def _cls_chunks(fm, texts, texts_b, labels) -> list[_Chunk]:
    dev = next(fm.model.parameters()).device
    out = []
    for i in range(0, len(texts), CHUNK):
        tb = None if texts_b is None else list(texts_b[i : i + CHUNK])
        enc = fm.tokenizer(
            list(texts[i : i + CHUNK]), tb, truncation=True, max_length=fm.max_length, padding=True, return_tensors="pt"
        )
        enc = {k: v.to(dev) for k, v in enc.items() if k in fm.tokenizer.model_input_names}
        out.append(_Chunk(enc, labels=torch.as_tensor(list(labels[i : i + CHUNK]), dtype=torch.long, device=dev)))
    return out


def _mlm_eval(lm, chunks) -> float:
    """Mean MLM cross-entropy over every masked token (no gradient; the fill-mask fast path, hooks included)."""
    head = mlm_head(lm.model)
    total, n = 0.0, 0
    with torch.inference_mode():
        for c in chunks:
            if not len(c.labels):
                continue
            logits = masked_logits(lm.model, head, c.enc["input_ids"], c.enc["attention_mask"], c.rows, c.cols)
            total += float(F.cross_entropy(logits.float(), c.labels, reduction="sum"))
            n += len(c.labels)
    return total / n


def _cls_eval(fm, chunks) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of the classifier on the chunks."""
    total, right, n = 0.0, 0, 0
    with torch.inference_mode():
        for c in chunks:
            logits = fm.model(**c.enc).logits.float()
            total += float(F.cross_entropy(logits, c.labels, reduction="sum"))
            right += int((logits.argmax(-1) == c.labels).sum())
            n += len(c.labels)
    return total / n, right / n


def _gradient(lm, chunks, classifier: bool, lay, progress) -> np.ndarray:
    """sum over texts of |d loss(text) / d gate| per head: one gate per text and head, one backward per chunk
    (torch.autograd.grad w.r.t. the gates only, so the shared model's parameters get no .grad)."""
    model = lm.model
    dtype = next(model.parameters()).dtype
    dev = next(model.parameters()).device
    scores = torch.zeros(lay.n_layers, lay.n_heads, dtype=torch.float64)
    head = None if classifier else mlm_head(model)
    for i, c in enumerate(chunks):
        b = c.enc["input_ids"].shape[0]
        gate = torch.ones(b, lay.n_layers, lay.n_heads, dtype=dtype, device=dev, requires_grad=True)
        with torch.enable_grad(), gated(model, gate):
            if classifier:
                per_text = F.cross_entropy(model(**c.enc).logits.float(), c.labels, reduction="none")  # (b,)
            else:
                if not len(c.labels):
                    continue
                assert head is not None  # set above for an MLM model
                h = base_model(model)(**c.enc).last_hidden_state  # (b, t, H)
                tok_loss = F.cross_entropy(head(h[c.rows, c.cols]).float(), c.labels, reduction="none")  # (M,)
                counts = torch.zeros(b, device=dev).index_add_(0, c.rows, torch.ones_like(tok_loss))
                per_text = torch.zeros(b, device=dev).index_add_(0, c.rows, tok_loss) / counts.clamp(min=1)
            (g,) = torch.autograd.grad(per_text.sum(), gate)
        scores += g.detach().abs().sum(0).double().cpu()
        if progress is not None:
            progress((i + 1) / len(chunks), msg("progress.importance.gradient", done=i + 1, total=len(chunks)))
    return scores.numpy()


def head_importance(
    lm,
    texts: Sequence[str] | None = None,
    batch=None,
    exhaustive: bool = True,
    pruning: bool = True,
    progress: Progress | None = None,
    *,
    fractions: Sequence[float] = PRUNING_FRACTIONS,
    seeds: Sequence[int] = RANDOM_SEEDS,
) -> ImportanceResult:
    """Gradient importance of every head of ``lm``.

    ``lm`` a LoadedModel with an MLM head: MLM loss on ``texts`` (default: MLM_TEXTS bundled held-out sentences)
    masked 15% with a fixed seed. ``lm`` a core.predict.classify.FinetunedModel: cross-entropy on ``batch`` = (texts,
    texts_b or None, labels), e.g. a core.train.finetune.FinetuneResult's test_texts / test_labels. ``exhaustive`` adds single-head
    zero-ablation (loss increase) and its Spearman correlation with the gradient scores; ``pruning`` the metric
    (MLM loss, or accuracy) with heads removed least-important first and in random order (mean over ``seeds``) at
    ``fractions`` of all heads. ``progress(fraction, message)`` is called along the way (a job's ctx.progress).
    Raises ImportanceError (a ValueError) for a model or data it cannot use.
    """
    classifier = _is_classifier(lm)
    if classifier:
        if batch is None:
            raise ImportanceError(msg("importance.classifier_needs_eval_set"))
        b_texts, b_texts_b, b_labels = batch
        if not len(b_texts) or len(b_texts) != len(b_labels):
            raise ImportanceError(
                msg("importance.eval_set_counts_differ", n_b_texts=len(b_texts), n_b_labels=len(b_labels))
            )
        if b_texts_b is not None and len(b_texts_b) != len(b_texts):
            raise ImportanceError(msg("importance.second_texts_mismatch"))
        if not all(0 <= int(y) < len(lm.label_names) for y in b_labels):
            raise ImportanceError(msg("importance.labels_must_class_numbers", last_class=len(lm.label_names) - 1))
        n = len(b_texts)
        chunks = _cls_chunks(
            lm, b_texts[:MAX_TEXTS], None if b_texts_b is None else b_texts_b[:MAX_TEXTS], b_labels[:MAX_TEXTS]
        )
        n = min(n, MAX_TEXTS)
        checkpoint = str(
            getattr(lm.model, "name_or_path", "")
            or getattr(getattr(lm.model, "config", None), "_name_or_path", "")
            or "fine-tuned classifier"
        )
    else:
        try:
            check_mlm(lm)
        except ValueError as e:
            raise ImportanceError(carry(e)) from None
        if texts is None:
            texts = default_texts(MLM_TEXTS)
        texts = [t for t in texts if isinstance(t, str) and t.strip()]
        if not texts:
            raise ImportanceError(msg("importance.no_text_for_mlm_loss"))
        if len(texts) > MAX_TEXTS:
            raise ImportanceError(msg("importance.too_many_texts", n_texts=len(texts), max_texts=MAX_TEXTS))
        n = len(texts)
        chunks = _mlm_chunks(lm, texts)
        checkpoint = lm.spec.checkpoint
    lay = layout(lm.model)
    n_heads = lay.n_layers * lay.n_heads
    # Progress counts work, not calls: one loss pass over the texts is a unit, the gradient pass (a forward and a
    # backward) GRADIENT_UNITS of them. The old count gave the gradient pass one step of 1 + 10 x 4, so the job
    # said 493 s left during it, then 38 s, then 0 s with seconds to go (#46, third walk).
    steps = (
        GRADIENT_UNITS
        + ((n_heads + 1) if exhaustive else 0)
        + (pruning_passes(n_heads, fractions, seeds) if pruning else 0)
    )
    done: list[float] = [0]

    def report(message: Message, units: float = 1.0) -> None:
        done[0] += units
        if progress is not None:
            progress(min(1.0, done[0] / steps), message)

    def loss_and_metric(heads) -> tuple[float, float]:
        with ablated(lm, AblationConfig(tuple(heads))):
            if classifier:
                return _cls_eval(lm, chunks)
            loss = _mlm_eval(lm, chunks)
            return loss, loss

    t0 = time.perf_counter()
    scores = _gradient(
        lm,
        chunks,
        classifier,
        lay,
        None if progress is None else (lambda f, m: progress(f * GRADIENT_UNITS / steps, m)),
    )
    seconds_gradient = time.perf_counter() - t0
    report(msg("progress.importance.gradient_done"), GRADIENT_UNITS)
    flat_heads = [(la, h) for la in range(lay.n_layers) for h in range(lay.n_heads)]
    ex, rho, seconds_ex = None, None, None
    base_loss, base_metric = None, None
    if exhaustive:
        from scipy.stats import spearmanr  # lazy: scipy loads in about a second, only exhaustive ablation needs it

        t1 = time.perf_counter()
        base_loss, base_metric = loss_and_metric(())
        report(msg("progress.importance.single_head", done=0, total=n_heads))
        ex = np.zeros((lay.n_layers, lay.n_heads))
        for i, (la, h) in enumerate(flat_heads):
            ex[la, h] = loss_and_metric([(la, h)])[0] - base_loss
            report(msg("progress.importance.single_head", done=i + 1, total=n_heads))
        seconds_ex = time.perf_counter() - t1
        rho = float(spearmanr(scores.ravel(), ex.ravel()).statistic)
        if not np.isfinite(rho):  # constant scores or losses (e.g. a model that ignores its heads)
            rho = None
    fr: tuple[float, ...] = ()
    p_imp: tuple[float, ...] = ()
    p_rand: tuple[float, ...] = ()
    if pruning:
        order = [flat_heads[i] for i in np.argsort(scores.ravel(), kind="stable")]  # least important first
        fr = tuple(float(f) for f in fractions)
        ks = [int(round(f * n_heads)) for f in fr]
        metric_at: dict[tuple[tuple[int, int], ...], float] = {}  # pruned heads -> the metric without them

        def metric(heads, said: Message) -> float:
            key = tuple(sorted(heads))
            if key not in metric_at:
                metric_at[key] = loss_and_metric(key)[1] if key or base_metric is None else base_metric
                report(said)  # one loss pass done (a repeated set of heads costs nothing: it is not counted)
            return metric_at[key]

        p_imp = tuple(metric(order[:k], msg("progress.importance.pruning_ordered")) for k in ks)
        rand = []
        for sd in seeds:
            perm = [flat_heads[i] for i in np.random.default_rng(sd).permutation(n_heads)]
            rand.append([metric(perm[:k], msg("progress.importance.pruning_random", seed=sd)) for k in ks])
        p_rand = tuple(float(x) for x in np.mean(rand, axis=0))
    scores.setflags(write=False)
    return ImportanceResult(
        checkpoint=checkpoint,
        task="classify" if classifier else "mlm",
        scores=scores,
        exhaustive=ex,
        spearman=rho,
        pruning_fraction=fr,
        pruning_importance=p_imp,
        pruning_random=p_rand,
        metric="accuracy" if classifier else "MLM loss",
        n_texts=n,
        seconds_gradient=seconds_gradient,
        seconds_exhaustive=seconds_ex,
    )


# What the exhaustive check costs, per unit of work (one pass over one text, per layer, per hidden_size²): measured
# on the bundled bert-mini (6 layers x 12 heads, hidden 384, 64 held-out texts), whose 73 passes (one per head, and
# the unablated one) took 33 s on a 2-core CPU. A GPU runs these small batches about this many times faster.
CPU_SECONDS_PER_UNIT = 33.0 / (73 * 64 * 6 * 384**2)
GPU_SPEEDUP = 10.0


def pruning_passes(
    n_heads: int, fractions: Sequence[float] = PRUNING_FRACTIONS, seeds: Sequence[int] = RANDOM_SEEDS
) -> int:
    """Loss passes the pruning curves make over the texts: one per distinct set of heads removed (every order
    removes none first, and all of them at 100%)."""
    ks = {int(round(f * n_heads)) for f in fractions}
    shared = {k for k in ks if k in (0, n_heads)}  # the same set of heads whatever the order
    return len(shared) + (len(ks) - len(shared)) * (1 + len(seeds))


def pruning_seconds(n_layers: int, n_heads: int, hidden: int, n_texts: int, device: str = "cpu") -> float:
    """About how long the pruning curves take, as exhaustive_seconds reckons a loss pass."""
    per_pass = exhaustive_seconds(n_layers, n_heads, hidden, n_texts, device) / (n_layers * n_heads + 1)
    return per_pass * pruning_passes(n_layers * n_heads)


def exhaustive_seconds(n_layers: int, n_heads: int, hidden: int, n_texts: int, device: str = "cpu") -> float:
    """About how long the exhaustive check (one loss pass over ``n_texts`` per head, plus the unablated one) takes
    on ``device`` for a model of ``n_layers`` x ``n_heads`` heads and width ``hidden``. A rough estimate, for the
    page to show beside the check's checkbox: a pass costs ~ layers x hidden² per text."""
    passes = n_layers * n_heads + 1
    seconds = passes * n_texts * n_layers * hidden**2 * CPU_SECONDS_PER_UNIT
    return seconds / GPU_SPEEDUP if str(device).startswith(("cuda", "mps")) else seconds


def importance_job(
    family: str,
    checkpoint: str,
    device: str = "auto",
    texts: Sequence[str] | None = None,
    exhaustive: bool = True,
    pruning: bool = True,
    finetuned_dir: str | None = None,
    batch=None,
):
    """A picklable core.runtime.jobs function fn(ctx): loads the model itself (the MLM model of (family, checkpoint), or the
    fine-tuned classifier in ``finetuned_dir`` with its eval ``batch`` = (texts, texts_b or None, labels)), reports
    ctx.progress (which also raises on Cancel) and returns an ImportanceResult."""
    if batch is not None:
        batch = (tuple(batch[0]), None if batch[1] is None else tuple(batch[1]), tuple(int(y) for y in batch[2]))
    return functools.partial(
        _run_job,
        family,
        checkpoint,
        device,
        None if texts is None else tuple(texts),
        exhaustive,
        pruning,
        finetuned_dir,
        batch,
    )


def _run_job(family, checkpoint, device, texts, exhaustive, pruning, finetuned_dir, batch, ctx) -> ImportanceResult:
    ctx.progress(0.0, msg("progress.loading_model"))
    lm: FinetunedModel | LoadedModel
    if finetuned_dir:
        lm = load_finetuned(finetuned_dir, device)
    else:
        lm = load(ModelSpec(family, checkpoint, device), "mlm")
    return head_importance(lm, texts, batch, exhaustive, pruning, progress=ctx.progress)

"""Held-out metrics: masked-token top-1/top-5 next to a unigram-frequency baseline measured on the very same
positions, and NSP/SOP accuracy on held-out pairs.

The evaluation mask is fixed (its own seed): 15% of the non-special tokens, each replaced by the mask token
(no random/unchanged share, so the number reads as "fill in the blank"). The unigram baseline always predicts
the k most frequent non-special tokens of the training instances.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

from core.train.pretrain.build import encode, mlm_logits, pair_logits
from core.train.pretrain.data import Instance, collate

EVAL_SEED = 1234


def unigram_top(instances: list[Instance], tokenizer, k: int = 5) -> list[int]:
    """The k most frequent non-special token ids in the training instances (ties by id, so stable)."""
    special = set(tokenizer.all_special_ids)
    counts = Counter(i for x in instances for i in x.ids if i not in special)
    return [i for i, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


@torch.no_grad()
def evaluate(
    model,
    family: str,
    tokenizer,
    instances: list[Instance],
    unigram: list[int],
    *,
    batch_size: int = 64,
    device: str = "cpu",
    samples: int = 0,
) -> dict:
    """Held-out MLM top-1/top-5, the unigram baseline's top-1/top-5 on the same positions, and pair accuracy.

    Returns plain floats (and, when ``samples`` > 0, a few masked sentences with the model's top guesses).
    """
    was_training = model.training
    model.eval()
    gen = torch.Generator().manual_seed(EVAL_SEED)
    uni = torch.tensor(unigram[:5])
    n = top1 = top5 = u1 = u5 = 0
    loss_sum = 0.0
    pair_ok = pair_n = pair_pos = 0
    shown: list[dict] = []
    for b0 in range(0, len(instances), batch_size):
        chunk = instances[b0 : b0 + batch_size]
        batch = collate(
            chunk, tokenizer, generator=gen, mlm_probability=0.15, whole_word=False, vocab_size=len(tokenizer)
        )
        # all selected positions become the mask token (the draw order above keeps this deterministic)
        sel = batch.labels != -100
        inputs = torch.where(sel, torch.full_like(batch.original_ids, tokenizer.mask_token_id), batch.original_ids)
        seq, _ = encode(
            model, family, inputs.to(device), batch.attention_mask.to(device), batch.token_type_ids.to(device)
        )
        logits = mlm_logits(model, family, seq[sel.to(device)]).float().cpu()  # (n_sel, vocab)
        gold = batch.labels[sel]
        loss_sum += torch.nn.functional.cross_entropy(logits, gold, reduction="sum").item()
        best = logits.topk(5, dim=-1).indices
        top1 += (best[:, 0] == gold).sum().item()
        top5 += (best == gold[:, None]).any(-1).sum().item()
        u1 += (gold == uni[0]).sum().item()
        u5 += (gold[:, None] == uni[None, :]).any(-1).sum().item()
        n += gold.numel()
        if batch.pair_labels.ge(0).any():
            _, pooled = encode(
                model,
                family,
                batch.original_ids.to(device),
                batch.attention_mask.to(device),
                batch.token_type_ids.to(device),
            )
            pl = pair_logits(model, family, pooled)
            if pl is not None:
                pair_ok += (pl.argmax(-1).cpu() == batch.pair_labels).sum().item()
                pair_n += len(chunk)
                pair_pos += int(batch.pair_labels.sum())
        if len(shown) < samples:
            shown += _samples(tokenizer, inputs, batch, sel, best, samples - len(shown))
    model.train(was_training)
    out: dict[str, Any] = {
        "mlm_top1": top1 / max(n, 1),
        "mlm_top5": top5 / max(n, 1),
        "unigram_top1": u1 / max(n, 1),
        "unigram_top5": u5 / max(n, 1),
        "mlm_loss": loss_sum / max(n, 1),
        "masked_tokens": n,
        "instances": len(instances),
    }
    if pair_n:
        out.update(
            pair_acc=pair_ok / pair_n, pairs=pair_n, pair_majority=max(pair_pos, pair_n - pair_pos) / pair_n
        )  # always guessing the commoner label
    if samples:
        out["samples"] = shown
    return out


def _samples(tokenizer, inputs, batch, sel, best, k: int) -> list[dict]:
    out: list[dict[str, Any]] = []
    j = 0
    for r in range(inputs.shape[0]):
        m = sel[r]
        cnt = int(m.sum())
        if len(out) < k and cnt:
            ids = [int(i) for i, a in zip(inputs[r], batch.attention_mask[r]) if a][:48]
            out.append(
                {
                    "text": tokenizer.decode(ids, skip_special_tokens=False),
                    "gold": tokenizer.convert_ids_to_tokens(batch.labels[r][m].tolist()),
                    "pred": tokenizer.convert_ids_to_tokens(best[j : j + cnt, 0].tolist()),
                }
            )
        j += cnt
    return out

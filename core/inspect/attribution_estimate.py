"""What an attribution run will cost, shown before it starts: the passes come from the methods' cost models
(core.inspect.attribution_methods: the same counts the progress bar ticks); the time from two plain forwards of the
same text on the same model, timed once. Those forwards are plain and warm, so the first run on a model costs more
than they say: it may import captum (seconds), and its first backward passes and captum's first calls pay one-off
costs (autograd buffers, kernel choice). ``Estimate.first_run`` says so, for the page to say it too;
core.inspect.attribution.attribute calls ``mark_warm`` when a run has finished.
"""

from __future__ import annotations

import sys
import time
import weakref
from dataclasses import dataclass

from core.inspect import faithfulness as F
from core.inspect.attribution_inputs import forward_batch, model_texts
from core.inspect.attribution_methods import METHODS, batch_calls
from core.models.cost import Cost, ForwardTiming
from core.registry.shape import shape

# The batched forward timed for an estimate has the run's own batch rows, at most this many (bounds its own cost).
# Timing the run's batch, not a smaller one, keeps every call of the run between the two timed sizes: a forward's
# time grows far less than linearly in its rows on a CPU, so extrapolating from a small batch overshoots.
TIMING_ROWS = 64


@dataclass(frozen=True)
class Estimate:
    """What one core.inspect.attribution.attribute run of a config is expected to cost on a model, before it runs."""

    forwards: int  # examples through the model (setup, the methods, per-layer IG)
    backwards: int  # of those, the ones with a backward pass
    seconds: float  # from a ForwardTiming on this model and input: fitting (KernelSHAP, LIME) and copies not counted
    seq: int
    batch: int
    first_run: bool = False  # no run has finished on this model yet: one-off costs come on top of ``seconds``


def _encoded(lm, cfg):
    # as core.inspect.attribution_inputs.prepare tokenizes it (the pair target's two sentences, the model's mask)
    return lm.tokenizer(*model_texts(lm, cfg), return_tensors="pt", truncation=True, max_length=lm.max_tokens)


def _plan(lm, cfg) -> tuple[int, int]:
    """(tokens, forward batch) of a run of ``cfg`` on ``lm``: the batch capped as core.inspect.attribution_inputs.forward_batch caps it."""
    seq = int(_encoded(lm, cfg)["input_ids"].shape[1])
    return seq, forward_batch(cfg, seq)


def timing_rows(lm, cfg) -> tuple[int, int]:
    """(tokens, rows) of the ForwardTiming an estimate of ``cfg`` on ``lm`` needs: a caller may keep one per
    (model, tokens, rows) and reuse it while only the methods and their settings change."""
    seq, batch = _plan(lm, cfg)
    return seq, min(batch, TIMING_ROWS)


def time_forward(lm, cfg, rows: int) -> ForwardTiming:
    """Time plain forwards of ``cfg``'s input on ``lm`` (no gradients; the shared model is only read): 1 row and
    ``rows`` rows (the input repeated), each once untimed to warm up; then 1 row twice (the faster counts) and
    ``rows`` rows once: five forwards in all. On CUDA the device is synchronised around each timed call, so the time is the
    kernels', not the launch's."""
    import torch  # lazy: torch loads in seconds; the page's imports reach this module

    enc = _encoded(lm, cfg)
    names = set(getattr(lm.tokenizer, "model_input_names", ["input_ids", "attention_mask"])) | {"input_ids"}
    one = {k: v.to(lm.device) for k, v in enc.items() if k in names}
    cuda = str(lm.device).startswith("cuda")

    def timed(n: int) -> float:
        batch = {k: v.expand(n, -1) for k, v in one.items()}
        if cuda:
            torch.cuda.synchronize(lm.device)
        t0 = time.perf_counter()
        with torch.no_grad():
            lm.model(**batch)
        if cuda:
            torch.cuda.synchronize(lm.device)
        return time.perf_counter() - t0

    rows = max(1, int(rows))
    for n in {1, rows}:  # the first call of a shape pays one-off costs (allocations, kernel choice): untimed
        timed(n)
    one_s = min(timed(1), timed(1))  # the faster of two (cheap at one row): less of another process's noise
    return ForwardTiming(int(enc["input_ids"].shape[1]), rows, one_s, timed(rows) if rows > 1 else one_s)


def run_costs(cfg, seq: int, batch: int, n_layers: int, tokenizer) -> list[Cost]:
    """The parts of one core.inspect.attribution.attribute run: prepare's forward and f(x), f(baseline) in one call; each
    method's cost; per-layer IG (``cfg.layer_steps`` at each of ``n_layers`` layers) when it is on."""
    parts = [Cost(1, 0, 1), Cost(2, 0, 1)]
    parts += [METHODS[k].cost(seq, cfg, batch) for k in cfg.methods]
    if cfg.layer_steps:
        steps = cfg.layer_steps * n_layers
        parts.append(Cost(steps, steps, batch_calls(cfg.layer_steps, batch) * n_layers))
    if cfg.faithfulness:  # every token but the specials ([CLS], [SEP]s) and the explained mask or word can go
        specials = tokenizer.num_special_tokens_to_add(pair=cfg.target == "pair") + (cfg.target in ("mask", "token"))
        removable = max(1, seq - specials)
        counts = len(set(F.counts(F.LEVELS, removable)))
        parts.append(Cost(F.planned_rows(len(cfg.methods), removable), 0, counts))
    return parts


def estimate(lm, cfg, timing: ForwardTiming) -> Estimate:
    """The passes and seconds a run of ``cfg`` on ``lm`` should take, from ``timing`` (time_forward on the same
    model and input)."""
    seq, batch = _plan(lm, cfg)
    n_layers = shape(lm.model.config).depths  # as core.inspect.attribution counts them
    parts = run_costs(cfg, seq, batch, n_layers, lm.tokenizer)
    return Estimate(
        sum(c.forwards for c in parts),
        sum(c.backwards for c in parts),
        sum(timing.seconds(c) for c in parts),
        seq,
        batch,
        first_run=first_run(lm.model),
    )


_WARM: weakref.WeakSet = weakref.WeakSet()  # models an attribution run has finished on, in this process


def mark_warm(model) -> None:
    """Record that an attribution run has finished on ``model`` (its one-off costs are paid)."""
    try:
        _WARM.add(model)
    except TypeError:  # not weak-referenceable: every run counts as a first one
        pass


def first_run(model=None) -> bool:
    """Whether a run would be the first here: captum (which every method runs on) is not imported yet, or no run
    has finished on ``model`` yet (its first backward passes and captum's first calls pay one-off costs); neither
    is in an estimate's seconds."""
    return "captum.attr" not in sys.modules or (model is not None and model not in _WARM)

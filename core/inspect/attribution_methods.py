"""The attribution methods as one registry: per method its key, label, runner, cost model, the settings it reads
(a baseline, integration steps, samples) and a short description.

core.inspect.attribution prepares the input and the scalar to explain, then runs the methods a config names through this
table; the Attributions page builds its picker, help text and settings widgets from it. Adding a method is one
``Method`` entry here (plus its name in assets/i18n/attribution.toml, for the page in 中文).

Every runner receives the same ``Inputs``: the word-embedding vectors and their baseline, the explained scalar as a
function of embeddings on the shared model (which no runner may hook), and a factory for the same scalar as a
module over another model, for the methods that must hook modules (they work on a deep copy that lives only for
the call). captum does the attribution itself in every runner.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

DEEPLIFT_TOLERANCE = 0.25  # DeepLift whose sum misses f(x) - f(baseline) by more than this share is rejected


class NotApplicable(ValueError):
    """A method that does not apply to this model; the message says why."""


@dataclass(frozen=True)
class Inputs:
    """What every runner gets (built by core.inspect.attribution for one input and target)."""

    embeds: Any  # (1, seq, E) the input's word embeddings
    base: Any  # (1, seq, E) the baseline; special tokens keep their own embedding
    special: np.ndarray  # (seq,) bool: tokens kept fixed in every baseline
    f_x: float  # the explained score on the input ...
    f_b: float  # ... and on the baseline
    forward: Callable[[Any], Any]  # (b, seq, E) -> (b,) the explained score on the shared model; ticks per call
    module_on: Callable[[Any], Any]  # model -> torch.nn.Module computing the same score (for hooks, on a copy)
    model: Any  # the shared model: read or copy it, never hook it
    cfg: Any  # core.inspect.attribution.AttributionConfig
    batch: int  # rows per forward call, already capped for memory
    tick: Callable[[], None]  # one forward call done, for runners that call a model themselves
    baseline_label: str  # e.g. "[PAD] embedding", for the note


@dataclass(frozen=True)
class Output:
    scores: np.ndarray  # (seq,) one value per token
    delta: float | None = None  # convergence delta: sum(scores) - (f(x) - f(baseline)), where the method has one
    note: str = ""


@dataclass(frozen=True)
class Cost:
    """What one run of a method costs for an input of ``seq`` tokens: examples through the model forwards and
    backwards, and the forward calls (batches) captum makes, which are the progress ticks."""

    forwards: int
    backwards: int
    calls: int


@dataclass(frozen=True)
class Method:
    key: str  # stable id: links, CSV exports and other modules name methods by it
    label: str  # English name (the page's names, in both languages, are assets/i18n/attribution.toml method.<key>)
    description: str  # what it computes and what it costs, one or two lines for the page's help
    run: Callable[[Inputs], Output]
    cost: Callable[[int, Any, int], Cost]  # (seq, cfg, batch) -> Cost
    settings: tuple[str, ...] = ()  # AttributionConfig fields it reads besides the target and the text
    gradients: bool = True  # needs a backward pass (so not on int8-quantized linears)

    @property
    def takes_baseline(self) -> bool:
        """It compares the input with the baseline: special tokens, equal in both, get exactly 0."""
        return "baseline" in self.settings


# ------------------------------------------------------------------------------------------------ helpers
def per_token(attr, how: str) -> np.ndarray:
    """(1, seq, E) attribution -> (seq,): summed over dimensions for gradient methods, averaged for perturbation
    methods (they spread one value over a token's dimensions)."""
    a = attr.detach().float()[0]
    if how == "sum":
        return a.sum(-1).cpu().numpy()
    return a.mean(-1).cpu().numpy()


def _calls(rows: int, batch: int) -> int:
    return math.ceil(rows / max(batch, 1))


# ------------------------------------------------------------------------------------------------ runners
def _integrated_gradients(i: Inputs) -> Output:
    from captum.attr import IntegratedGradients

    attr = IntegratedGradients(i.forward).attribute(i.embeds, baselines=i.base, n_steps=i.cfg.n_steps,
                                                    internal_batch_size=i.batch)
    # captum's convergence delta, from the f(x), f(baseline) we already have (saves its two extra forwards)
    delta = float(attr.detach().double().sum()) - (i.f_x - i.f_b)
    return Output(per_token(attr, "sum"), delta,
                  f"{i.baseline_label} baseline, {i.cfg.n_steps} steps, batch {i.batch}")


def _saliency(i: Inputs) -> Output:
    from captum.attr import Saliency

    attr = Saliency(i.forward).attribute(i.embeds.clone().requires_grad_(), abs=True)
    return Output(per_token(attr, "sum"), note="|gradient| summed over embedding dimensions: magnitude only, "
                                               "never negative")


def _input_x_gradient(i: Inputs) -> Output:
    from captum.attr import InputXGradient

    attr = InputXGradient(i.forward).attribute(i.embeds.clone().requires_grad_())
    return Output(per_token(attr, "sum"), note="embedding × gradient; ignores the baseline")


def _deeplift(i: Inputs) -> Output:
    from captum.attr import DeepLift

    work = copy.deepcopy(i.model)  # DeepLift hooks every nonlinearity: never on the shared model
    why = deeplift_check(work, i)
    if why:
        raise NotApplicable(why)
    attr, d = DeepLift(i.module_on(work)).attribute(i.embeds, baselines=i.base, return_convergence_delta=True)
    i.tick()
    scores, delta = per_token(attr, "sum"), float(d.flatten()[0])
    gap = i.f_x - i.f_b
    if abs(delta) > DEEPLIFT_TOLERANCE * abs(gap) + 1e-4:
        raise NotApplicable(
            f"DeepLift ran, but its attributions add up to {float(scores.sum()):+.4f} while f(x) − f(baseline) "
            f"is {gap:+.4f}. Its rescale rule covers the ReLU/Tanh units only; a Transformer also multiplies "
            "activations together (attention's Q·K and softmax, LayerNorm's division by the standard "
            "deviation), where DeepLift has no rule and captum passes plain gradients, so the decomposition "
            "does not hold. Use Integrated Gradients, which is exact along its path.")
    return Output(scores, delta, "attention's products and LayerNorm follow plain gradients (no DeepLift rule): "
                                 "check the delta")


def _occlusion(i: Inputs) -> Output:
    from captum.attr import Occlusion

    dim = i.embeds.shape[2]
    attr = Occlusion(i.forward).attribute(i.embeds, sliding_window_shapes=(1, dim), strides=(1, dim),
                                          baselines=i.base, perturbations_per_eval=i.batch)
    return Output(per_token(attr, "mean"), note="f(x) − f(x with one token replaced by the baseline)")


def _token_features(i: Inputs):
    """One interpretable feature per non-special token; specials join feature 0, and as their baseline equals the
    input they have no effect. Also this call's own generator: torch.manual_seed would reseed the whole server,
    and concurrent sessions would draw each other's coalitions."""
    import torch

    seq, dim = i.embeds.shape[1], i.embeds.shape[2]
    fmask = torch.zeros(1, seq, dim, dtype=torch.long, device=i.embeds.device)
    for j, p in enumerate(np.flatnonzero(~i.special)):
        fmask[0, p] = j
    return fmask, torch.Generator().manual_seed(i.cfg.seed)


def _kernel_shap(i: Inputs) -> Output:
    from captum.attr import KernelShap

    fmask, gen = _token_features(i)
    attr = _seeded_kernel_shap(KernelShap, i.forward, gen).attribute(
        i.embeds, baselines=i.base, feature_mask=fmask, n_samples=i.cfg.n_samples, perturbations_per_eval=i.batch)
    return Output(per_token(attr, "mean"), note=f"{i.cfg.n_samples} coalitions of tokens replaced by the baseline")


def _lime(i: Inputs) -> Output:
    import torch
    from captum._utils.models.linear_model import SkLearnRidge
    from captum.attr import Lime

    fmask, gen = _token_features(i)
    device = i.embeds.device

    def similarity(orig, pert, pert_interp, **kw):
        z = pert_interp.float().flatten()
        cos = float(z.sum() / (math.sqrt(float(z.numel())) * max(float(z.norm()), 1e-9)))
        d = (1.0 - cos) * 100.0  # LIME's text explainer: cosine distance x 100, kernel width 25
        return math.exp(-(d ** 2) / (25.0 ** 2))

    def perturb(original_inp, **kw):  # captum's default draw (each feature kept with p = 0.5), seeded
        keep = torch.bernoulli(torch.full((1, kw["num_interp_features"]), 0.5), generator=gen)
        return keep.to(device=device).long()

    attr = Lime(i.forward, interpretable_model=SkLearnRidge(alpha=0.1), similarity_func=similarity,
                perturb_func=perturb).attribute(i.embeds, baselines=i.base, feature_mask=fmask,
                                                n_samples=i.cfg.n_samples, perturbations_per_eval=i.batch)
    return Output(per_token(attr, "mean"), note=f"ridge fit on {i.cfg.n_samples} perturbations, LIME's text kernel")


def _seeded_kernel_shap(kernel_shap_cls, forward, gen):
    """captum's KernelShap drawing its coalitions from ``gen``: its sampler calls the process-wide RNG and takes
    no generator. The same draw as captum's (coalition size from the Shapley kernel's distribution, then k
    features by thresholding normal noise at its k-th largest value), only seeded per call."""
    import torch

    class SeededKernelShap(kernel_shap_cls):
        def kernel_shap_perturb_generator(self, original_inp, **kwargs):
            device = (original_inp if isinstance(original_inp, torch.Tensor) else original_inp[0]).device
            n = int(kwargs["num_interp_features"])
            probs = kwargs["num_select_distribution"].probs
            yield torch.ones(1, n, device=device, dtype=torch.long)
            yield torch.zeros(1, n, device=device, dtype=torch.long)
            while True:
                k = int(torch.multinomial(probs, 1, generator=gen))
                noise = torch.randn(1, n, generator=gen)
                threshold = torch.kthvalue(noise, n - k).values.item()
                yield (noise > threshold).to(device=device).long()

    return SeededKernelShap(forward)


# ------------------------------------------------------------------------------------------------ applicability
def deeplift_module_check(model) -> str | None:
    """Why DeepLift cannot apply, from the model's modules alone (no input): activations it has no rule for."""
    from captum.attr._core.deep_lift import SUPPORTED_NON_LINEAR

    act_like = ("gelu", "silu", "swish", "mish", "quickgelu", "activation")
    unsupported = sorted({type(m).__name__ for m in model.modules()
                          if not list(m.children()) and type(m) not in SUPPORTED_NON_LINEAR
                          and any(a in type(m).__name__.lower() for a in act_like)})
    if unsupported:
        return (f"DeepLift's rescale rule covers ReLU, ELU, LeakyReLU, Sigmoid, Tanh and Softmax modules; this model's "
                f"feed-forward uses {', '.join(unsupported)}, for which captum would silently fall back to plain "
                "gradients, so the result would not be DeepLift. Use Integrated Gradients (the same idea, exact).")
    return None


def deeplift_check(model, i: Inputs) -> str | None:
    """Why captum's DeepLift does not apply to ``model`` (a copy) on this input; None when it does."""
    import torch
    from captum.attr._core.deep_lift import SUPPORTED_NON_LINEAR

    why = deeplift_module_check(model)
    if why:
        return why
    calls: dict[int, int] = {}
    hooks = [m.register_forward_hook(lambda mod, _i, _o: calls.__setitem__(id(mod), calls.get(id(mod), 0) + 1))
             for m in model.modules() if type(m) in SUPPORTED_NON_LINEAR]
    try:
        with torch.no_grad():
            i.module_on(model)(i.embeds)
    finally:
        for h in hooks:
            h.remove()
    if any(v > 1 for v in calls.values()):
        return ("This model runs the same layer module several times (cross-layer parameter sharing); captum's "
                "DeepLift stores one input per module, so it cannot follow repeated calls. Use Integrated Gradients.")
    return None


def unavailable_methods(model) -> dict[str, str]:
    """Methods that cannot apply to this model, with the reason, known from its modules alone (no forward pass):
    a page offers the rest, so nothing is refused only after a long run."""
    if getattr(model, "encoderlab_quant", ""):  # core.compare.int8: int8 linears have no backward
        grad = ("This model runs int8 linears (core.compare.int8), which have no gradients: untick int8 (CPU) in the "
                "sidebar for gradient methods, or use occlusion, KernelSHAP or LIME.")
        return {k: grad for k, m in METHODS.items() if m.gradients}
    why = deeplift_module_check(model)
    return {"deeplift": why} if why else {}


# ------------------------------------------------------------------------------------------------ the registry
def _one(seq, cfg, batch) -> Cost:
    return Cost(1, 1, 1)


METHODS: dict[str, Method] = {m.key: m for m in (
    # The key is "lig" from when this entry was labelled "Layer Integrated Gradients"; it stays because links,
    # CSV exports and other modules name it. What runs is captum's IntegratedGradients on the word-embedding
    # output, which is exactly LayerIntegratedGradients on the embedding layer (the per-layer heatmap runs
    # LayerIntegratedGradients at each encoder layer).
    Method("lig", "Integrated Gradients (on the embeddings)",
           "IG on the word embeddings (= LayerIG of the embedding layer); the scores add up to f(x) − f(baseline). "
           "n_steps forward + backward passes.",
           _integrated_gradients, lambda seq, cfg, bs: Cost(cfg.n_steps, cfg.n_steps, _calls(cfg.n_steps, bs)),
           settings=("baseline", "n_steps", "internal_batch_size")),
    Method("saliency", "Saliency",
           "|gradient| at the input: a magnitude, no baseline. 1 forward + backward pass.",
           _saliency, _one),
    Method("ixg", "Input × Gradient",
           "Embedding × gradient at the input, no baseline. 1 forward + backward pass.",
           _input_x_gradient, _one),
    Method("deeplift", "DeepLift",
           "Rescale rules from the baseline, only where the model's units have rules. 1 forward + backward pass.",
           _deeplift, lambda seq, cfg, bs: Cost(3, 2, 1), settings=("baseline",)),
    Method("occlusion", "Occlusion",
           "f(x) − f(x with one token set to its baseline). 1 forward pass per token.",
           _occlusion, lambda seq, cfg, bs: Cost(seq + 1, 0, _calls(seq, bs) + 1),
           settings=("baseline", "internal_batch_size"), gradients=False),
    Method("kernelshap", "KernelSHAP",
           "A Shapley-kernel fit over coalitions of tokens kept or set to the baseline. 1 forward pass per sample.",
           _kernel_shap, lambda seq, cfg, bs: Cost(cfg.n_samples, 0, _calls(cfg.n_samples, bs)),
           settings=("baseline", "n_samples", "internal_batch_size", "seed"), gradients=False),
    Method("lime", "LIME",
           "A ridge fit over random token subsets, LIME's text kernel. 1 forward pass per sample.",
           _lime, lambda seq, cfg, bs: Cost(cfg.n_samples, 0, _calls(cfg.n_samples, bs)),
           settings=("baseline", "n_samples", "internal_batch_size", "seed"), gradients=False),
)}



# ------------------------------------------------------------------------------------------------ before a run
# What a run will cost, shown before it starts: the passes come from the cost model above (the same counts the
# progress bar ticks); the time from two plain forwards of the same text on the same model, timed once.
# A backward pass costs about this many forwards. The textbook figure is 2 (gradients of activations and of
# weights); measured on encoderlab/bert-mini (CPU, 15 tokens) forward+backward took 2.2x a forward at 50 rows and
# 2.6x at 1 row, so 1.5.
BACKWARD_FACTOR = 1.5
# The batched forward timed for an estimate has the run's own batch rows, at most this many (bounds its own cost).
# Timing the run's batch, not a smaller one, keeps every call of the run between the two timed sizes: a forward's
# time grows far less than linearly in its rows on a CPU, so extrapolating from a small batch overshoots.
TIMING_ROWS = 64


@dataclass(frozen=True)
class ForwardTiming:
    """Two timed plain forwards of one input (``seq`` tokens) on one model: one row took ``one_s`` seconds and
    ``rows`` rows (one batch) ``rows_s``. A forward call of n rows is taken to cost a + b·n, the line through those
    two points (a: the call's fixed overhead, b: per row)."""

    seq: int
    rows: int
    one_s: float
    rows_s: float

    def per_call_and_row(self) -> tuple[float, float]:
        if self.rows <= 1:
            return 0.0, self.one_s
        b = max(0.0, (self.rows_s - self.one_s) / (self.rows - 1))
        return max(0.0, self.one_s - b), b

    def seconds(self, cost: Cost) -> float:
        """Seconds for ``cost``: its calls' overhead plus its rows, with each backward counted BACKWARD_FACTOR
        forwards (a method's backwards run over the same rows as its forwards)."""
        a, b = self.per_call_and_row()
        forward_s = cost.calls * a + cost.forwards * b
        return forward_s * (1.0 + BACKWARD_FACTOR * cost.backwards / max(cost.forwards, 1))


@dataclass(frozen=True)
class Estimate:
    """What one core.inspect.attribution.attribute run of a config is expected to cost on a model, before it runs."""

    forwards: int  # examples through the model (setup, the methods, per-layer IG)
    backwards: int  # of those, the ones with a backward pass
    seconds: float  # from a ForwardTiming on this model and input: fitting (KernelSHAP, LIME) and copies not counted
    seq: int
    batch: int


def _encoded(lm, cfg):
    tok = lm.tokenizer
    second = cfg.text_b if cfg.target == "pair" else None  # as core.inspect.attribution.prepare tokenizes it
    return tok(cfg.text, second, return_tensors="pt", truncation=True, max_length=lm.max_tokens)


def _plan(lm, cfg) -> tuple[int, int]:
    """(tokens, forward batch) of a run of ``cfg`` on ``lm``: the batch capped as core.inspect.attribution caps it."""
    from core.inspect.attribution import _batch  # lazily: core.inspect.attribution imports this module

    seq = int(_encoded(lm, cfg)["input_ids"].shape[1])
    return seq, _batch(cfg, seq)


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
    import time

    import torch

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


def run_costs(cfg, seq: int, batch: int, n_layers: int) -> list[Cost]:
    """The parts of one core.inspect.attribution.attribute run: prepare's forward and f(x), f(baseline) in one call; each
    method's cost; per-layer IG (``cfg.layer_steps`` at each of ``n_layers`` layers) when it is on."""
    parts = [Cost(1, 0, 1), Cost(2, 0, 1)]
    parts += [METHODS[k].cost(seq, cfg, batch) for k in cfg.methods]
    if cfg.layer_steps:
        steps = cfg.layer_steps * n_layers
        parts.append(Cost(steps, steps, _calls(cfg.layer_steps, batch) * n_layers))
    return parts


def estimate(lm, cfg, timing: ForwardTiming) -> Estimate:
    """The passes and seconds a run of ``cfg`` on ``lm`` should take, from ``timing`` (time_forward on the same
    model and input)."""
    seq, batch = _plan(lm, cfg)
    n_layers = int(getattr(lm.model.config, "num_hidden_layers", 1)) + 1  # as core.inspect.attribution counts them
    parts = run_costs(cfg, seq, batch, n_layers)
    return Estimate(sum(c.forwards for c in parts), sum(c.backwards for c in parts),
                    sum(timing.seconds(c) for c in parts), seq, batch)

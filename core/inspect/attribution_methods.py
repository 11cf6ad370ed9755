"""The attribution methods as one registry: per method its key, label, runner, cost model, the settings it reads
(a baseline, integration steps, samples) and a short description.

core.inspect.attribution_inputs prepares the input and the scalar to explain, core.inspect.attribution runs the
methods a config names through this table, and core.inspect.attribution_estimate sizes a run from their cost
models; the Attributions page builds its picker, help text and settings widgets from it. Adding a method is one
``Method`` entry here (plus its name in assets/i18n/attribution.toml, for the page in 中文).

Every runner receives the same ``Inputs``: the word-embedding vectors and their baseline, the explained scalar as a
function of embeddings on the shared model (which no runner may hook), and a factory for the same scalar as a
module over another model, for the methods that must hook modules (they work on a deep copy that lives only for
the call). captum does the attribution itself in every runner.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.base.messages import Problem, msg
from core.models.cost import Cost

DEEPLIFT_TOLERANCE = 0.25  # DeepLift whose sum misses f(x) - f(baseline) by more than this share is rejected


class NotApplicable(Problem, ValueError):
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
    cfg: Any  # core.inspect.attribution_inputs.AttributionConfig
    batch: int  # rows per forward call, already capped for memory
    tick: Callable[[], None]  # one forward call done, for runners that call a model themselves
    baseline_label: str  # e.g. "[PAD] embedding", for the note


@dataclass(frozen=True)
class Output:
    scores: np.ndarray  # (seq,) one value per token
    delta: float | None = None  # convergence delta: sum(scores) - (f(x) - f(baseline)), where the method has one
    note: str = ""  # a Message (attribution.note.<method>): the page writes it in its language


@dataclass(frozen=True)
class Method:
    key: str  # stable id: links, CSV exports and other modules name methods by it
    label: str  # English name (the page's names, in both languages, are assets/i18n/attribution.toml method.<key>)
    description: str  # what it computes and what it costs, for the page's help: a Message (attribution.about.<key>)
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


def batch_calls(rows: int, batch: int) -> int:
    return math.ceil(rows / max(batch, 1))


# ------------------------------------------------------------------------------------------------ runners
def _integrated_gradients(i: Inputs) -> Output:
    from captum.attr import IntegratedGradients  # lazy: captum is slow to import, only a run needs it

    attr = IntegratedGradients(i.forward).attribute(
        i.embeds, baselines=i.base, n_steps=i.cfg.n_steps, internal_batch_size=i.batch
    )
    # captum's convergence delta, from the f(x), f(baseline) we already have (saves its two extra forwards)
    delta = float(attr.detach().double().sum()) - (i.f_x - i.f_b)
    note = msg("attribution.note.ig", baseline=i.baseline_label, steps=i.cfg.n_steps, batch=i.batch)
    return Output(per_token(attr, "sum"), delta, note)


def _saliency(i: Inputs) -> Output:
    from captum.attr import Saliency  # lazy: captum is slow to import, only a run needs it

    attr = Saliency(i.forward).attribute(i.embeds.clone().requires_grad_(), abs=True)
    return Output(per_token(attr, "sum"), note=msg("attribution.note.saliency"))


def _input_x_gradient(i: Inputs) -> Output:
    from captum.attr import InputXGradient  # lazy: captum is slow to import, only a run needs it

    attr = InputXGradient(i.forward).attribute(i.embeds.clone().requires_grad_())
    return Output(per_token(attr, "sum"), note=msg("attribution.note.ixg"))


def _deeplift(i: Inputs) -> Output:
    from captum.attr import DeepLift  # lazy: captum is slow to import, only a run needs it

    work = copy.deepcopy(i.model)  # DeepLift hooks every nonlinearity: never on the shared model
    why = deeplift_check(work, i)
    if why:
        raise NotApplicable(why)
    attr, d = DeepLift(i.module_on(work)).attribute(i.embeds, baselines=i.base, return_convergence_delta=True)
    i.tick()
    scores, delta = per_token(attr, "sum"), float(d.flatten()[0])
    gap = i.f_x - i.f_b
    if abs(delta) > DEEPLIFT_TOLERANCE * abs(gap) + 1e-4:
        raise NotApplicable(msg("attribution.deeplift_sum_off", total=float(scores.sum()), gap=gap))
    return Output(scores, delta, msg("attribution.note.deeplift"))


def _occlusion(i: Inputs) -> Output:
    from captum.attr import Occlusion  # lazy: captum is slow to import, only a run needs it

    dim = i.embeds.shape[2]
    attr = Occlusion(i.forward).attribute(
        i.embeds, sliding_window_shapes=(1, dim), strides=(1, dim), baselines=i.base, perturbations_per_eval=i.batch
    )
    return Output(per_token(attr, "mean"), note=msg("attribution.note.occlusion"))


def _token_features(i: Inputs):
    """One interpretable feature per non-special token; specials join feature 0, and as their baseline equals the
    input they have no effect. Also this call's own generator: torch.manual_seed would reseed the whole server,
    and concurrent sessions would draw each other's coalitions."""
    import torch  # lazy: torch loads in seconds; the page's picker imports this

    seq, dim = i.embeds.shape[1], i.embeds.shape[2]
    fmask = torch.zeros(1, seq, dim, dtype=torch.long, device=i.embeds.device)
    for j, p in enumerate(np.flatnonzero(~i.special)):
        fmask[0, p] = j
    return fmask, torch.Generator().manual_seed(i.cfg.seed)


def _kernel_shap(i: Inputs) -> Output:
    from captum.attr import KernelShap  # lazy: captum is slow to import, only a run needs it

    fmask, gen = _token_features(i)
    attr = _seeded_kernel_shap(KernelShap, i.forward, gen).attribute(
        i.embeds, baselines=i.base, feature_mask=fmask, n_samples=i.cfg.n_samples, perturbations_per_eval=i.batch
    )
    return Output(per_token(attr, "mean"), note=msg("attribution.note.kernelshap", n=i.cfg.n_samples))


def _lime(i: Inputs) -> Output:
    import torch  # lazy: torch loads in seconds; the page's picker imports this
    from captum._utils.models.linear_model import SkLearnRidge  # lazy: captum is slow to import, only a run needs it
    from captum.attr import Lime  # lazy: captum is slow to import, only a run needs it

    fmask, gen = _token_features(i)
    device = i.embeds.device

    def similarity(orig, pert, pert_interp, **kw):
        z = pert_interp.float().flatten()
        cos = float(z.sum() / (math.sqrt(float(z.numel())) * max(float(z.norm()), 1e-9)))
        d = (1.0 - cos) * 100.0  # LIME's text explainer: cosine distance x 100, kernel width 25
        return math.exp(-(d**2) / (25.0**2))

    def perturb(original_inp, **kw):  # captum's default draw (each feature kept with p = 0.5), seeded
        keep = torch.bernoulli(torch.full((1, kw["num_interp_features"]), 0.5), generator=gen)
        return keep.to(device=device).long()

    attr = Lime(
        i.forward, interpretable_model=SkLearnRidge(alpha=0.1), similarity_func=similarity, perturb_func=perturb
    ).attribute(
        i.embeds, baselines=i.base, feature_mask=fmask, n_samples=i.cfg.n_samples, perturbations_per_eval=i.batch
    )
    return Output(per_token(attr, "mean"), note=msg("attribution.note.lime", n=i.cfg.n_samples))


def _seeded_kernel_shap(kernel_shap_cls, forward, gen):
    """captum's KernelShap drawing its coalitions from ``gen``: its sampler calls the process-wide RNG and takes
    no generator. The same draw as captum's (coalition size from the Shapley kernel's distribution, then k
    features by thresholding normal noise at its k-th largest value), only seeded per call."""
    import torch  # lazy: torch loads in seconds; the page's picker imports this

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
    from captum.attr._core.deep_lift import SUPPORTED_NON_LINEAR  # lazy: captum is slow to import, only a run needs it

    act_like = ("gelu", "silu", "swish", "mish", "quickgelu", "activation")
    unsupported = sorted(
        {
            type(m).__name__
            for m in model.modules()
            if not list(m.children())
            and type(m) not in SUPPORTED_NON_LINEAR
            and any(a in type(m).__name__.lower() for a in act_like)
        }
    )
    if unsupported:
        return msg("attribution.deeplift_no_rule", modules=", ".join(unsupported))
    return None


def deeplift_check(model, i: Inputs) -> str | None:
    """Why captum's DeepLift does not apply to ``model`` (a copy) on this input; None when it does."""
    import torch  # lazy: torch loads in seconds; the page's picker imports this
    from captum.attr._core.deep_lift import SUPPORTED_NON_LINEAR  # lazy: captum is slow to import, only a run needs it

    why = deeplift_module_check(model)
    if why:
        return why
    calls: dict[int, int] = {}
    hooks = [
        m.register_forward_hook(lambda mod, _i, _o: calls.__setitem__(id(mod), calls.get(id(mod), 0) + 1))
        for m in model.modules()
        if type(m) in SUPPORTED_NON_LINEAR
    ]
    try:
        with torch.no_grad():
            i.module_on(model)(i.embeds)
    finally:
        for h in hooks:
            h.remove()
    if any(v > 1 for v in calls.values()):
        return msg("attribution.deeplift_shared_layers")
    return None


def unavailable_methods(model) -> dict[str, str]:
    """Methods that cannot apply to this model, with the reason, known from its modules alone (no forward pass):
    a page offers the rest, so nothing is refused only after a long run."""
    if getattr(model, "encoderlab_quant", ""):  # core.compare.int8: int8 linears have no backward
        grad = msg("attribution.int8_no_gradients")
        return {k: grad for k, m in METHODS.items() if m.gradients}
    why = deeplift_module_check(model)
    return {"deeplift": why} if why else {}


# ------------------------------------------------------------------------------------------------ the registry
def _one(seq, cfg, batch) -> Cost:
    return Cost(1, 1, 1)


METHODS: dict[str, Method] = {
    m.key: m
    for m in (
        # The key is "lig" from when this entry was labelled "Layer Integrated Gradients"; it stays because links,
        # CSV exports and other modules name it. What runs is captum's IntegratedGradients on the word-embedding
        # output, which is exactly LayerIntegratedGradients on the embedding layer (the per-layer heatmap runs
        # LayerIntegratedGradients at each encoder layer).
        Method(
            "lig",
            "Integrated Gradients (on the embeddings)",
            msg("attribution.about.lig"),
            _integrated_gradients,
            lambda seq, cfg, bs: Cost(cfg.n_steps, cfg.n_steps, batch_calls(cfg.n_steps, bs)),
            settings=("baseline", "n_steps", "internal_batch_size"),
        ),
        Method(
            "saliency",
            "Saliency",
            msg("attribution.about.saliency"),
            _saliency,
            _one,
        ),
        Method(
            "ixg",
            "Input × Gradient",
            msg("attribution.about.ixg"),
            _input_x_gradient,
            _one,
        ),
        Method(
            "deeplift",
            "DeepLift",
            msg("attribution.about.deeplift"),
            _deeplift,
            lambda seq, cfg, bs: Cost(3, 2, 1),
            settings=("baseline",),
        ),
        Method(
            "occlusion",
            "Occlusion",
            msg("attribution.about.occlusion"),
            _occlusion,
            lambda seq, cfg, bs: Cost(seq + 1, 0, batch_calls(seq, bs) + 1),
            settings=("baseline", "internal_batch_size"),
            gradients=False,
        ),
        Method(
            "kernelshap",
            "KernelSHAP",
            msg("attribution.about.kernelshap"),
            _kernel_shap,
            lambda seq, cfg, bs: Cost(cfg.n_samples, 0, batch_calls(cfg.n_samples, bs)),
            settings=("baseline", "n_samples", "internal_batch_size", "seed"),
            gradients=False,
        ),
        Method(
            "lime",
            "LIME",
            msg("attribution.about.lime"),
            _lime,
            lambda seq, cfg, bs: Cost(cfg.n_samples, 0, batch_calls(cfg.n_samples, bs)),
            settings=("baseline", "n_samples", "internal_batch_size", "seed"),
            gradients=False,
        ),
    )
}

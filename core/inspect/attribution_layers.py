"""Per-layer attribution: LayerIntegratedGradients at the embeddings' output and after each encoder layer (the token x
layer heatmap of the Attributions page). LayerIG hooks modules, so it runs on a deep copy of the model that lives only
for the call; a layer shared across depth (ALBERT) is refused, since one hooked module cannot tell its passes apart.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from core.base.messages import Message, msg
from core.inspect.attribution_inputs import AttributionConfig, Prepared, Scorer, forward_batch
from core.inspect.attribution_methods import NotApplicable, per_token
from core.registry import encoder_layers


def _encoder_layers(model) -> tuple[list, list[str]] | None:
    """[the embeddings' last module] + the encoder's layer modules, with their names; None when no layer list is
    found. (A layer shared across depth, Family.shared_layers, is refused before: one module, several passes.)

    The layer list is core.registry.encoder_layers' (the one fine-tuning freezes)."""
    import torch  # lazy: torch loads in seconds; the page's imports reach this module

    base = model.base_model
    layers = encoder_layers(base)
    if layers is None:
        return None
    n = len(layers)
    emb = getattr(base, "embeddings", None)
    # the embeddings' last op (their norm), not the embeddings module itself: some embeddings modules are called
    # with input_ids=None when fed inputs_embeds, and LayerIG needs a module whose output it can replace
    emb = next(
        (
            getattr(emb, n_)
            for n_ in ("LayerNorm", "norm", "layer_norm")
            if isinstance(getattr(emb, n_, None), torch.nn.Module)
        ),
        emb,
    )
    mods = ([emb] if emb is not None else []) + list(layers)
    names = (["embeddings"] if emb is not None else []) + [f"layer {i + 1}" for i in range(n)]
    return mods, names


def _hookable(mods: list, probe: Callable[[], Any]) -> list:
    """Per module, the one whose output LayerIG can take: the module itself when it returns tensors, else (a layer
    returning None beside its hidden states, as DeBERTa-v2's does without attentions; captum's hook clones every
    output) its last norm, which is the layer's last op in a post-norm encoder. ``probe`` runs one forward."""
    import torch  # lazy: torch loads in seconds; the page's imports reach this module

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
        norms = [
            m for m in mod.modules() if isinstance(m, torch.nn.LayerNorm) or "layernorm" in type(m).__name__.lower()
        ]
        if not norms:
            raise NotApplicable(msg("attribution.no_hookable_layer_output", module_class=type(mod).__name__))
        picked.append(norms[-1])
    return picked


def _layer_step(i: int, names: Sequence[str]) -> Message:
    """The progress line of the ``i``-th of ``_encoder_layers``' modules (the embeddings first, when found)."""
    if names[i] == "embeddings":
        return msg("progress.attribution.layer_embeddings")
    return msg("progress.attribution.layer", layer=i if names[0] == "embeddings" else i + 1)


def layer_attributions(prep: Prepared, cfg: AttributionConfig, report: Callable[[float, str], None]):
    """LayerIG at the embeddings output and after each encoder layer, on a copy of the model."""
    from captum.attr import LayerIntegratedGradients  # lazy: captum is slow to import, only a run needs it

    fam = prep.lm.family
    if fam.shared_layers:
        raise NotApplicable(msg("attribution.model_runs_one_shared", label=fam.label))
    work = copy.deepcopy(prep.lm.model)  # LayerIG hooks modules: never on the shared model
    found = _encoder_layers(work)
    if found is None:
        raise NotApplicable(msg("attribution.encoder_layers_could_not", model_class=type(work).__name__))
    mods, names = found
    mods = _hookable(mods, lambda: Scorer(work, prep)(prep.embeds))
    bs = forward_batch(cfg, prep.embeds.shape[1])
    rows = []
    for i, mod in enumerate(mods):
        report(i / len(mods), _layer_step(i, names))
        lig = LayerIntegratedGradients(Scorer(work, prep), mod)
        attr = lig.attribute(prep.embeds, baselines=prep.base, n_steps=cfg.layer_steps, internal_batch_size=bs)
        if isinstance(attr, (tuple, list)):
            attr = attr[0]
        rows.append(per_token(attr, "sum"))
    return np.stack(rows), tuple(names)

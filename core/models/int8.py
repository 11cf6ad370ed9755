"""Dynamic int8 quantization of a loaded model's linear layers (CPU): the transform itself.

``quantize_int8(model)`` replaces every ``nn.Linear`` (except an output projection tied to the input embeddings:
quantizing it would untie it and add an int8 copy of the vocabulary matrix) with torch's dynamically quantized
linear: int8 weights, activations quantized per batch on the fly, fbgemm/oneDNN int8 kernels. Embeddings,
LayerNorms and the attention softmax stay fp32. ``core.models.loading.load`` applies it for a
``ModelSpec(quant="int8")``, so every inference page can use the quantized model; the sidebar offers it. What it
costs and saves is measured in core.compare.int8.

Why ``torch.ao.quantization.quantize_dynamic`` and not torchao, which torch 2.13's deprecation warning points to:
torchao is not among the pinned requirements, and its CPU int8 path (``quantize_`` with
``Int8DynamicActivationInt8WeightConfig``) runs eagerly through dequantize + fp32 matmul unless torch.compile
fuses it: measured here on a 768x3072 + 3072x768 pair, batch 8x128, 1 thread: fp32 144 ms, torchao 4,294 ms,
quantize_dynamic 76 ms. So the deprecated API is used and only its two deprecation warnings are silenced.
"""

from __future__ import annotations

import io
import warnings

from core.base.messages import Problem, msg

QUANT_MODES = ("", "int8")
MARK = (
    "encoderlab_quant"  # attribute set on a quantized model (core.models.packed_linear then leaves its linears alone)
)

# Narrow, process-wide filters (warnings.catch_warnings is not thread-safe in a server): the two deprecation
# notices the quantize_dynamic path prints (see the module docstring for why it is used anyway).
warnings.filterwarnings("ignore", message=r"torch\.ao\.quantization is deprecated", category=DeprecationWarning)
warnings.filterwarnings(
    "ignore", message=r"torch\.quantize_per_tensor, torch\.quantize_per_channel", category=UserWarning
)


class QuantizeError(Problem, ValueError):
    """The model cannot be quantized as asked; the message says why and what to do instead."""


def check_mode(quant: str, device_kind: str | None = None) -> None:
    """Raise QuantizeError for an unknown mode, or int8 on a device other than the CPU."""
    if quant not in QUANT_MODES:
        raise QuantizeError(msg("int8.unknown_quantization_use_fp", quant=quant))
    if quant and device_kind not in (None, "cpu"):
        raise QuantizeError(msg("int8.cpu_only"))


def is_quantized(model) -> bool:
    return bool(getattr(model, MARK, ""))


def _tied_linears(model) -> set[str]:
    """Names of nn.Linear modules whose weight is an embedding matrix (the MLM decoder tied to the input)."""
    import torch

    emb = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    return {n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and id(m.weight) in emb}


def quantize_int8(model, inplace: bool = False):
    """The model with its nn.Linear layers dynamically quantized to int8 (CPU inference only); returns it.

    Raises QuantizeError for a model on CUDA, in training mode, or not in fp32 (int8 quantizes fp32 weights).
    """
    import torch

    p = next(model.parameters())
    check_mode("int8", p.device.type)
    if model.training:
        raise QuantizeError(msg("int8.cannot_train"))
    if p.dtype != torch.float32:
        raise QuantizeError(msg("int8.needs_fp32", dtype=p.dtype))
    if is_quantized(model):
        return model
    tied = _tied_linears(model)
    targets = {
        n: torch.ao.quantization.default_dynamic_qconfig
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and n not in tied
    }
    if not targets:
        raise QuantizeError(msg("int8.no_linear_layers", model_class=type(model).__name__))
    q = torch.ao.quantization.quantize_dynamic(model, targets, dtype=torch.qint8, inplace=inplace)
    setattr(q, MARK, "int8")
    return q


def quantized_linears(model) -> int:
    """How many dynamically quantized linear modules the model holds."""
    import torch

    qlin = torch.ao.nn.quantized.dynamic.Linear
    return sum(1 for m in model.modules() if isinstance(m, qlin))


def memory_bytes(model) -> int:
    """Bytes the model's tensors take in memory: parameters and buffers (shared ones once) plus the int8 weights
    and fp32 biases packed inside quantized linears (which are neither parameters nor buffers)."""
    import torch

    seen: set[int] = set()
    total = 0
    for t in list(model.parameters()) + list(model.buffers()):
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    qlin = torch.ao.nn.quantized.dynamic.Linear
    for m in model.modules():
        if isinstance(m, qlin):
            w, b = m._packed_params._weight_bias()
            total += w.numel() * w.element_size() + (b.numel() * b.element_size() if b is not None else 0)
    return total


def disk_bytes(model) -> int:
    """Bytes of the serialized state_dict (torch.save; shared tensors stored once), i.e. the size on disk."""
    import torch

    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getbuffer().nbytes

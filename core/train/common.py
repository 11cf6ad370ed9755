"""What fine-tuning (core.train.finetune) and pretraining (core.train.pretrain.train) share: one copy of each training piece.

- ``pad``: a batch padded to its longest row through the tokenizer (``tokenizer.pad``: ids, attention mask, token
  types, on the tokenizer's own padding side), with the per-token fields a tokenizer does not know (labels, word
  indices) padded on the same side;
- ``param_groups``: AdamW groups, no weight decay on biases and LayerNorm weights, heads (and embeddings) at a
  multiple of the base learning rate;
- ``accelerator``: one ``accelerate.Accelerator`` per run, with accelerate's one-setting-per-process rule guarded;
- ``save_checkpoint`` / ``load_checkpoint``: a resumable checkpoint through accelerate's ``save_state`` /
  ``load_state`` (prepared model and optimizer, objects registered for checkpointing, RNG states), plus the
  loop's own counters as JSON and named tensors and arrays;
- ``release``: drop a finished or failed run's references so its (GPU) memory comes back.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np

from core.base.messages import msg
from core.models.devices import is_oom
from core.runtime.artifacts import DAMAGED_SUFFIX, damaged_files, read_errors, set_aside, swap_in, write_checksums
from core.runtime.disk_full import whole_or_nothing

STATE_FILE = "trainer_state.json"
RUN_RNG_FILE = "run_rng.pt"
POSITION: Final = "position"  # a ``pad`` fill: the field holds positions in the row (padding points to itself)
TOKENIZER_FIELDS = ("input_ids", "token_type_ids", "attention_mask", "special_tokens_mask")


# ---------------------------------------------------------------------------------------------- padding
def pad(
    tokenizer,
    features: Sequence[dict[str, Any]],  # per row: lists of ints per token, and per-row ints
    fill: dict[str, int | Literal["position"]] | None = None,
    return_tensors: str = "pt",
) -> dict[str, Any]:
    """Pad ``features`` (one dict of unpadded lists per row) to the batch's longest row.

    ``input_ids``, ``token_type_ids`` and ``attention_mask`` go through ``tokenizer.pad``, so the pad id, the pad
    token type and the side (``tokenizer.padding_side``) are the tokenizer's own. Other per-token fields are padded
    here on the same side, because the tokenizer passes fields it does not know through unpadded (transformers'
    DataCollatorForTokenClassification pads its labels by hand for the same reason): ``fill[key]`` is the pad
    value (e.g. -100 for labels), or ``POSITION`` for fields that hold positions within the row (whole-word
    indices): padding then points to itself, and real entries shift with left padding. Fields not in ``fill``
    and not the tokenizer's are per-row values, returned stacked. Returns tensors (``return_tensors="pt"``).
    """
    from transformers.data.data_collator import (
        pad_without_fast_tokenizer_warning,  # lazy: transformers loads in seconds
    )

    if not features:
        raise ValueError(msg("train.pad_needs_least_one"))
    fill = dict(fill or {})
    tok_feats = [{k: list(v) for k, v in f.items() if k in TOKENIZER_FIELDS} for f in features]
    batch = dict(
        pad_without_fast_tokenizer_warning(
            tokenizer, tok_feats, padding=True, return_attention_mask=True, return_tensors=None
        )
    )
    width = len(batch["input_ids"][0]) if batch["input_ids"] else 0
    left = tokenizer.padding_side == "left"
    for key, value in fill.items():
        rows: list[list[int]] = []
        for f in features:
            row = list(f[key])
            gap = width - len(row)
            if value == POSITION:
                if left:  # every real position moves right by the padding in front of it
                    rows.append(list(range(gap)) + [i + gap for i in row])
                else:
                    rows.append(row + list(range(len(row), width)))
            else:
                rows.append([value] * gap + row if left else row + [value] * gap)
        batch[key] = rows
    for key in features[0]:
        if key not in TOKENIZER_FIELDS and key not in fill:
            batch[key] = [f[key] for f in features]
    if return_tensors != "pt":
        return batch
    import torch  # lazy: torch loads in seconds; importing this module (a page) does not need it

    return {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}


# ---------------------------------------------------------------------------------------------- optimizer
def under(name: str, paths: Sequence[str]) -> bool:
    """``name`` is the parameter at one of ``paths`` or inside the module there ("cls" covers "cls.predictions.bias")."""
    return any(name == p or name.startswith(p + ".") for p in (q.rstrip(".") for q in paths))


def param_groups(
    model,
    lr: float,
    weight_decay: float,
    head_lr_mult: float = 1.0,
    head_prefixes: Sequence[str] = (),
    embed_lr_mult: float = 1.0,
    embed_prefixes: Sequence[str] = (),
) -> list[dict]:
    """AdamW parameter groups: (base | embeddings | heads) x (decay | no decay), empty groups left out.

    Biases and LayerNorm weights (every tensor of fewer than two dimensions) get no weight decay, as in BERT's own
    optimizer. Parameters under ``head_prefixes`` (module paths, e.g. the fresh MLM head, or the scalar mix's
    weights) learn at ``lr * head_lr_mult``, those under ``embed_prefixes`` at ``lr * embed_lr_mult``, the rest at
    ``lr``. Frozen parameters (``requires_grad`` off) are left out. A parameter shared by two names (tied word
    embeddings) counts once, under the first name torch gives it."""
    kinds = (("base", 1.0), ("embed", embed_lr_mult), ("head", head_lr_mult))
    groups: dict[tuple[str, bool], list] = {(k, d): [] for k, _ in kinds for d in (True, False)}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        kind = "head" if under(name, head_prefixes) else "embed" if under(name, embed_prefixes) else "base"
        groups[(kind, p.ndim >= 2)].append(p)
    mult = dict(kinds)
    return [
        {"params": ps, "weight_decay": weight_decay if decay else 0.0, "lr": lr * mult[kind]}
        for (kind, decay), ps in groups.items()
        if ps
    ]


def head_paths(model) -> tuple[str, ...]:
    """The top-level modules of a transformers model that are not its base model: its heads ("cls", "lm_head",
    "predictions" and "sop_classifier", ...), found from ``base_model_prefix`` rather than named per family."""
    prefix = getattr(model, "base_model_prefix", "")
    return tuple(n for n, m in model.named_children() if n != prefix and any(True for _ in m.parameters()))


def embedding_paths(model, parts: Sequence[str]) -> tuple[str, ...]:
    """Full paths of ``parts`` (module paths under the base model, e.g. "embeddings") in ``model``."""
    prefix = getattr(model, "base_model_prefix", "")
    inner = prefix and getattr(model, prefix, None) is not None
    return tuple(f"{prefix}.{p}" if inner else p for p in parts)


# ---------------------------------------------------------------------------------------------- accelerate
_SLOTS: dict[tuple[str, str], int] = {}  # (device kind, mixed precision) -> runs in progress in this process
_SLOT_LOCK = threading.Lock()


def bf16_ok() -> bool:
    import torch  # lazy: as in pad

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def cpu_bf16_native() -> bool:
    """The CPU has bf16 matrix instructions (AVX512-BF16 or AMX), where torch's CPU autocast is fast: 5x fp32's
    matmul throughput measured on a 2-core EPYC with avx512_bf16 (without them bf16 is emulated and slower)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


@contextmanager
def accelerator(device_kind: str, mixed_precision: str, error: type[Exception] = RuntimeError) -> Iterator[Any]:
    """An Accelerator for one run on ``device_kind`` ("cpu"/"cuda") with ``mixed_precision`` ("no"/"bf16"/"fp16").

    accelerate keeps one device/precision state per process: runs in one server process share it, so a run with
    other settings than those in progress raises ``error`` (wait your turn) instead of changing it under them."""
    from accelerate import Accelerator  # lazy: accelerate loads torch
    from accelerate.state import AcceleratorState  # lazy: as Accelerator

    want = (device_kind, mixed_precision)
    with _SLOT_LOCK:
        busy = [k for k, n in _SLOTS.items() if n and k != want]
        if busy:
            raise error(msg("train.another_training_run_server", device=busy[0][0], precision=busy[0][1]))
        distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
        if AcceleratorState._shared_state and not distributed:
            cur = AcceleratorState()
            if cur.device.type != device_kind or cur.mixed_precision != mixed_precision:
                AcceleratorState._reset_state(reset_partial_state=True)  # nothing else is using it (checked above)
        acc = Accelerator(cpu=device_kind == "cpu", mixed_precision=mixed_precision)
        _SLOTS[want] = _SLOTS.get(want, 0) + 1
    try:
        yield acc
    finally:
        with _SLOT_LOCK:
            _SLOTS[want] -= 1


def release(acc, *objects) -> None:
    """Drop references and give cached GPU memory back (Cancel and errors must not pin the GPU)."""
    import torch  # lazy: as in pad

    for m in objects:
        # With mixed precision, accelerate's prepare stores bound methods of the model on the model itself
        # (model.forward wrapped in autocast, model._original_forward): a reference cycle that keeps the model,
        # and its GPU memory, alive until a full garbage collection. The class's forward is the same function.
        for inner in (m, getattr(m, "module", None)):  # DDP wraps the model in .module
            if isinstance(inner, torch.nn.Module):
                inner.__dict__.pop("_original_forward", None)
                inner.__dict__.pop("forward", None)
    acc.free_memory(*objects)
    # free_memory forgets the prepared models, optimizers, schedulers and loaders, but not the objects registered
    # for checkpointing (a scheduler, which holds the optimizer, which holds every parameter and its state).
    acc._custom_objects = []
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------- checkpoints
def has_checkpoint(folder: str | Path) -> bool:
    """Whether ``folder`` holds a checkpoint written by ``save_checkpoint``."""
    return (Path(folder) / STATE_FILE).is_file()


def save_checkpoint(
    acc,
    folder: str | Path,
    rng,
    state: dict,
    tensors: dict[str, dict | None] | None = None,
    arrays: dict[str, np.ndarray | None] | None = None,
) -> None:
    """Write a resumable checkpoint to ``folder``; call it on every process.

    accelerate's ``save_state`` writes the prepared model and optimizer, the objects registered for checkpointing
    (the scheduler) and the process RNG states, drawn inside ``rng.active()`` so they are this run's stream (a
    ``core.train.rng.RunRNG``; its own states, CUDA included, go to run_rng.pt too). ``state`` (JSON: the loop's
    counters and curves) goes to trainer_state.json, each ``tensors[name]`` (a state dict) to name.safetensors,
    each ``arrays[name]`` to name.npy. Written beside the folder and swapped in, so a failure mid-write keeps the
    previous checkpoint (and removes what it wrote). Raises FileExistsError when ``folder`` is a file, and
    core.runtime.disk_full.DiskFullError when the disk is full."""
    import torch  # lazy: as in pad
    from safetensors.torch import save_file  # lazy: safetensors' torch half imports torch

    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(msg("train.cannot_write_checkpoint_file", folder=folder))
    tmp = folder.with_name(folder.name + ".tmp")
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
    acc.wait_for_everyone()
    # a failed write leaves no half-written tmp behind, and a full disk says so (DiskFullError) whichever writer hit it
    with whole_or_nothing(tmp) if acc.is_main_process else nullcontext():
        with rng.active():
            acc.save_state(str(tmp))
        acc.wait_for_everyone()  # every process has written its RNG states before the folder moves
        if acc.is_main_process:
            (tmp / STATE_FILE).write_text(json.dumps(state))
            torch.save(rng.state_dict(), tmp / RUN_RNG_FILE)
            for name, sd in (tensors or {}).items():
                if sd is not None:
                    save_file(
                        {k: v.detach().to("cpu").clone().contiguous() for k, v in sd.items()},
                        str(tmp / f"{name}.safetensors"),
                    )
            for name, arr in (arrays or {}).items():
                if arr is not None:
                    np.save(tmp / f"{name}.npy", arr)
            write_checksums(tmp)  # read_state tells a damaged file from a good one by them
    if acc.is_main_process:
        swap_in(tmp, folder)  # the previous checkpoint stays until this one is whole
    acc.wait_for_everyone()


def read_state(acc, folder: str | Path, error: type[Exception] = RuntimeError) -> dict:
    """The loop's counters a checkpoint holds (trainer_state.json), once every file of ``folder`` matches the
    checksums saved with it (core.runtime.artifacts.damaged_files). A damaged checkpoint raises ``error`` (the
    message names the file and where the folder went): the main process sets it aside as ``<folder>.damaged``, so
    the next run finds no checkpoint and starts over."""
    folder = Path(folder)
    try:
        bad = damaged_files(folder)
        if bad:
            raise ValueError(", ".join(bad))
        state = json.loads((folder / STATE_FILE).read_text())
        if not isinstance(state, dict):
            raise ValueError(f"{STATE_FILE} holds no counters")
        return state
    except read_errors() as e:
        raise _damaged(acc, folder, error, e) from None


def _damaged(acc, folder: Path, error: type[Exception], e: BaseException) -> Exception:
    aside = set_aside(folder) if acc.is_main_process else folder.with_name(folder.name + DAMAGED_SUFFIX)
    return error(msg("train.checkpoint_unreadable", folder=folder, aside=aside, problem=str(e) or type(e).__name__))


def load_checkpoint(
    acc,
    folder: str | Path,
    rng,
    tensors: Sequence[str] = (),
    arrays: Sequence[str] = (),
    error: type[Exception] = RuntimeError,
) -> tuple[dict, dict[str, dict | None], dict[str, np.ndarray | None]]:
    """Restore what ``save_checkpoint`` wrote into the prepared model, optimizer and registered objects, and
    continue ``rng`` from the saved stream (the process generators are left as they were). Returns (state, the
    named tensors, the named arrays), a name missing from the folder as None. Raises FileNotFoundError when
    ``folder`` holds no checkpoint, and ``error`` when it is damaged (``read_state``: it is set aside)."""
    import torch  # lazy: as in pad
    from safetensors.torch import load_file  # lazy: safetensors' torch half imports torch

    folder = Path(folder)
    if not has_checkpoint(folder):
        raise FileNotFoundError(f"{folder} holds no checkpoint.")
    state = read_state(acc, folder, error)
    try:  # a checkpoint written before there were checksums: its files' own checks are all there is
        with rng.active():  # accelerate sets the process generators to the saved states: this run's, while active
            acc.load_state(str(folder))
        if (folder / RUN_RNG_FILE).exists():  # exact, CUDA included (accelerate skips states it cannot set silently)
            rng.load_state_dict(torch.load(folder / RUN_RNG_FILE, weights_only=True))
        named = {
            n: (load_file(str(folder / f"{n}.safetensors")) if (folder / f"{n}.safetensors").exists() else None)
            for n in tensors
        }
        arrs = {n: (np.load(folder / f"{n}.npy") if (folder / f"{n}.npy").exists() else None) for n in arrays}
    except read_errors() as e:
        if is_oom(e):  # not the checkpoint's fault: it stays
            raise
        raise _damaged(acc, folder, error, e) from None
    return state, named, arrs

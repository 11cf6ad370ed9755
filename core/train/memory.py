"""Giving memory back after a training run ends, whichever way it ends (shared by fine-tuning and pretraining).

A raised exception keeps its traceback, and the traceback keeps every frame's local variables: the model, the
optimizer state, the activations of the step that failed. Whoever holds the exception (a job table, a test,
an error page) then pins that memory, on the GPU too. ``drop_frames`` clears those locals and keeps the text.
"""

from __future__ import annotations

import gc
import traceback


def drop_frames(e: BaseException | None) -> None:
    """Clear the locals of the finished frames in ``e``'s traceback and in its causes' (the running frame, which
    raises, must drop its own references first). ``traceback.format_exception(e)`` still prints every line."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        traceback.clear_frames(e.__traceback__)
        e = e.__cause__ or e.__context__


def free_cached_memory() -> None:
    """A full garbage collection first (cycles hold tensors too), then hand torch's cached GPU blocks back."""

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

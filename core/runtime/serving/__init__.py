"""Serving many sessions from one process: concurrent predictions on one model coalesce into batched forwards.

``coalesce(obj, op, item, run_batch)`` is what core's prediction functions call; callers and pages do not change.
The window and the largest batch are settings (``ENCODERLAB_BATCH_WINDOW_MS``, ``ENCODERLAB_MAX_BATCH``; a
largest batch of 1 turns batching off). See core/runtime/serving/batcher.py for the scheme.
"""

from __future__ import annotations

from typing import Any

from core.base import settings
from core.runtime.serving.batcher import Batcher, BatchStats, RunBatch, batcher

__all__ = ["BatchStats", "Batcher", "batcher", "coalesce", "pinned", "stats"]


def coalesce(obj: Any, op: str, item: Any, run_batch: RunBatch) -> Any:
    """``run_batch([item])[0]``, batched with concurrent calls on the same ``obj`` (a loaded model) and ``op``. The
    batches of a model on the CPU run on the process's one compute thread (batcher.py says why)."""
    s = settings.current()
    return batcher().call(obj, op, item, run_batch, s.batch_window_ms / 1000.0, s.max_batch, pinned=pinned(obj))


def pinned(obj: Any) -> bool:
    """Whether ``obj``'s batches run on the process's one compute thread: a model on the CPU (batcher.py says why)."""
    return str(getattr(obj, "device", "cpu")).startswith("cpu")


def stats(obj: Any, op: str) -> BatchStats:
    """Calls, batches, the largest batch, and the batches whose leader waited (and ran out its window) so far for
    ``obj`` and ``op`` (tests and the benchmark)."""
    return batcher().stats(obj, op)

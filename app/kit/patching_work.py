"""The Patching tab's work, done once per model and inputs in this process.

Every follower in a workshop room opens the presenter's patching link, and a hosted demo's visitors press Patch on
the same example: each session still gets its own job (progress, Cancel, its place in the queue), but the job asks
``patch_once``, which computes a (model, config) pair once and hands the result to every later or concurrent ask.
A second ask of the same pair waits for the first (its lock), then reads the kept result. Streamlit's caches do not
serve here: the work runs in a job's thread, outside any script run, and must report progress and stop on Cancel.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from core.base.messages import msg
from core.inspect.patching import PatchConfig, PatchResult, patch
from core.models.spec import LoadedModel

KEEP = 16  # results kept (a few rooms' and the examples' worth; each holds a few grids of floats)
_LOCK = threading.Lock()
_RESULTS: OrderedDict[tuple[Any, PatchConfig], PatchResult] = OrderedDict()
_RUNNING: dict[tuple[Any, PatchConfig], threading.Lock] = {}


def patch_once(lm: LoadedModel, cfg: PatchConfig, progress: Callable[..., None]) -> PatchResult:
    """core.inspect.patching.patch of ``cfg`` on ``lm``, or the result an earlier ask of the same model and config
    left (waiting for it while it runs). A cancelled or failed run leaves nothing: the next ask computes."""
    key = (lm.spec, cfg)
    with _LOCK:
        running = _RUNNING.setdefault(key, threading.Lock())
    while not running.acquire(timeout=0.5):  # another session computes this pair: wait, and stop on Cancel
        progress(0.0, msg("progress.patching.waiting"))
    try:
        with _LOCK:
            kept = _RESULTS.get(key)
            if kept is not None:
                _RESULTS.move_to_end(key)
        if kept is not None:
            progress(1.0, msg("progress.patching.shared"))
            return kept
        try:
            res = patch(lm, cfg, progress=progress)
        except BaseException:
            with _LOCK:
                _RUNNING.pop(key, None)
            raise
        with _LOCK:  # kept before the lock is dropped: a newcomer finds the result, never an empty place
            _RESULTS[key] = res
            while len(_RESULTS) > KEEP:
                _RESULTS.popitem(last=False)
            _RUNNING.pop(key, None)
        return res
    finally:
        running.release()


def forget_all() -> None:
    """Drop every kept result (tests)."""
    with _LOCK:
        _RESULTS.clear()

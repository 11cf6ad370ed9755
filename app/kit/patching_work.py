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


class _Entry:
    """One pair's lock and how many asks are waiting for it or running it (the entry goes with the last)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


_LOCK = threading.Lock()
_RESULTS: OrderedDict[tuple[Any, PatchConfig], PatchResult] = OrderedDict()
_RUNNING: dict[tuple[Any, PatchConfig], _Entry] = {}


def patch_once(lm: LoadedModel, cfg: PatchConfig, progress: Callable[..., None]) -> PatchResult:
    """core.inspect.patching.patch of ``cfg`` on ``lm``, or the result an earlier ask of the same model and config
    left (waiting for it while it runs). A cancelled or failed run leaves nothing: the ask waiting next computes,
    and asks arriving meanwhile wait for it (the entry stays while anyone uses it)."""
    key = (lm.spec, cfg)
    with _LOCK:
        entry = _RUNNING.setdefault(key, _Entry())
        entry.users += 1
    try:
        while not entry.lock.acquire(timeout=0.5):  # another session computes this pair: wait, stop on Cancel
            progress(0.0, msg("progress.patching.waiting"))
        try:
            with _LOCK:
                kept = _RESULTS.get(key)
                if kept is not None:
                    _RESULTS.move_to_end(key)
            if kept is not None:
                progress(1.0, msg("progress.patching.shared"))
                return kept
            res = patch(lm, cfg, progress=progress)
            with _LOCK:
                _RESULTS[key] = res
                while len(_RESULTS) > KEEP:
                    _RESULTS.popitem(last=False)
            return res
        finally:
            entry.lock.release()
    finally:
        with _LOCK:
            entry.users -= 1
            if entry.users == 0 and _RUNNING.get(key) is entry:
                del _RUNNING[key]


def forget_all() -> None:
    """Drop every kept result (tests)."""
    with _LOCK:
        _RESULTS.clear()


def running_entries() -> int:
    """Pairs with an ask waiting or running (tests: none once every ask has returned)."""
    with _LOCK:
        return len(_RUNNING)

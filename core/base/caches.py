"""One switch for every cache core keeps per process: ``reset_caches()``.

A module that keeps a process-level cache (an ``lru_cache``, an LRU dict of loaded indexes, a per-model weak table)
registers the function that empties it here, once, when it is imported: ``register(__name__, clear)``. This module
sits in the lowest layer and imports nothing from core, so any layer can register with it; a module that is never
imported has nothing cached and nothing registered. ``reset_caches()`` then empties them all, so the next call
computes or reads from disk as a fresh process would (tests; a server that must drop what it remembered).

What is not a cache is not registered: the installed hooks' bookkeeping, the chosen backend, the job table, runs in
progress, and lazily built classes (an object made before a reset must stay an instance of its class).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_LOCK = threading.Lock()
_CLEARS: dict[str, Callable[[], None]] = {}  # owner (a module name, or module:cache) -> its clear; one per owner


def register(owner: str, clear: Callable[[], None]) -> Callable[[], None]:
    """Have ``reset_caches()`` call ``clear`` (it empties ``owner``'s cache). Registering an owner again replaces
    its clear (a reloaded module), so the table is bounded by the modules that keep a cache. Returns ``clear``."""
    with _LOCK:
        _CLEARS[owner] = clear
    return clear


def unregister(owner: str) -> None:
    """Forget ``owner``'s clear (a test's own registration); nothing happens for an owner never registered."""
    with _LOCK:
        _CLEARS.pop(owner, None)


def registered() -> tuple[str, ...]:
    """The owners whose caches ``reset_caches()`` empties, in registration order."""
    with _LOCK:
        return tuple(_CLEARS)


def reset_caches() -> tuple[str, ...]:
    """Empty every process-level cache core keeps (of the modules imported so far). Returns the owners cleared."""
    with _LOCK:
        clears = list(_CLEARS.items())
    for _, clear in clears:
        clear()
    return tuple(owner for owner, _ in clears)

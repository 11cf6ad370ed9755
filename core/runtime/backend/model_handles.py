"""The Ray backend's table of model deployments (core.runtime.backend.ray_backend), kept apart from Ray so that its
bounds can be checked without a cluster: at most ``limit`` handles, the least recently used evicted first, and one
deploy at a time per model. A model's deploy lock lives only while someone deploys it or waits to, so no lock
outlives its handle and the lock table never grows past the deploys in flight.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class ModelHandles:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._handles: OrderedDict[str, Any] = OrderedDict()  # application name -> handle, oldest first
        self.recipes: dict[str, tuple] = {}  # application name -> recipe, for the handles above
        self._deploying: dict[str, list] = {}  # application name -> [its deploy lock, callers holding or awaiting it]

    def __contains__(self, name: str) -> bool:
        return name in self._handles

    def __len__(self) -> int:
        return len(self._handles)

    def get(self, name: str) -> Any | None:
        """The handle of ``name`` (now the most recently used), or None."""
        with self._lock:
            if name not in self._handles:
                return None
            self._handles.move_to_end(name)
            return self._handles[name]

    @contextmanager
    def deploying(self, name: str) -> Iterator[None]:
        """Hold ``name``'s deploy lock: one deployment per model even when several sessions ask at once. The lock
        is dropped when its last caller leaves."""
        with self._lock:
            entry = self._deploying.setdefault(name, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._lock:
                entry[1] -= 1
                if entry[1] == 0 and self._deploying.get(name) is entry:
                    del self._deploying[name]

    def put(self, name: str, handle: Any, recipe: tuple) -> list[str]:
        """Keep ``handle``; returns the names evicted to stay within ``limit`` (their applications are the caller's
        to delete)."""
        with self._lock:
            self._handles[name], self.recipes[name] = handle, recipe
            self._handles.move_to_end(name)
            gone = []
            while len(self._handles) > self.limit:
                old, _ = self._handles.popitem(last=False)
                self.recipes.pop(old, None)
                gone.append(old)
            return gone

    def forget(self, name: str) -> None:
        """Drop ``name``'s handle (its application was deleted elsewhere): the next call deploys again."""
        with self._lock:
            self._handles.pop(name, None)
            self.recipes.pop(name, None)

    def deploy_locks(self) -> list[str]:
        """Names whose deploy lock exists now (tests: it must not outlive the deploys)."""
        with self._lock:
            return list(self._deploying)

"""The in-process backend: everything here, models in this process's caches, jobs in its worker processes, rooms
in its memory (the default, and what a Ray replica or job actor runs inside)."""

from __future__ import annotations

import threading

from core.runtime.backend.base import Backend
from core.runtime.jobs import JobRunner
from core.runtime.room_store import InProcessStore
from core.runtime.serving import coalesce


class InProcessBackend(Backend):
    """Everything here: models in this process's caches, jobs in its worker processes, rooms in its memory."""

    name = "inprocess"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runner = None
        self._store = None

    def batched(self, obj, op, fn, item):
        return coalesce(obj, op, item, lambda items: fn(obj, items))

    def call(self, obj, fn, args, kwargs, progress=None):
        if progress is not None:
            kwargs = {**kwargs, "progress": progress}
        return fn(obj, *args, **kwargs)

    def job_runner(self):
        with self._lock:
            if self._runner is None:
                self._runner = JobRunner()
            return self._runner

    def room_store(self):
        with self._lock:
            if self._store is None:
                self._store = InProcessStore()
            return self._store

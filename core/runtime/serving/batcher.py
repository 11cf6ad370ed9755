"""Coalesce concurrent calls on one loaded model into batched forwards.

Streamlit runs each session's script in its own thread, so when a room presses Predict together, many threads
call ``fill_mask`` (or pair scoring, or a classifier) on the same cached model at the same moment. Run one after
another they queue behind each other; run as one batch the hardware does several requests' work in about the
time of one (most of a small forward is fixed per-call cost, and on a GPU one sentence uses a sliver of it).

The scheme is leader/follower, so there is no long-lived thread per model to keep or to leak: the first caller
that finds no batch running for its key becomes the leader, waits up to the window for companions (only when
other threads called lately: a lone caller never waits, even when it calls again and again), takes at most
``max_batch`` requests, runs them as one batch and hands every caller its own result. The wait ends early once
every thread that called lately is in the batch, so a room that presses Predict together is not held for the
whole window. If requests arrived meanwhile, leadership passes to the oldest of
them, so no caller ever computes for longer than its own batch.

``run_batch(items) -> results`` must return one result per item in order. When it raises, each item is run alone
so that one bad input fails only its own caller, with its own message.

A batch of a model on the CPU runs on one long-lived thread of the process (``compute_thread``), whoever leads it.
torch's CPU kernels use OpenMP (libgomp), which keeps a team of worker threads per calling thread; with leadership
passing from session thread to session thread, each leader brought its own team, and the teams of the leaders before
kept spin-waiting on the 2 cores the forward needed. Measured with bench/concurrency.py's setting (bert-mini, 2 torch
threads, 8 callers): a batch of 8 took 27 ms against 22 ms called alone, and 8 callers reached 284 requests/s; on the
one thread 335/s, 0.90x one batched call of their texts run there (32 callers: 0.97x; docs/benchmarks.md). The thread runs the batch in the leader's
context (contextvars), so what the batch reads from it is what it read before.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

RunBatch = Callable[[Sequence[Any]], Sequence[Any]]
# A call is "concurrent" when another thread called on the same key less than this long ago: only then does the
# leader spend its window waiting for companions, and only until every such thread has a request in.
RECENT_S = 0.25


@dataclass
class _Request:
    item: Any
    arrived: float = field(default_factory=time.perf_counter)
    wake: threading.Event = field(default_factory=threading.Event)
    lead: bool = False  # set when this waiting caller is promoted to leader
    done: bool = False
    result: Any = None
    error: BaseException | None = None
    batch: int = 0  # how many requests ran in the forward that served this one


@dataclass
class BatchStats:
    calls: int = 0
    batches: int = 0
    largest: int = 0
    fallbacks: int = 0  # batches that raised and were rerun one item at a time
    waits: int = 0  # batches whose leader waited for companions (a lone caller's never do)
    timeouts: int = 0  # of those, batches that ran because the window ran out, not because every expected caller came


class _Queue:
    """The pending requests of one (object, operation) key."""

    def __init__(self) -> None:
        self.pending: list[_Request] = []
        self.busy = False  # a leader is collecting or running a batch
        self.callers: dict[int, float] = {}  # thread ident -> its last arrival (pruned to RECENT_S, so bounded)
        self.stats = BatchStats()

    def arrive(self, when: float) -> bool:
        """Record this thread's call; True when another thread called lately or a batch is under way."""
        me = threading.get_ident()
        self.callers = {t: a for t, a in self.callers.items() if when - a < RECENT_S and t != me}
        others = bool(self.callers)
        self.callers[me] = when
        return others or self.busy

    def expected(self) -> int:
        """How many requests a collecting leader may still expect: the threads that called lately."""
        return len(self.callers)


class Batcher:
    """One per process (``batcher()``); keys are (id(obj), op) and vanish when the object is garbage-collected."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queues: dict[tuple[int, str], _Queue] = {}

    def call(
        self, obj: Any, op: str, item: Any, run_batch: RunBatch, window_s: float, max_batch: int, pinned: bool = False
    ) -> Any:
        """Run ``item`` through ``run_batch`` together with concurrent calls on the same ``obj`` and ``op``;
        ``pinned``: each batch runs on the process's one compute thread (``compute_thread``: a model on the CPU)."""
        if max_batch <= 1:
            return run_batch([item])[0]
        key = (id(obj), op)
        req = _Request(item)
        with self._lock:
            q = self._queues.get(key)
            if q is None:
                q = self._queues[key] = _Queue()
                # the key dies with the model (an evicted cache entry), so the table stays bounded
                weakref.finalize(obj, self._forget, key)
            concurrent = q.arrive(req.arrived)
            q.stats.calls += 1
            q.pending.append(req)
            if not q.busy:
                q.busy = req.lead = True
            else:
                self._cond.notify_all()  # a collecting leader may now have a full batch
        while not req.lead:
            req.wake.wait()
            req.wake.clear()
            if req.done:
                return self._outcome(req)
        self._lead(
            q, req, pinned_to_compute(run_batch) if pinned else run_batch, window_s if concurrent else 0.0, max_batch
        )
        return self._outcome(req)

    def stats(self, obj: Any, op: str) -> BatchStats:
        with self._lock:
            q = self._queues.get((id(obj), op))
            return BatchStats(**vars(q.stats)) if q else BatchStats()

    # ------------------------------------------------------------------------------------------------ internals
    def _forget(self, key: tuple[int, str]) -> None:
        with self._lock:
            self._queues.pop(key, None)

    def _lead(self, q: _Queue, me: _Request, run_batch: RunBatch, window_s: float, max_batch: int) -> None:
        with self._lock:
            deadline = q.pending[0].arrived + window_s  # the oldest waiter bounds the wait
            waited = timed_out = False
            while len(q.pending) < min(max_batch, max(1, q.expected())):
                left = deadline - time.perf_counter()
                if left <= 0:
                    timed_out = waited
                    break
                waited = True
                self._cond.wait(left)
            batch = q.pending[:max_batch]
            del q.pending[:max_batch]
            if me not in batch:  # cannot happen (the leader is the oldest), but never drop the leader's own call
                batch[-1:] = [me]
            q.stats.batches += 1
            q.stats.largest = max(q.stats.largest, len(batch))
            q.stats.waits += waited
            q.stats.timeouts += timed_out
        try:
            results = list(run_batch([r.item for r in batch]))
            if len(results) != len(batch):
                raise RuntimeError(f"batch function returned {len(results)} results for {len(batch)} items")
            for r, res in zip(batch, results):
                r.result, r.batch = res, len(batch)
        except Exception:
            # one bad input must fail only its own caller: rerun each alone for its own result or message
            with self._lock:
                q.stats.fallbacks += 1
            for r in batch:
                try:
                    r.result, r.batch = run_batch([r.item])[0], 1
                except Exception as e:
                    r.error = e
        finally:
            with self._lock:
                for r in batch:
                    r.done = True
                if q.pending:  # the oldest waiting caller leads the next batch
                    nxt = q.pending[0]
                    nxt.lead = True
                    nxt.wake.set()
                else:
                    q.busy = False
            for r in batch:
                if r is not me:
                    r.wake.set()

    @staticmethod
    def _outcome(req: _Request) -> Any:
        if req.error is not None:
            raise req.error
        return req.result


_BATCHER = Batcher()
_COMPUTE: list[ThreadPoolExecutor] = []  # the compute thread's executor, made on first use
_COMPUTE_IDENT: list[int] = []  # the compute thread's ident, once it has run something
_COMPUTE_LOCK = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    with _COMPUTE_LOCK:
        if not _COMPUTE:
            _COMPUTE.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="encoderlab-compute"))
        return _COMPUTE[0]


def _after_fork() -> None:
    """A forked child has no compute thread (only the thread that forked survives): it makes its own on first use."""
    global _COMPUTE_LOCK
    _COMPUTE_LOCK = threading.Lock()
    _COMPUTE.clear()
    _COMPUTE_IDENT.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _mark_and_run(fn: Callable[[], Any]) -> Any:
    if not _COMPUTE_IDENT:
        _COMPUTE_IDENT.append(threading.get_ident())
    return fn()


def compute_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` on the process's one compute thread, in the caller's context; inline when already on it (a batch
    function that calls another batched op)."""
    if _COMPUTE_IDENT and threading.get_ident() == _COMPUTE_IDENT[0]:
        return fn()
    ctx = contextvars.copy_context()
    return _executor().submit(_mark_and_run, lambda: ctx.run(fn)).result()


def pinned_to_compute(run_batch: RunBatch) -> RunBatch:
    """``run_batch`` run on the compute thread (see the module docstring)."""
    return lambda items: compute_thread(lambda: run_batch(items))


def batcher() -> Batcher:
    """The process-wide batcher (every Streamlit session's thread shares it)."""
    return _BATCHER

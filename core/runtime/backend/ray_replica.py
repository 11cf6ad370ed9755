"""The model tier on Ray: one Serve deployment per loaded model, its replicas holding the model.

A replica loads the model from its recipe (core.runtime.backend.base.load_recipe: the same ``core.models.loading.load`` or
``core.predict.classify.load_finetuned`` call the front-end made) and serves three kinds of request:

- ``batched(op, fn, item)``: a batchable prediction (fill-mask, pair scoring, classification). Serve's own
  ``@serve.batch`` collects concurrent requests (its window and largest batch are ENCODERLAB_BATCH_WINDOW_MS and
  ENCODERLAB_MAX_BATCH, as in-process); each op's requests run as one ``fn(model, items)``, and when a batch
  raises, each item is run alone so one bad input fails only its own caller.
- ``call(fn, args, kwargs)``: any other @model_op (attention, a pair batch, attributions), one at a time.
- ``stream(fn, args, kwargs)``: an op with a ``progress`` callback: progress calls are yielded as they happen and
  the result last; when the caller stops reading (Cancel), the op's next progress call raises and it stops.

Outcomes travel as ``("ok", value)`` or ``("err", exception)`` so the front-end raises the op's own exception
(FillMaskError, PairError, ValueError ...) with its own message, never a Ray wrapper around it.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import Sequence
from typing import Any

import ray
from ray import serve

from core.runtime.backend.base import load_recipe, outcome_error, resolve_op, use
from core.runtime.backend.inprocess import InProcessBackend
from core.runtime.serving import coalesce


class _Stopped(Exception):
    """Raised inside a streamed op once its caller has gone (Cancel)."""


def _run_group(model: Any, fn_name: str, items: list) -> list[tuple[str, Any]]:
    fn = resolve_op(fn_name)
    try:
        results = list(fn(model, items))
        if len(results) != len(items):
            raise RuntimeError(f"{fn_name} returned {len(results)} results for {len(items)} items")
        return [("ok", r) for r in results]
    except Exception:
        out = []
        for it in items:  # one bad input fails only its own caller, with its own message
            try:
                out.append(("ok", fn(model, [it])[0]))
            except Exception as e:  # noqa: BLE001 - the caller gets its own exception back
                out.append(("err", outcome_error(e)))
        return out


@serve.deployment(name="model")
class ModelReplica:
    def __init__(self, recipe: tuple, threads: int, max_batch: int, window_s: float) -> None:
        import torch  # lazy: torch loads ~1 GB, in the replica only

        use(InProcessBackend())  # the ops run here, never sent on to Ray again
        if threads > 0:
            torch.set_num_threads(threads)
        self.recipe = recipe
        self.model = load_recipe(recipe)
        self._batch.set_max_batch_size(max_batch)
        self._batch.set_batch_wait_timeout_s(window_s)

    def where(self) -> dict:
        import torch  # lazy: torch loads ~1 GB, in the replica only

        return {
            "node": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "threads": torch.get_num_threads(),
            "device": str(getattr(self.model, "device", "?")),
        }

    # Serve's batching collects the requests that arrive within the window; several such batches may run at once
    # (max_concurrent_batches), and core.runtime.serving's batcher then merges the ones that meet on this replica into one
    # forward. Alone, @serve.batch batched poorly under load: Ray 2.60 cuts a batch when its window closes even while
    # the previous one still runs (ray/serve/batching.py, _process_batches), so a backlog was served 1.1-1.9 requests
    # per forward where the same 16 callers in-process got 14 (bench/scaleout.py).
    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.005, max_concurrent_batches=8)
    async def _batch(self, requests: list[tuple[str, str, Any]]) -> list[tuple[str, Any]]:
        groups: dict[tuple[str, str], list[int]] = {}
        for i, (op, fn_name, _) in enumerate(requests):
            groups.setdefault((op, fn_name), []).append(i)
        out: list[Any] = [None] * len(requests)
        for (op, fn_name), idx in groups.items():
            # off the event loop: Serve keeps collecting the next batch meanwhile
            res = await asyncio.to_thread(self._merged, op, fn_name, [requests[i][2] for i in idx])
            for i, r in zip(idx, res):
                out[i] = r
        return out

    def _merged(self, op: str, fn_name: str, items: list) -> list[tuple[str, Any]]:
        """One Serve batch's items of one op, run together with the other Serve batches meeting here meanwhile."""

        def run(groups: Sequence[list[Any]]) -> list[list[tuple[str, Any]]]:
            flat = _run_group(self.model, fn_name, [x for g in groups for x in g])
            out, i = [], 0
            for g in groups:
                out.append(flat[i : i + len(g)])
                i += len(g)
            return out

        return coalesce(self.model, op, items, run)

    async def batched(self, op: str, fn_name: str, item: Any) -> tuple[str, Any]:
        return await self._batch((op, fn_name, item))

    async def call(self, fn_name: str, args: tuple, kwargs: dict) -> tuple[str, Any]:
        def run():
            try:
                return "ok", resolve_op(fn_name)(self.model, *args, **kwargs)
            except Exception as e:  # noqa: BLE001 - the caller gets its own exception back
                return "err", outcome_error(e)

        return await asyncio.to_thread(run)

    async def stream(self, fn_name: str, args: tuple, kwargs: dict):
        q: queue.Queue = queue.Queue()
        stop = threading.Event()

        def progress(*a, **kw):
            if stop.is_set():
                raise _Stopped()
            q.put(("progress", a, kw))

        def run():
            try:
                q.put(("ok", resolve_op(fn_name)(self.model, *args, progress=progress, **kwargs)))
            except _Stopped:
                q.put(("stopped", None))
            except Exception as e:  # noqa: BLE001 - the caller gets its own exception back
                q.put(("err", outcome_error(e)))

        th = threading.Thread(target=run, daemon=True, name=f"stream {fn_name}")
        th.start()
        try:
            while True:
                msg = await asyncio.to_thread(q.get)
                if msg[0] == "progress":
                    yield msg
                    continue
                yield msg
                return
        finally:
            stop.set()  # the caller cancelled (or read the end): the op stops at its next progress call

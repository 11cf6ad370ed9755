"""Module-level job functions the Ray tests submit (a Ray worker imports them from this checkout)."""

from __future__ import annotations

import os
import time


def ticking(seconds: float, ctx) -> dict:
    """Report progress every 50 ms for ``seconds``; return where it ran."""
    t0 = time.monotonic()
    while (left := seconds - (time.monotonic() - t0)) > 0:
        ctx.progress(1.0 - left / seconds, f"{left:.1f} s left", tick=time.monotonic() - t0)
        time.sleep(0.05)
    import ray

    return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id()}

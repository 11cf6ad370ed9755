"""Download the official checkpoints (safetensors and tokenizer files only) into the HF cache.

Used at Docker build time: ``python -m core.models.fetch_weights [ids...]``. Needs network; prints what it got.
"""

from __future__ import annotations

import sys

from core.registry import official_checkpoints

ALLOW = ["*.safetensors", "*.json", "*.txt", "*.model", "merges.txt", "vocab.*"]


def fetch(ids: list[str]) -> list[str]:
    """snapshot_download each id (weights as safetensors only); returns the local folders."""
    from huggingface_hub import snapshot_download

    out = []
    for i in ids:
        path = snapshot_download(i, allow_patterns=ALLOW)
        print(f"{i}: {path}", flush=True)
        out.append(path)
    return out


if __name__ == "__main__":
    fetch(sys.argv[1:] or [c.id for c in official_checkpoints()])

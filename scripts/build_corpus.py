"""Regenerate assets/corpus/ from offline Debian text (wordnet-base, python3-doc, bible-kjv-text).

    python scripts/build_corpus.py [--out assets/corpus]

Needs those Debian packages installed (apt-get install wordnet-base python3-doc bible-kjv bible-kjv-text).
The committed corpus is what tests and `make models` read; this script is how it was made.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.data.corpus import CORPUS_DIR  # noqa: E402
from core.data.corpus_build import build_corpus


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(CORPUS_DIR))
    args = ap.parse_args()
    manifest = build_corpus(args.out)
    print(json.dumps({k: manifest[k] for k in ("train", "heldout", "sources")}, indent=2))


if __name__ == "__main__":
    main()

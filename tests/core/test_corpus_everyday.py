"""The everyday part of the corpus (#16): how novels, fortunes and sentences are cut, the committed files' layout,
and that the first three sources' files did not change when the everyday ones were added."""

from __future__ import annotations

import hashlib
import json

import pytest

from core.data.corpus import (
    CORPUS_DIR,
    EVERYDAY_HELDOUT_FILE,
    EVERYDAY_TRAIN_FILE,
    HELDOUT_FILE,
    TRAIN_FILE,
    CorpusError,
    held_out,
    interleave,
    load_documents,
    load_training_documents,
)
from core.data.everyday import SENTENCES_PER_DOC, fortune_documents, novel_documents, sentences

# The SHA-256 of train.txt and heldout.txt before the everyday sources were added (commit 32b5d74's manifest):
# the earlier models were trained and scored on exactly these files, so "held-out must not fall" compares like
# with like.
FIRST_THREE = {
    TRAIN_FILE: "7053cd8ef62617d68c5e53ff7c57ffce4232991f82638ef767ecc7140b0454d6",
    HELDOUT_FILE: "6750ae987bb8852b4965930e338edfc9a54eacdb09201e2c5f5e0bb56e02c521",
}


def test_sentences_are_not_cut_after_a_title():
    assert sentences('"Good day, Pip," said Mr. Pumblechook. Mrs. Joe was out. It was St. Paul\'s day. He left.') == [
        '"Good day, Pip," said Mr. Pumblechook.',
        "Mrs. Joe was out.",
        "It was St. Paul's day.",
        "He left.",
    ]


def test_a_novel_becomes_documents_of_consecutive_sentences():
    lines = ["CHAPTER I", ""]
    for k in range(30):
        lines += [f"Sentence number {k} of the first chapter is here. And another one follows {k}.", ""]
    lines += ["CHAPTER II", "", "The second chapter starts anew. It has two sentences.", ""]
    docs = novel_documents("novel:test", lines)
    assert [i for i, _ in docs] == ["novel:test:0", "novel:test:1", "novel:test:2", "novel:test:3"]
    assert all(len(d) <= SENTENCES_PER_DOC + 1 for _, d in docs)
    assert docs[0][1][:2] == ["Sentence number 0 of the first chapter is here.", "And another one follows 0."]
    assert docs[-1][1] == ["The second chapter starts anew.", "It has two sentences."]  # a heading cuts
    assert not any("CHAPTER" in s for _, d in docs for s in d)


def test_fortunes_drop_attributions_art_and_skipped_files(tmp_path):
    (tmp_path / "fortunes").write_text(
        "A clean desk is a sign of a cluttered drawer. Think about it.\n\t\t-- Anonymous\n%\n"
        "  ___  /\\_/\\  |||| ==== ////\n  (o.o)  >^<  ___ ---- ####\n%\n"
        "Never trust a man who has only one way to spell a word.\n",
        encoding="latin-1",
    )
    (tmp_path / "fortunes.dat").write_bytes(b"\x00\x01binary index")
    (tmp_path / "perl").write_text("my $x = shift; print $x for the people;\n")
    docs = fortune_documents(tmp_path)
    assert [i for i, _ in docs] == ["fortunes:fortunes:0", "fortunes:fortunes:2"]
    assert docs[0][1] == ["A clean desk is a sign of a cluttered drawer.", "Think about it."]


def test_fortunes_missing_say_which_package(tmp_path):
    with pytest.raises(CorpusError, match="apt-get install fortunes"):
        fortune_documents(tmp_path)


def test_the_committed_corpus_files():
    manifest = json.loads((CORPUS_DIR / "manifest.json").read_text())
    files = (TRAIN_FILE, HELDOUT_FILE, EVERYDAY_TRAIN_FILE, EVERYDAY_HELDOUT_FILE)
    for name in files:
        assert hashlib.sha256((CORPUS_DIR / name).read_bytes()).hexdigest() == manifest["sha256"][name], name
    for name, sha in FIRST_THREE.items():  # the first three sources' files are those the earlier zoo used
        assert manifest["sha256"][name] == sha, name
    groups = {s["file"] for s in manifest["sources"].values()}
    assert groups == {TRAIN_FILE, EVERYDAY_TRAIN_FILE}
    words = sum(manifest["files"][f]["words"] for f in (TRAIN_FILE, EVERYDAY_TRAIN_FILE))
    assert words > 3_000_000 and manifest["files"][EVERYDAY_TRAIN_FILE]["words"] > 4 * manifest["train"]["words"]


def test_no_held_out_sentence_is_trained_on_by_the_everyday_part():
    """No sentence of heldout_everyday.txt is in either training file, and the everyday training file has none of
    heldout.txt's. (train.txt and heldout.txt themselves, unchanged from the first zoo, share a few repeated KJV
    verses: the Bible repeats itself.)"""
    held_e = {s for d in load_documents(CORPUS_DIR / EVERYDAY_HELDOUT_FILE) for s in d}
    held_b = {s for d in load_documents(CORPUS_DIR / HELDOUT_FILE) for s in d}
    train_e = {s for d in load_documents(CORPUS_DIR / EVERYDAY_TRAIN_FILE) for s in d}
    train_b = {s for d in load_documents(CORPUS_DIR / TRAIN_FILE) for s in d}
    assert not held_e & (train_e | train_b), sorted(held_e & (train_e | train_b))[:5]
    assert not held_b & train_e, sorted(held_b & train_e)[:5]


def test_two_training_files_read_in_one_fixed_order(tmp_path):
    (tmp_path / "a.txt").write_text("one a.\ntwo a.\n\nthree a.\nfour a.\n")
    (tmp_path / "b.txt").write_text("one b.\ntwo b.\n")
    docs = load_training_documents(tmp_path, ("a.txt", "b.txt"))
    assert sorted(map(tuple, docs)) == sorted([("one a.", "two a."), ("three a.", "four a."), ("one b.", "two b.")])
    assert docs == interleave(docs) == load_training_documents(tmp_path, ("b.txt", "a.txt"))
    assert load_training_documents(tmp_path, ("a.txt",)) == load_documents(tmp_path / "a.txt")


def test_held_out_is_by_document_id():
    assert held_out("kjv:Genesis 1") == held_out("kjv:Genesis 1")
    share = sum(held_out(f"fortunes:food:{i}") for i in range(4000)) / 4000
    assert 0.03 < share < 0.07

"""core/data/token_data: label alignment on every family's real tokenizer (the bundled minis; a tiny model's tokenizer for a
family with no mini), CoNLL/JSONL
parsing of good and bad files, the bundled sample, and seqeval metrics."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from core.base.paths import ASSETS
from core.data.datasets_local import DataError
from core.data.token_data import (
    IGNORE,
    align_batch,
    align_labels,
    load_bundled_tokens,
    parse_conll,
    piece_table,
    read_tokens,
    token_metrics,
    words_tokenizer,
)

WORDS = ["Anneliese", "Kowalczyk", "visited", "Reykjavik", "yesterday", "."]
TAGS = ["B-PER", "I-PER", "O", "B-LOC", "B-DATE", "O"]
LABEL2ID = {t: i for i, t in enumerate(["O", "B-DATE", "B-LOC", "B-PER", "I-PER"])}


@pytest.fixture(scope="module")
def tokenizers(tiny_models):
    from core.registry import FAMILIES

    class ByFamily(dict):
        def __missing__(self, fam):
            folder = ASSETS / "models" / FAMILIES[fam].bundled if FAMILIES[fam].bundled else tiny_models[fam]
            self[fam] = AutoTokenizer.from_pretrained(folder)
            return self[fam]

    return ByFamily()


def test_first_piece_carries_the_tag_and_the_rest_are_ignored(family, tokenizers):
    tok = words_tokenizer(tokenizers[family])
    r = align_labels(tok, WORDS, TAGS, LABEL2ID, max_length=64)
    word_ids, labels = r["word_ids"], r["labels"]
    assert len(word_ids) == len(labels) == len(r["input_ids"])
    multi = 0
    for w, tag in enumerate(TAGS):
        pos = [p for p, x in enumerate(word_ids) if x == w]
        assert pos, f"word {WORDS[w]!r} got no piece"
        assert labels[pos[0]] == LABEL2ID[tag]
        assert all(labels[p] == IGNORE for p in pos[1:])
        multi += len(pos) > 1
    assert multi >= 2, "the test words must split into several pieces"  # Anneliese, Kowalczyk, Reykjavik, ...
    assert all(labels[p] == IGNORE for p, x in enumerate(word_ids) if x is None)  # [CLS]/<s>, [SEP]/</s>
    assert sum(y != IGNORE for y in labels) == len(WORDS) == r["n_words"]


def test_pre_split_words_get_the_pieces_of_running_text(family, tokenizers):
    """Without RoBERTa's prefix space a pre-split word would lose its "Ġ" and get other pieces than in running
    text; words_tokenizer restores it (and leaves the shared tokenizer as it was)."""
    raw = tokenizers[family]
    tok = words_tokenizer(raw)
    split = piece_table(tok, WORDS)
    enc = raw(" ".join(WORDS))
    pieces = raw.convert_ids_to_tokens(enc["input_ids"])
    running = {}
    for p, w in zip(pieces, enc.word_ids()):
        if w is not None:
            running.setdefault(w, []).append(p)
    for i in range(1, len(WORDS)):  # every word after the first follows a space in running text
        assert tuple(running[i]) == split[i]["pieces"], (family, WORDS[i], running[i], split[i]["pieces"])
    if family == "roberta":
        assert tok is not raw and split[2]["labelled"].startswith("Ġ")
        with pytest.raises(AssertionError):  # the raw tokenizer glues pre-split words: what the fix is for
            assert raw.convert_ids_to_tokens(raw(["visited"], is_split_into_words=True)["input_ids"])[1].startswith("Ġ")
        assert raw.backend_tokenizer.pre_tokenizer.add_prefix_space is False  # the cached one is untouched


def test_truncation_drops_the_words_that_do_not_fit(tokenizers):
    tok = words_tokenizer(tokenizers["bert"])
    r = align_batch(tok, [WORDS * 10], [TAGS * 10], LABEL2ID, max_length=16)[0]
    assert len(r["input_ids"]) == 16 and r["n_words"] < 60
    assert sum(y != IGNORE for y in r["labels"]) == r["n_words"]


# ---------------------------------------------------------------------------------------------- CoNLL / JSONL
GOOD = b"-DOCSTART- -X- O O\n\nAda B-PER\nLovelace I-PER\nlived O\nin O\nLondon B-LOC\n\nBob B-PER\nsleeps O\n"


def test_good_conll_without_a_final_blank_line():
    sents, notes = parse_conll(GOOD, "a.conll")
    assert sents == [
        (("Ada", "Lovelace", "lived", "in", "London"), ("B-PER", "I-PER", "O", "O", "B-LOC")),
        (("Bob", "sleeps"), ("B-PER", "O")),
    ]
    assert notes == []
    # CoNLL-2003's four columns (tag last), CRLF line ends and tabs all read the same
    four = b"Ada NNP B-NP B-PER\r\nsleeps VBZ B-VP O\r\n\r\n"
    assert parse_conll(four, "b.conll")[0] == [(("Ada", "sleeps"), ("B-PER", "O"))]
    assert parse_conll(b"Ada\tB-PER\nsleeps\tO\n", "c.tsv")[0] == [(("Ada", "sleeps"), ("B-PER", "O"))]


@pytest.mark.parametrize(
    "data,msg",
    [
        (b"Ada B-PER\nLovelace\nlived O\n", "line 2: 'Lovelace' has no tag"),
        (b"Ada B-PER\nNew York\tB-LOC\n", "line 2: the line mixes tabs and spaces"),
        (b"", "is empty"),
        (b"  \n\n\t\n", "is empty"),
        (b"-DOCSTART- -X- O O\n\n", "holds no words"),
        (b"PK\x03\x04\x00\x00binary", "not a text file"),
        (b"Caf\xe9 O\nParis B-LOC\n", "not UTF-8 text (line 1"),
    ],
)
def test_bad_conll_files_get_a_clear_message(data, msg):
    with pytest.raises(DataError, match=msg.replace("(", r"\(")):
        parse_conll(data, "bad.conll")


def test_a_tab_space_mix_is_accepted_when_unambiguous():
    sents, notes = parse_conll(b"Ada\tB-PER\nsleeps O\n\nBob\tB-PER\n", "mix.conll")
    assert sents == [(("Ada", "sleeps"), ("B-PER", "O")), (("Bob",), ("B-PER",))]
    assert "tabs on some lines and spaces on others" in notes[0]


def test_uploads_split_jsonl_and_refuse_bad_input(monkeypatch):
    rows = b"".join(
        b'{"tokens": ["Ada", "met", "Bob", "%d"], "tags": ["B-PER", "O", "B-PER", "O"]}\n' % i for i in range(10)
    )
    d = read_tokens(rows, "x.jsonl", test_fraction=0.2)
    assert (len(d.train), len(d.test)) == (8, 2) and d.label_names == ("O", "B-PER")
    assert d.majority_tag() == "O" and d.majority_rate() == 0.5
    with pytest.raises(DataError, match="line 1: 2 tokens but 1 tags"):
        read_tokens(b'{"tokens": ["a", "b"], "tags": ["O"]}\n', "x.jsonl")
    with pytest.raises(DataError, match="unsupported file type .xlsx"):
        read_tokens(b"a O\n", "x.xlsx")
    with pytest.raises(DataError, match="same tag"):
        read_tokens(b"a O\n\nb O\n\nc O\n\nd O\n", "x.conll")
    with pytest.raises(DataError, match="at least 4"):
        read_tokens(b"Ada B-PER\n", "x.conll")
    monkeypatch.setenv("ENCODERLAB_MAX_UPLOAD_MB", "0.01")
    with pytest.raises(DataError, match="uploads up to"):
        read_tokens(b"Ada B-PER\n" * 2000, "big.conll")


# ---------------------------------------------------------------------------------------------- bundled + metrics
def test_the_bundled_sample_is_rebuilt_byte_for_byte_and_has_no_overlap(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("bts", ASSETS.parent / "scripts" / "build_token_sample.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.build(out=tmp_path)
    for name in ("train.conll", "test.conll"):
        assert (tmp_path / name).read_bytes() == (ASSETS / "data" / "tokens" / name).read_bytes()
    d = load_bundled_tokens()
    assert (len(d.train), len(d.test)) == (240, 60) and "CC0" in d.licence
    assert d.entity_types() == ("DATE", "LOC", "ORG", "PER")
    assert not set(d.train.words) & set(d.test.words)


def test_metrics_are_seqevals_with_a_majority_baseline():
    words = [("Ada", "Lovelace", "met", "Bob")]
    gold = [("B-PER", "I-PER", "O", "B-PER")]
    perfect = token_metrics(words, gold, gold, "O")
    assert (perfect.f1, perfect.token_accuracy, perfect.majority_f1, perfect.majority_accuracy) == (1.0, 1.0, 0.0, 0.25)
    half = token_metrics(words, gold, [("B-PER", "O", "O", "B-PER")], "O")  # the first entity's end is wrong
    assert half.precision == 0.5 and half.recall == 0.5 and half.token_accuracy == 0.75
    assert [r["label"] for r in half.per_label] == ["PER"] and half.per_label[0]["support"] == 2

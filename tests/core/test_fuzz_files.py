"""Uploaded files and the room's messages, fuzzed (hypothesis): what a person can send never surfaces as a crash.

What is fuzzed:
- the Fine-tune page's table upload, in the page's own order: ``read_table`` (CSV, TSV, JSONL), ``guess_columns``,
  ``from_table`` with the guessed columns and a held-out fraction (in or out of its range) — 500 examples;
- the token task's upload, ``read_tokens`` (CoNLL/IOB and JSONL) — 500 examples;
- the room through the public ``RoomStore`` API of ``InProcessStore``: random sequences of create, join, poll,
  publish (the presenter's page and params), answer, tally, reveal, collect, submit, submissions, hide, pick, close,
  view, is_presenter and ``follow_step``, with typed codes (``normalize_code``), keys, members and sentences, and a
  clock that jumps — 250 examples of up to 30 calls; and ``normalize_code`` alone — 200 examples.

The inputs: random Unicode (CJK, Arabic and Hebrew, combining marks, zero-width U+200B/U+200D/U+FEFF, emoji, NUL
and control characters), typed special tokens ([MASK], [CLS], <s>, </s>, <mask>, ...), and malformed files: random
bytes, invalid UTF-8, UTF-16 with and without its BOM, a UTF-8 BOM, truncated files and JSON lines, JSON nested
thousands deep, ragged CSV rows, missing columns, empty files, mixed newlines. Lengths go from 0 to 10x the
module's own limits: the upload limit, the row and sentence limits are lowered for the properties (so that 10x of
them is a few kilobytes; ``test_the_real_limits_at_ten_times`` checks the real ones once), the room's sentence
length is its real 280 characters and its other counts are lowered likewise.

The property: each call returns normally or raises the module's own documented error (``DataError``; ``RoomError``
and its subclasses) with a non-empty message; any other exception fails the example. Every bug found is pinned as
an ``@example`` of its property. Every property runs derandomized (a fixed sequence of examples, no database, no
deadline), so the file is order- and clock-independent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from core.data import datasets_local, token_data
from core.data.datasets_local import HELD_OUT_FRACTION, DataError, from_table, guess_columns, read_table
from core.data.token_data import read_tokens
from core.runtime.room import PresenterState, RoomError, RoomLimits, follow_step, normalize_code
from core.runtime.room_store import InProcessStore

SPECIALS = ("[MASK]", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "<s>", "</s>", "<mask>", "<pad>", "<unk>")
PIECES = (
    *("中文", "汉字词", "日本語", "مرحبا", "שלום", "e\u0301", "\u0308", "\u200b", "\u200d", "\ufeff", "😀", "👍🏽"),
    *("\x00", "\x01", "\x1b", "\x7f", "\x85", "\u2028", "\r", "\n", "\r\n", "\t", " ", ",", ";", "|", '"', "'"),
    *("{", "}", "[", "]", ":", "-", "O", "B-PER", "I-PER", "B-LOC", "nan", "inf", "-inf", "1e400", "-1", "0", "1"),
    *("label", "text", "b", "sentence2", "tokens", "tags", "-DOCSTART-"),
)
UPLOAD_MB = 0.01  # the lowest upload limit settings take (ENCODERLAB_MAX_UPLOAD_MB): 10 KiB
UPLOAD_BYTES = int(UPLOAD_MB * 2**20)
ROWS = 8  # the row and sentence limits in the properties (MAX_ROWS, MAX_SENTENCES)
MAX_SENTENCE_CHARS = RoomLimits().max_sentence_chars
FUZZ = dict(derandomize=True, database=None, deadline=None)

piece = st.one_of(st.sampled_from(SPECIALS + PIECES), st.text(max_size=6))
short_text = st.lists(piece, max_size=8).map("".join)


def long_text(limit: int) -> st.SearchStrategy[str]:
    """Text from empty to 10x ``limit`` characters: short pieces, or one repeated up to that length."""
    repeated = st.builds(lambda s, n: (s * n)[:n], short_text.filter(bool), st.integers(0, 10 * limit))
    return st.one_of(short_text, repeated)


def check(call: Callable[..., Any], *args: Any, errors: tuple[type[Exception], ...] = (DataError,), **kw: Any) -> Any:
    """``call``'s result, or None when it raised one of ``errors`` with a message; any other exception propagates."""
    try:
        result = call(*args, **kw)
    except errors as e:
        assert str(e).strip(), f"{type(e).__name__} with an empty message"
        event(
            f"{call.__name__}: {type(e).__name__} {getattr(e, 'kind', '')}"
        )  # what the examples reached (--hypothesis-show-statistics)
        return None
    event(f"{call.__name__}: returned")
    return result


@contextmanager
def small_limits() -> Iterator[None]:
    """The upload, row and sentence limits lowered, so that 10x each is a few kilobytes."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENCODERLAB_MAX_UPLOAD_MB", str(UPLOAD_MB))
        mp.setattr(datasets_local, "MAX_UPLOAD_MB", UPLOAD_MB)
        mp.setattr(datasets_local, "MAX_ROWS", ROWS)
        mp.setattr(token_data, "MAX_SENTENCES", ROWS)
        yield


# ------------------------------------------------------------------------------------------------ files
NEWLINES = ("\n", "\r\n", "\r")
ENCODINGS = ("utf-8", "utf-8", "utf-8-sig", "utf-16", "utf-16-le", "cp1252")  # utf-8 twice: most files are
BREAKS = ("none", "none", "none", "cut", "splice")  # most files whole, some cut short or with random bytes in them


@st.composite
def encoded(draw: st.DrawFn, text: str) -> bytes:
    """``text`` in one of ENCODINGS, maybe cut short or with random bytes spliced in."""
    data = text.encode(draw(st.sampled_from(ENCODINGS)), "replace")
    how = draw(st.sampled_from(BREAKS))
    at = draw(st.integers(0, len(data))) if how != "none" else 0
    if how == "cut":
        data = data[:at]
    elif how == "splice":
        data = data[:at] + draw(st.binary(max_size=16)) + data[at:]
    return data


def joined(lines: list[str], newlines: list[str]) -> str:
    return "".join(line + newlines[i % len(newlines)] for i, line in enumerate(lines))


# text a spreadsheet would save (no NUL or control characters, which make a file "binary"), and labels that repeat
clean = st.sampled_from(
    ("alpha", "中文 词语", "[MASK] here", "<s> x </s>", "مرحبا بك", "שלום", "😀 fine", "e\u0301\u200bx")
)
label_cell = st.one_of(st.sampled_from(("0", "1", "2", "pos", "neg", "inf", "-inf", "1e400", "nan", "")), piece)
cell = st.one_of(label_cell, clean, clean, short_text)
clean_cell = st.one_of(st.sampled_from(("0", "1", "pos", "neg", "inf", "1e400", "nan", "")), clean)  # no control chars
newline_mix = st.lists(st.sampled_from(NEWLINES), min_size=1, max_size=3)


@st.composite
def table_text(draw: st.DrawFn) -> tuple[str, str]:
    """A separated table and its file name: a header, ragged rows (from none to 10x the row limit), mixed newlines;
    a ';' or '|' table is named .csv or .tsv."""
    sep = draw(st.sampled_from((",", ",", ",", "\t", "\t", ";", "|")))
    n = draw(st.sampled_from((0, 1, 2, 2, 2, 3, 3, 4)))
    cells = draw(st.sampled_from((cell, clean_cell)))  # half the tables as a spreadsheet saves them
    header = draw(
        st.lists(
            st.one_of(st.sampled_from(("text", "label", "b", "y", "sentence2", "")), cells), min_size=n, max_size=n
        )
    )
    rows = draw(st.lists(st.lists(cells, min_size=max(0, n - 1), max_size=n + 1), max_size=10 * ROWS))
    text = joined([sep.join(header)] + [sep.join(r) for r in rows], draw(newline_mix))
    return text, draw(st.sampled_from(("d.tsv", "数据.TSV") if sep == "\t" else ("d.csv", "D.CSV")))


json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | short_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(short_text, inner, max_size=3),
    max_leaves=6,
)
json_key = st.sampled_from(("text", "label", "b", "tokens", "tags", "y")) | short_text


@st.composite
def jsonl_text(draw: st.DrawFn) -> tuple[str, str]:
    """JSON lines: objects (with the expected keys or not), any JSON, cut lines, JSON nested thousands deep."""
    line = st.one_of(
        st.dictionaries(json_key, json_value, max_size=4).map(json.dumps),
        json_value.map(json.dumps),
        st.builds(lambda s, k: s[:k], st.dictionaries(json_key, json_value, max_size=4).map(json.dumps), st.integers()),
        st.builds(lambda o, depth: o * depth, st.sampled_from(("[", '{"a":', '{"tokens":[')), st.integers(0, 3000)),
        short_text,
    )
    objects = st.dictionaries(json_key, json_value, max_size=4).map(json.dumps)  # most lines: one object each
    lines = draw(st.lists(st.one_of(*[objects] * 4, line), max_size=10 * ROWS))
    return joined(lines, draw(newline_mix)), draw(st.sampled_from(("d.jsonl", "d.json")))


word = st.one_of(st.sampled_from(SPECIALS), short_text, clean, clean)
clean_tag = st.sampled_from(("O", "O", "B-PER", "I-PER", "B-LOC", "NN", "[MASK]", "</s>"))
tag = st.one_of(clean_tag, piece)


@st.composite
def conll_text(draw: st.DrawFn) -> tuple[str, str]:
    """CoNLL lines: word and tag (space or tab), extra columns, lone words, -DOCSTART-, blank lines between."""
    words, tags = draw(st.sampled_from(((word, tag), (clean.map(str.split).map("_".join), clean_tag))))
    tagged = st.builds(lambda w, s, t: f"{w}{s}{t}", words, st.sampled_from((" ", "\t", " \t", "  ")), tags)
    line = st.one_of(
        *[tagged] * 4,
        st.builds(lambda w, t: f"{w} NNP B-NP {t}", words, tags),
        st.sampled_from(("", "", "-DOCSTART- -X- O O", " ", "\t")),
        words,
    )
    text = joined(draw(st.lists(line, max_size=10 * ROWS)), draw(newline_mix))
    return text, draw(st.sampled_from(("d.conll", "d.iob", "d.bio", "d.txt", "d.tsv")))


@st.composite
def named_file(draw: st.DrawFn, text: st.SearchStrategy[tuple[str, str]], names: st.SearchStrategy[str]):
    """(bytes, name): a file from ``text`` (encoded, maybe broken) under its own name or now and then another."""
    body, name = draw(text)
    return draw(encoded(body)), draw(st.one_of(*[st.just(name)] * 4, names))


def file_bytes(text: st.SearchStrategy[tuple[str, str]], names: st.SearchStrategy[str]):
    """(bytes, name): a file from ``text`` (see named_file), random bytes, or one piece repeated to 10x the upload
    limit, these two under any of ``names``."""
    big = st.builds(
        lambda s, n: s * n,
        st.sampled_from((b"a,b\n", b"x O\n\n", b"\xff", b"{}\n")),
        st.integers(0, 10 * UPLOAD_BYTES // 4),
    )
    files = named_file(text, names)
    return st.one_of(files, files, files, files, st.tuples(st.binary(max_size=200) | big, names))


table_name = st.sampled_from(("d.csv", "d.tsv", "d.jsonl", "d.json", "D.CSV", "d.txt", "d", ".csv", "数据.tsv"))
token_name = st.sampled_from(("d.conll", "d.iob", "d.bio", "d.txt", "d.tsv", "d.jsonl", "d.json", "d.csv", "d"))
low, high = HELD_OUT_FRACTION.low, HELD_OUT_FRACTION.high
fraction = st.one_of(st.just(HELD_OUT_FRACTION.default), st.floats(low, high), st.floats(allow_nan=True))

INF_LABELS = b"text,label\na,inf\nb,1\nc,inf\nd,1\n"
DEEP_JSONL = b'{"text": "a", "label": ' + b"[" * 3000 + b"\n"
SECOND_TEXT_ONLY = b"text,b\nw,1\nx,1\ny,2\nz,2\n"


@settings(**FUZZ, max_examples=500)
@given(upload=st.one_of(file_bytes(table_text(), table_name), file_bytes(jsonl_text(), table_name)), frac=fraction)
@example((INF_LABELS, "d.csv"), 0.2)  # bug: labels read as numbers, int(inf) raised OverflowError
@example((b"text,label\na,1e400\nb,1\nc,1e400\nd,1\n", "d.csv"), 0.2)  # the same: 1e400 is inf
@example((DEEP_JSONL, "d.jsonl"), 0.2)  # bug: json.loads raised RecursionError
@example((SECOND_TEXT_ONLY, "d.csv"), 0.2)  # bug: the guess made b both the label and the second text
@example((b"", "d.csv"), 0.2)
@example(("\ufefftext\tlabel\r\n[MASK]\t1\r<s>\t0\n中文\t1\n\u200b\t0\n".encode("utf-16"), "d.tsv"), 0.2)
def test_a_table_upload_is_read_or_refused_with_a_message(upload: tuple[bytes, str], frac: float):
    data, name = upload
    with small_limits():
        df = check(read_table, data, name)
        if df is None:
            return
        guess = guess_columns(df)  # read_table refuses fewer than two columns
        roles = [guess.text, guess.label, *([guess.text_b] if guess.text_b else [])]
        assert len(set(roles)) == len(roles), f"one column guessed for two roles: {guess}"
        check(from_table, df, guess.text, guess.label, guess.text_b, test_fraction=frac, name=name)


@settings(**FUZZ, max_examples=500)
@given(upload=st.one_of(file_bytes(conll_text(), token_name), file_bytes(jsonl_text(), token_name)), frac=fraction)
@example((b'{"tokens": ' + b"[" * 3000 + b"\n", "d.jsonl"), 0.2)  # bug: json.loads raised RecursionError
@example((b"a O\nb B-X\n\nc O\n\nd\tO\n\ne  O\n\n[MASK] O\n", "d.conll"), 0.2)
@example(("-DOCSTART- -X- O O\r\n\r\n中文 B-LOC\r\n😀\tO\r\r\u200b O\n".encode("utf-8-sig"), "d.iob"), 0.2)
@example((b"", "d.conll"), 0.2)
def test_a_token_upload_is_read_or_refused_with_a_message(upload: tuple[bytes, str], frac: float):
    data, name = upload
    with small_limits():
        read = check(read_tokens, data, name, test_fraction=frac)
    if read is not None:
        assert all(len(w) == len(t) for s in (read.train, read.test) for w, t in zip(s.words, s.tags))


@pytest.mark.parametrize("times", [1, 10])
def test_the_real_limits_at_ten_times(times: int):
    """The real upload, row and sentence limits (not lowered), at 1x and 10x: refused with a message, or read."""
    over = b"a" * int(times * datasets_local.MAX_UPLOAD_MB * 2**20 + 1)
    for call, name in ((read_table, "d.csv"), (read_tokens, "d.conll")):
        with pytest.raises(DataError, match=r"\S"):
            call(over, name)
    rows = times * datasets_local.MAX_ROWS + 1
    df = read_table(("text,label\n" + "".join(f"t{i},{i % 2}\n" for i in range(rows))).encode(), "d.csv")
    with pytest.raises(DataError, match=r"\S"):
        from_table(df, "text", "label")
    sentences = times * token_data.MAX_SENTENCES + 1
    with pytest.raises(DataError, match=r"\S"):
        read_tokens(("w O\n\nv B-X\n\n" * (sentences // 2 + 1)).encode(), "d.conll")


# ------------------------------------------------------------------------------------------------ the room
LIMITS = RoomLimits(max_rooms=2, max_members=3, max_sentences=4, member_sentences=3, rate_n=2, idle_s=100.0,
                    closed_keep_s=100.0)  # fmt: skip
VARIANTS = ("as typed", "lower", "spaced", "dashed", "zero-width", "padded")


def typed(code: str, how: str) -> str:
    """``code`` as a person might type it."""
    return {
        "as typed": code,
        "lower": code.lower(),
        "spaced": " ".join(code[i : i + 3] for i in range(0, len(code), 3)),
        "dashed": "-".join(code),
        "zero-width": "\u200b".join(code),
        "padded": f"\t {code} -",
    }[how]


text_or_none = st.none() | long_text(20)
which = st.sampled_from((0, 0, 0, 1, 2))  # mostly the first room (created before the calls)
room_ref = st.tuples(st.just("room"), which, st.sampled_from(VARIANTS))
code_ref = st.one_of(room_ref, room_ref, room_ref, long_text(10))  # mostly a room created, as typed
key_ref = st.one_of(*[st.tuples(st.just("key"), which)] * 3, text_or_none)
member = st.one_of(*[st.sampled_from(("m1", "m2", "m3", "m4", "m5"))] * 3, short_text)
sid = st.none() | st.integers(-2, 8)
params = st.dictionaries(st.sampled_from(("room", "key", "lang", "page", "fill_mask.text")) | short_text, long_text(40))
OPS = st.one_of(
    st.tuples(st.just("create")),
    st.tuples(st.just("join"), code_ref, member),
    st.tuples(st.just("poll"), code_ref, member, st.booleans()),
    st.tuples(st.just("publish"), code_ref, key_ref, short_text, params),
    st.tuples(st.just("answer"), code_ref, member, st.integers(), st.none() | st.integers()),
    st.tuples(st.just("tally"), code_ref, key_ref, st.integers(), st.integers(-2, 12)),
    st.tuples(st.just("reveal"), code_ref, key_ref, st.integers(), st.booleans()),
    st.tuples(st.just("collect"), code_ref, key_ref, st.booleans()),
    st.tuples(st.just("submit"), code_ref, member, long_text(MAX_SENTENCE_CHARS)),
    st.tuples(st.just("submissions"), code_ref, key_ref, st.booleans()),
    st.tuples(st.just("hide"), code_ref, key_ref, st.integers(-2, 8), st.booleans()),
    st.tuples(st.just("pick"), code_ref, key_ref, sid),
    st.tuples(st.just("close"), code_ref, key_ref),
    st.tuples(st.just("view"), code_ref),
    st.tuples(st.just("is_presenter"), code_ref, key_ref),
    st.tuples(st.just("follow"), code_ref, member, st.integers(0, 3), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("tick"), st.floats(0, 5) | st.floats(0, 300)),  # idle_s and closed_keep_s: 100
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run_ops(ops: list[tuple]) -> None:
    """Play ``ops`` on a fresh store: every call returns or raises RoomError (or a subclass) with a message."""
    clock = Clock()
    store = InProcessStore(LIMITS, clock=clock)
    rooms: list[tuple[str, str]] = []  # (code, key) of each room created

    def resolve(ref: Any) -> Any:
        if isinstance(ref, tuple) and ref[0] in ("room", "key") and ref[1] < len(rooms):
            code, key = rooms[ref[1]]
            return typed(code, ref[2]) if ref[0] == "room" else key
        return ref if not isinstance(ref, tuple) else "ZZZZZZ"  # a room not created (yet)

    for name, *raw in ops:
        args = [resolve(a) for a in raw]
        if name == "tick":
            clock.now += args[0]
            continue
        if name == "publish":
            args = [args[0], args[1], PresenterState.of(args[2], args[3])]
        if name == "follow":
            code, who, state_v, shared_v, following = args
            check(follow_step, store, code, who, (state_v, shared_v), following, errors=(RoomError,))
            continue
        done = check(getattr(store, name), *args, errors=(RoomError,))
        if name == "create" and done is not None:
            rooms.append((done.code, done.key))
            assert store.view(typed(done.code, "dashed")).open and store.is_presenter(done.code, done.key)
        if name == "submit" and done is not None:
            assert 0 < len(done.text) <= MAX_SENTENCE_CHARS and done.text == args[2].strip()


created_room = [("create",), ("create",)]  # LIMITS.max_rooms: a third is refused


@settings(**FUZZ, max_examples=250)
@given(ops=st.lists(OPS, max_size=30).map(lambda ops: created_room + ops))
@example(created_room + [("join", ("room", 0, "zero-width"), "m1")])  # a code with zero-width spaces: no such room
@example(
    created_room
    + [("collect", ("room", 0, "lower"), ("key", 0), True), ("join", ("room", 0, "as typed"), "m1")]
    + [("submit", ("room", 0, "spaced"), "m1", t) for t in ("\u200b", "[MASK] 中文 😀", "x" * 2801, "\x00", " ")]
)
@example(created_room + [("publish", ("room", 0, "padded"), None, "", {"room": "X", "": "\x00" * 400})])
def test_the_rooms_messages_are_taken_or_refused_with_a_message(ops: list[tuple]):
    run_ops(ops)


@settings(**FUZZ, max_examples=200)
@given(code=st.none() | long_text(60), how=st.sampled_from(VARIANTS[:4] + VARIANTS[5:]))
def test_a_typed_code_reads_as_the_code(code: str | None, how: str):
    norm = normalize_code(code)
    assert not set(norm) & set(" -\t") and normalize_code(norm) == norm
    real = InProcessStore(LIMITS, clock=Clock()).create().code
    assert normalize_code(typed(real, how)) == real

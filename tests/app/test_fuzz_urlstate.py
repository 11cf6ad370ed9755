"""URL state decoding fuzzed (hypothesis): a shared link's query parameters never crash a page.

What is fuzzed: ``urlstate.Field.parse``, the decoder of one query parameter, for every kind of field (str, int,
float, bool, ints, strs; with and without choices, lo/hi, a config field's Bounds, a max length) — 800 examples; and
``urlstate.bind`` (restore, then publish) over a whole query of such parameters in Streamlit's bare mode — 250
examples. The raw values: random Unicode (CJK, Arabic and Hebrew, combining marks, zero-width U+200B/U+200D/U+FEFF,
emoji, NUL and control characters), typed special tokens ([MASK], [CLS], <s>, </s>, <mask>), numbers in every
spelling Python reads (1e400, nan, inf, 1_000, Arabic-Indic digits), comma lists, from empty to 10x MAX_TEXT.

The properties: ``parse`` returns a value of the field's kind that the field accepts (in range and choices, within
max_len) and that survives ``render`` and ``parse`` again, or raises ValueError (its documented error) with a
non-empty message; ``bind`` never raises, and leaves each field's session value either as it was or a value
``parse`` accepts. Every bug found is pinned as an ``@example``. Every property runs derandomized (a fixed sequence
of examples, no database, no deadline), so the file is order- and clock-independent.
"""

from __future__ import annotations

import math
from typing import Any

import streamlit as st
from hypothesis import event, example, given, settings
from hypothesis import strategies as st_

from app.kit import urlstate
from app.kit.urlstate import MAX_TEXT, Field
from core.base.fields import bounds
from core.train.finetune_config import FinetuneConfig

SPECIALS = ("[MASK]", "[CLS]", "[SEP]", "<s>", "</s>", "<mask>", "<pad>")
PIECES = (
    *("中文", "مرحبا", "שלום", "e\u0301", "\u200b", "\u200d", "\ufeff", "😀", "\x00", "\x01", "\x1b", "\r\n", "\t"),
    *(" ", ",", ",,", "=", "&", "%20", "1e400", "nan", "-inf", "inf", "1_000", "١٢", "٣.٥", "-0", "0x10", "true"),
    *("on", "No", "5", "-3", "2.5", "0.2", "42"),
)
FUZZ = dict(derandomize=True, database=None, deadline=None)

piece = st_.one_of(st_.sampled_from(SPECIALS + PIECES), st_.text(max_size=6))
short = st_.lists(piece, max_size=6).map("".join)
numbers = st_.one_of(st_.integers().map(str), st_.floats().map(str), st_.floats().map(repr))
raw_value = st_.one_of(
    short,
    numbers,
    st_.lists(numbers | short, max_size=5).map(",".join),
    st_.builds(lambda s, n: (s * n)[:n], short.filter(bool), st_.integers(0, 10 * MAX_TEXT)),
)

CONFIG_BOUNDS = [bounds(FinetuneConfig, name) for name in ("lr", "warmup_ratio", "seed", "epochs", "dropout")]
KINDS = ("str", "int", "float", "bool", "ints", "strs")


@st_.composite
def fields(draw: st_.DrawFn) -> Field:
    """A field of any kind, with or without choices, a range, a config field's Bounds, a short max length."""
    if draw(st_.integers(0, 4)) == 0:
        return Field.of("page.setting", draw(st_.sampled_from(CONFIG_BOUNDS)))
    kind = draw(st_.sampled_from(KINDS))
    choices = None
    if kind in ("str", "strs") and draw(st_.booleans()):
        choices = draw(st_.lists(short, max_size=4))
    elif kind in ("int", "ints") and draw(st_.booleans()):
        choices = draw(st_.lists(st_.integers(-5, 50), max_size=4))
    lo, hi = sorted(draw(st_.tuples(st_.floats(-100, 100), st_.floats(-100, 100))))
    ranged = kind in ("int", "float", "ints") and draw(st_.booleans())
    max_len = draw(st_.sampled_from((1, 10, MAX_TEXT)))
    return Field("page.setting", kind, choices=choices, lo=lo if ranged else None, hi=hi if ranged else None,
                 max_len=max_len)  # fmt: skip


def accepted(f: Field, value: Any) -> bool:
    """Whether ``value`` is a value ``f`` may hold."""
    one = {"str": str, "strs": str, "int": int, "ints": int, "float": (int, float), "bool": bool}[f.kind]
    items = value if f.kind in ("ints", "strs") else [value]
    opts = f.options()
    for v in items:
        if not isinstance(v, one) or (f.kind != "bool" and isinstance(v, bool)):
            return False
        if isinstance(v, str) and len(v) > f.max_len or opts is not None and v not in opts:
            return False
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if math.isnan(v) or (f.lo is not None and v < f.lo) or (f.hi is not None and v > f.hi):
                return False
            if f.bounds is not None and f.bounds.problem(v):
                return False
    return True


@settings(**FUZZ, max_examples=800)
@given(f=fields(), raw=raw_value)
@example(Field("page.setting", choices=["a"]), "")  # bug: ValueError("") had an empty message
@example(Field("page.setting", max_len=10), " " * 40)  # the same: a value of spaces over max_len
@example(Field("page.setting", "ints", choices=[1]), ",")
@example(Field("page.setting", "float"), "1e400")
@example(Field("page.setting", "int", lo=0, hi=10), "١٢")
def test_a_query_parameter_decodes_to_a_valid_value_or_a_value_error(f: Field, raw: str):
    try:
        value = f.parse(raw)
    except ValueError as e:
        assert str(e).strip(), "ValueError with an empty message"
        event("refused")
        return
    event("taken")
    assert accepted(f, value), f"{raw!r} decoded to {value!r}, which {f} does not take"
    assert f.parse(f.render(value)) == value


def clear_session() -> None:
    for key in list(st.session_state):
        del st.session_state[key]


@settings(**FUZZ, max_examples=250)
@given(
    query=st_.dictionaries(st_.sampled_from(("a", "b", "c", "d", "lang", "room")) | short, raw_value, max_size=6),
    before=st_.dictionaries(st_.sampled_from(("a", "b", "c", "d")), short, max_size=2),
)
@example({"a": "", "b": "\x00", "c": "1e400", "d": "[MASK],<s>"}, {})
def test_a_whole_query_binds_without_an_error(query: dict[str, str], before: dict[str, str]):
    fields = (
        Field("a", choices=["x", "[MASK]"]),
        Field("b", "int", lo=0, hi=9),
        Field.of("c", bounds(FinetuneConfig, "lr")),
        Field("d", "strs", max_len=12),
    )
    clear_session()
    st.query_params.from_dict(query)
    for key, value in before.items():
        st.session_state[key] = value
    restored = urlstate.bind(fields)
    for f in fields:
        if f.key in restored:
            assert accepted(f, st.session_state[f.key]) and st.session_state[f.key] == f.parse(query[f.name])
        else:
            assert st.session_state.get(f.key) == before.get(f.key)
    clear_session()

"""Bounds and defaults declared once, on a config dataclass's fields.

A field declared with ``bounded`` carries its range, step and English label in its metadata::

    @dataclass(frozen=True)
    class FinetuneConfig:
        warmup_ratio: float = bounded(0.1, 0.0, 0.5, step=0.05, label="Warmup ratio", hint="0.1 is usual")

        def __post_init__(self):
            check_bounds(self)  # ValueError naming the field, its range and the value

Everything else reads the range from there instead of writing it again: ``bounds(FinetuneConfig, "warmup_ratio")``
gives a ``Bounds`` whose ``widget()`` is the keyword arguments of ``st.number_input`` (min, max, step), whose
``lo``/``hi`` a URL field takes (app/kit/urlstate.py), and ``add_argument`` puts the default and the range check on an
argparse option. A bound may be a callable (read when checked: a server limit set by an environment variable).
"""

from __future__ import annotations

import argparse
import dataclasses
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from core.base.messages import msg

Number = int | float
Limit = Number | Callable[[], Number] | None
KEY = "encoderlab.bounds"  # the metadata key a bounded field keeps its Bounds under


class Dataclass(Protocol):
    """A dataclass instance, as ``dataclasses.fields`` takes it (typeshed's ``_typeshed.DataclassInstance``)."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]


@dataclass(frozen=True)
class Bounds:
    """The range of one numeric field: ``lo <= value <= hi`` (``open_lo``/``open_hi``: strict), either side optional.

    ``kind`` is ``int`` or ``float`` (from the default; a float field accepts ints), ``none_ok`` lets the field be
    None (e.g. "use the checkpoint's own dropout"), ``step`` is the widget's step and ``stops`` the values a
    slider offers (within the range)."""

    default: Any
    lo: Limit = None
    hi: Limit = None
    kind: type[int] | type[float] = float
    step: Number | None = None
    stops: tuple[Number, ...] | None = None
    label: str = ""
    hint: str = ""
    open_lo: bool = False
    open_hi: bool = False
    none_ok: bool = False
    name: str = ""  # the field's name, filled in by ``bounds``

    @property
    def low(self) -> Number | None:
        """The lower limit now (a callable limit is read at each call)."""
        return self.lo() if callable(self.lo) else self.lo

    @property
    def high(self) -> Number | None:
        """The upper limit now."""
        return self.hi() if callable(self.hi) else self.hi

    def range_text(self) -> str:
        """The range in words: "from 0 to 0.5", "in (0, 1)", ">= 0"."""
        lo, hi = self.low, self.high
        fmt: Callable[[Number], str] = (lambda v: f"{v:,}") if self.kind is int else (lambda v: f"{v:g}")
        if lo is not None and hi is not None:
            if not (self.open_lo or self.open_hi):
                return msg("fields.range_from_to", lo=fmt(lo), hi=fmt(hi))
            return msg(
                "fields.range_in",
                interval=f"{'(' if self.open_lo else '['}{fmt(lo)}, {fmt(hi)}{')' if self.open_hi else ']'}",
            )
        if lo is not None:
            return f"{'>' if self.open_lo else '>='} {fmt(lo)}"
        if hi is not None:
            return f"{'<' if self.open_hi else '<='} {fmt(hi)}"
        return msg("fields.range_any")

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not valid for this field (one English sentence with the fix), or None when it is."""
        if value is None and self.none_ok:
            return None
        whole = self.kind is int
        hint = f" ({self.hint})" if self.hint else ""
        ok_type = isinstance(value, numbers.Integral if whole else numbers.Real) and not isinstance(value, bool)
        if not ok_type or value != value:  # NaN is a float that fails every comparison
            return msg(
                "fields.whole_out_of_range" if whole else "fields.not_a_number",
                name=self.label or self.name,
                range=self.range_text(),
                value=value,
                hint=hint,
            )
        lo, hi = self.low, self.high
        if (lo is not None and (value <= lo if self.open_lo else value < lo)) or (
            hi is not None and (value >= hi if self.open_hi else value > hi)
        ):
            return msg(
                "fields.whole_out_of_range" if whole else "fields.out_of_range",
                name=self.label or self.name,
                range=self.range_text(),
                value=value,
                hint=hint,
            )
        return None

    def check(self, value: Any, error: type[Exception] = ValueError) -> None:
        """Raise ``error`` with ``problem(value)`` when the value is out of range."""
        problem = self.problem(value)
        if problem:
            raise error(problem)

    def widget(self) -> dict[str, Number]:
        """``min_value``/``max_value``/``step`` for ``st.number_input`` (open bounds have no widget form)."""
        out: dict[str, Number] = {}
        if self.low is not None:
            out["min_value"] = self.kind(self.low)
        if self.high is not None:
            out["max_value"] = self.kind(self.high)
        if self.step is not None:
            out["step"] = self.kind(self.step)
        return out

    def parse(self, text: str) -> Number:
        """An argparse ``type``: the number ``text`` stands for, range-checked (ArgumentTypeError with the range)."""
        try:
            value = self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'a whole number' if self.kind is int else 'a number'}"
            ) from None
        problem = self.problem(value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value


def bounded(
    default: Any,
    lo: Limit = None,
    hi: Limit = None,
    *,
    step: Number | None = None,
    stops: tuple[Number, ...] | None = None,
    label: str = "",
    hint: str = "",
    open_lo: bool = False,
    open_hi: bool = False,
    kind: type[int] | type[float] | None = None,
) -> Any:
    """A dataclass field with a default and a range (see ``Bounds``). ``kind`` defaults to the default's type
    (int or float); a default of None makes the field optional (None allowed) and needs ``kind``."""
    if kind is None:
        if default is None:
            raise TypeError("bounded(None, ...) needs kind=int or kind=float")
        kind = int if isinstance(default, int) and not isinstance(default, bool) else float
    b = Bounds(
        default,
        lo,
        hi,
        kind,
        step,
        tuple(stops) if stops else None,
        label,
        hint,
        open_lo,
        open_hi,
        none_ok=default is None,
    )
    if not (callable(lo) or callable(hi)):  # a declaration mistake, caught when the class is defined
        bad = [v for v in ([] if default is None else [default]) + list(b.stops or ()) if b.problem(v)]
        if bad:
            raise ValueError(f"{bad} outside the field's own range {b.range_text()}")
    return dataclasses.field(default=default, metadata={KEY: b})


def bounded_fields(cls: Dataclass | type[Dataclass]) -> dict[str, Bounds]:
    """Every bounded field of the dataclass ``cls`` (or an instance), by name, in declaration order."""
    return {
        f.name: dataclasses.replace(f.metadata[KEY], name=f.name) for f in dataclasses.fields(cls) if KEY in f.metadata
    }


def bounds(cls: Dataclass | type[Dataclass], name: str) -> Bounds:
    """The Bounds of field ``name`` of the dataclass ``cls``; KeyError names the bounded fields there are."""
    found = bounded_fields(cls)
    if name not in found:
        raise KeyError(f"{getattr(cls, '__name__', cls)!s} has no bounded field {name!r}: {', '.join(found)}")
    return found[name]


def default_of(cls: type[Dataclass], name: str) -> Any:
    """The declared default of field ``name`` of the dataclass ``cls`` (bounded or not)."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            raise KeyError(f"{cls.__name__}.{name} has no default")
    raise KeyError(f"{cls.__name__} has no field {name!r}")


def check_bounds(obj: Dataclass, error: type[Exception] = ValueError) -> None:
    """Check every bounded field of the dataclass instance ``obj``; raise ``error`` for the first one out of range."""
    for name, b in bounded_fields(obj).items():
        b.check(getattr(obj, name), error)


def add_argument(
    parser: argparse.ArgumentParser, cls: type[Dataclass], name: str, flag: str | None = None, **kwargs: Any
) -> None:
    """``parser.add_argument`` for field ``name`` of ``cls``: its default, and for a bounded field its type and
    range check (so ``--warmup-ratio 2`` is refused by argparse with the range). ``flag`` defaults to
    ``--name-with-dashes``; other keyword arguments (help, choices) go to argparse."""
    found = bounded_fields(cls)
    kwargs.setdefault("default", default_of(cls, name))
    if name in found:
        b = found[name]
        kwargs.setdefault("type", b.parse)
        kwargs.setdefault("metavar", b.kind.__name__.upper())
        extra = b.range_text() + ("" if kwargs["default"] is None else f"; default {kwargs['default']}")
        kwargs["help"] = f"{kwargs['help']} ({extra})" if kwargs.get("help") else extra
    elif "type" not in kwargs and kwargs["default"] is not None and not isinstance(kwargs["default"], bool):
        kwargs["type"] = type(kwargs["default"])
    parser.add_argument(flag or "--" + name.replace("_", "-"), dest=name, **kwargs)

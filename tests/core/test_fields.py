"""core.base.fields: a config field declares its default and range once; the check, the widget arguments and the
command line read them from there."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from core.base.fields import Bounds, add_argument, bounded, bounded_fields, bounds, check_bounds, default_of
from core.train.finetune_cli import parser as finetune_parser
from core.train.finetune_config import FinetuneConfig
from core.train.pretrain.__main__ import _parser as pretrain_parser
from core.train.pretrain.train import PretrainConfig, PretrainError


@dataclass(frozen=True)
class Toy:
    name: str = "x"
    ratio: float = bounded(0.1, 0.0, 0.5, step=0.05, label="Ratio", hint="0.1 is usual")
    count: int = bounded(3, 1, lambda: Toy.top, label="Count")
    p: float = bounded(0.15, 0.0, 1.0, open_lo=True, open_hi=True, label="p")
    drop: float | None = bounded(None, 0.0, 0.5, kind=float, label="Drop")
    top = 5  # a class attribute, not a field: the limit ``count`` reads when checked

    def __post_init__(self) -> None:
        check_bounds(self)


def test_a_bounded_field_is_a_plain_dataclass_default():
    t = Toy()
    assert (t.ratio, t.count, t.p, t.drop) == (0.1, 3, 0.15, None)
    assert list(bounded_fields(Toy)) == ["ratio", "count", "p", "drop"]
    assert default_of(Toy, "name") == "x" and default_of(Toy, "count") == 3


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(ratio=0.55), "Ratio must be from 0 to 0.5, got 0.55 (0.1 is usual)."),
        (dict(ratio=-0.01), "Ratio must be from 0 to 0.5"),
        (dict(ratio=float("nan")), "Ratio must be a number from 0 to 0.5, got nan"),
        (dict(ratio="0.2"), "Ratio must be a number"),
        (dict(count=0), "Count must be a whole number from 1 to 5, got 0."),
        (dict(count=2.0), "Count must be a whole number"),
        (dict(count=True), "Count must be a whole number"),
        (dict(p=1.0), "p must be in (0, 1), got 1.0."),
        (dict(p=0.0), "p must be in (0, 1)"),
        (dict(drop=0.6), "Drop must be from 0 to 0.5"),
    ],
)
def test_check_names_the_field_its_range_and_the_value(kw, msg):
    with pytest.raises(ValueError) as e:
        Toy(**kw)
    assert str(e.value).startswith(msg), str(e.value)


def test_edges_and_none_are_accepted():
    Toy(ratio=0.0, count=1, drop=None)
    Toy(ratio=0.5, count=5, p=0.999, drop=0.5)
    Toy(ratio=0, count=5)  # an int is a number for a float field


def test_a_callable_limit_is_read_at_each_check(monkeypatch):
    Toy(count=5)
    monkeypatch.setattr(Toy, "top", 2)
    with pytest.raises(ValueError, match="from 1 to 2"):
        Toy(count=3)
    assert bounds(Toy, "count").widget() == {"min_value": 1, "max_value": 2}


def test_a_default_or_a_stop_outside_its_own_range_is_a_declaration_error():
    with pytest.raises(ValueError, match="outside the field's own range"):
        bounded(0.7, 0.0, 0.5)
    with pytest.raises(ValueError, match=r"\[64\] outside"):
        bounded(16, 1, 32, stops=(8, 16, 64))
    with pytest.raises(TypeError, match="needs kind"):
        bounded(None, 0.0, 1.0)


def test_widget_arguments_and_unknown_field():
    assert bounds(Toy, "ratio").widget() == {"min_value": 0.0, "max_value": 0.5, "step": 0.05}
    assert Bounds(0, 0, None, int).widget() == {"min_value": 0}
    with pytest.raises(KeyError, match="no bounded field 'name'"):
        bounds(Toy, "name")


def test_add_argument_takes_the_default_and_refuses_out_of_range(capsys):
    ap = argparse.ArgumentParser(prog="toy")
    for name in ("name", "ratio", "count", "drop"):
        add_argument(ap, Toy, name)
    args = ap.parse_args([])
    assert (args.name, args.ratio, args.count, args.drop) == ("x", 0.1, 3, None)
    assert ap.parse_args(["--ratio", "0.5", "--count", "5", "--drop", "0.2"]).count == 5
    for bad, said in (
        (["--ratio", "0.6"], "Ratio must be from 0 to 0.5"),
        (["--count", "x"], "not a whole number"),
        (["--count", "6"], "from 1 to 5"),
    ):
        with pytest.raises(SystemExit):
            ap.parse_args(bad)
        assert said in capsys.readouterr().err
    assert "from 0 to 0.5; default 0.1" in ap.format_help()


def test_every_bounded_config_field_has_a_default_inside_its_range():
    for cls in (FinetuneConfig, PretrainConfig):
        for name, b in bounded_fields(cls).items():
            assert b.problem(b.default) is None, (cls.__name__, name)
            assert all(b.problem(s) is None for s in b.stops or ()), (cls.__name__, name)


# The command lines take each bounded option from the config: the same default, and out of range is refused.
@pytest.mark.parametrize(
    "cls, parser, required",
    [
        (FinetuneConfig, finetune_parser, ["--family", "bert", "--checkpoint", "x", "--out", "o"]),
        (PretrainConfig, pretrain_parser, ["--family", "bert", "--out", "o"]),
    ],
)
def test_command_line_defaults_and_ranges_are_the_configs(cls, parser, required, capsys):
    ap = parser()
    defaults = ap.parse_args(required)
    dests = {a.dest for a in ap._actions}
    checked = 0
    for name, b in bounded_fields(cls).items():
        if name not in dests:
            continue
        checked += 1
        assert getattr(defaults, name) == b.default, name
        flag = "--" + name.replace("_", "-")
        if b.high is not None and not b.open_hi:
            assert getattr(ap.parse_args(required + [flag, str(b.high)]), name) == b.high
            over = b.high + 1 if b.kind is int else b.high * 1.01 + 1e-9
            with pytest.raises(SystemExit):
                ap.parse_args(required + [flag, str(over)])
            assert "must be" in capsys.readouterr().err
            with pytest.raises(ValueError):
                cls(**_required(cls), **{name: over})
    assert checked >= 5


def _required(cls) -> dict:
    return dict(family="bert", checkpoint="x") if cls is FinetuneConfig else dict(family="bert", out="o")


def test_pretrain_config_raises_its_own_error():
    with pytest.raises(PretrainError, match="mlm_probability must be in"):
        PretrainConfig(family="bert", out="o", mlm_probability=1.0)
    with pytest.raises(PretrainError, match="Warmup must be from 0 to 0.5"):
        PretrainConfig(family="bert", out="o", warmup=0.7)

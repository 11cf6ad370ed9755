"""Each bounded setting of the Fine-tune and Pretraining pages has one range, declared on its config field
(core/base/fields.py). The widget's min and max, the URL field (a link at the edge is taken, one step past it falls
back with a notice naming it), the command line and the config's own check must all agree: one test per
setting, which fails if any of the four drifted."""

from __future__ import annotations

import pytest

from core.base.fields import Bounds, bounds
from core.train.finetune_cli import parser as finetune_parser
from core.train.finetune_config import FinetuneConfig
from core.train.pretrain.__main__ import _parser as pretrain_parser
from core.train.pretrain.lab import LabRequest, limits, prepare
from core.train.pretrain.train import PretrainConfig
from tests.app.conftest import open_page

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]  # eight page sessions opened from links: ~25 s
MAX_STEPS = 40  # the lab's step limit in this test (ENCODERLAB_PRETRAIN_MAX_STEPS)

# (page, widget key and URL parameter, config field, command-line flag)
SETTINGS = [
    ("finetune", "finetune.epochs", "epochs", "--epochs"),
    ("finetune", "finetune.max_steps", "max_steps", "--max-steps"),
    ("finetune", "finetune.warmup", "warmup_ratio", "--warmup-ratio"),
    ("finetune", "finetune.wd", "weight_decay", "--weight-decay"),
    ("finetune", "finetune.clip", "grad_clip", "--grad-clip"),
    ("finetune", "finetune.freeze_n", "freeze_layers", "--freeze-layers"),
    ("finetune", "finetune.seed", "seed", "--seed"),
    ("finetune", "finetune.patience", "patience", "--patience"),
    ("finetune", "finetune.evals", "evals_per_epoch", "--evals-per-epoch"),
    ("pretrain", "pretrain.steps", "steps", "--steps"),
    ("pretrain", "pretrain.seed", "seed", "--seed"),
]


def _bounds(page: str, field: str) -> Bounds:
    b = bounds(FinetuneConfig if page == "finetune" else PretrainConfig, field)
    if page == "pretrain" and field == "steps":
        assert b.high is None  # the config's own steps are open-ended; the lab caps them at its limit
        return Bounds(b.default, b.low, MAX_STEPS, int)
    return b


def _past(b: Bounds, side: str) -> str:
    step = 1 if b.kind is int else (b.step or 0.01)
    return str(b.high + step if side == "hi" else b.low - step)


def _edge(b: Bounds, side: str) -> str:
    return str(b.high if side == "hi" else b.low)


@pytest.fixture(scope="module")
def sessions():
    """Per page: a session opened from a link with every setting at its upper edge, at its lower edge, one step
    past the upper edge and one step past the lower edge."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENCODERLAB_PRETRAIN_MAX_STEPS", str(MAX_STEPS))
        out = {}
        for page in ("finetune", "pretrain"):
            rows = [s for s in SETTINGS if s[0] == page]
            for name, value in (("hi", _edge), ("lo", _edge), ("past_hi", _past), ("past_lo", _past)):
                side = name.removeprefix("past_")
                params = {key: value(_bounds(page, field), side) for _, key, field, _ in rows}
                out[page, name] = open_page(page, params)
        yield out


def _notice(at) -> str:
    return " ".join(w.value for w in at.warning)


@pytest.mark.parametrize("page, key, field, flag", SETTINGS, ids=[s[1] for s in SETTINGS])
def test_widget_url_command_line_and_config_agree(sessions, page, key, field, flag, tmp_path, monkeypatch):
    b = _bounds(page, field)
    lo, hi = b.low, b.high
    # the widget
    widget = sessions[page, "hi"].number_input(key=key)
    assert (widget.min, widget.max) == (lo, hi), key
    # the URL: the edges are taken, one step past either falls back to the default with a notice naming it
    assert sessions[page, "hi"].number_input(key=key).value == hi
    assert sessions[page, "lo"].number_input(key=key).value == lo
    for side in ("hi", "lo"):
        at = sessions[page, side]
        assert f"`{key}`" not in _notice(at), (side, _notice(at))
        at = sessions[page, f"past_{side}"]
        assert f"`{key}`" in _notice(at), (side, _notice(at))
        assert at.number_input(key=key).value != b.kind(_past(b, side))
    # the command line and the config
    if page == "finetune":
        required = ["--family", "bert", "--checkpoint", "x", "--out", "o"]
        parser = finetune_parser()
        make = lambda v: FinetuneConfig("bert", "x", **{field: v})  # noqa: E731
    else:
        monkeypatch.setenv("ENCODERLAB_PRETRAIN_MAX_STEPS", str(MAX_STEPS))
        required = ["--family", "bert", "--out", "o"]
        parser = pretrain_parser()
        lim = limits()  # what the page's Pretrain button passes to prepare()

        def make(v):
            return prepare(LabRequest(family="bert", **{"steps": MAX_STEPS, field: v}), workdir=tmp_path, lim=lim)

    for v in (lo, hi):
        make(v)
        assert getattr(parser.parse_args(required + [flag, str(v)]), field) == v
    for side in ("hi", "lo"):
        v = b.kind(_past(b, side))
        with pytest.raises(ValueError):
            make(v)
        if not (page == "pretrain" and field == "steps" and side == "hi"):  # the CLI has no lab step limit
            with pytest.raises(SystemExit):
                parser.parse_args(required + [flag, str(v)])


@pytest.mark.parametrize(
    "key, field", [("finetune.lr", "lr"), ("finetune.batch", "batch_size"), ("finetune.max_len", "max_length")]
)
def test_slider_stops_are_the_fields_and_inside_its_range(sessions, key, field):
    b = bounds(FinetuneConfig, field)
    slider = sessions["finetune", "hi"].select_slider(key=key)
    assert len(slider.options) == len(b.stops)
    for stop in b.stops:
        FinetuneConfig("bert", "x", **{field: stop})


def test_rows_widget_and_url_agree(sessions):
    from app.views.train.finetune import ROWS

    for key in ("finetune.rows", "finetune.test_rows"):
        w = sessions["finetune", "hi"].number_input(key=key)
        assert (w.min, w.max) == (ROWS.low, ROWS.high)

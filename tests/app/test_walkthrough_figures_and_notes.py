"""What the Walkthrough's steps draw agrees with what they measure: every step's page links shown whole (a
wrapping row, not equal columns), step 1's chart axes fitting the tallest bar with nice ticks, step 2's colours,
legend, "whole words" cell and fill-mask caption agreeing with what is drawn, steps 3 and 4 saying when the bundled
ALBERT mini's SOP head did not learn (read from its card), and step 5's article figures drawn with no arrow."""

from __future__ import annotations

import json
import math
import re
import shutil
from types import SimpleNamespace

import pytest

from core.base.paths import ASSETS
from tests.app.conftest import new_app, page_path
from tests.conftest import BUNDLED_NAMES

pytestmark = pytest.mark.timeout(300)


def _ok(at) -> None:
    assert not at.exception, at.exception


def _walk(step: int):
    at = new_app()
    at.switch_page(page_path("walkthrough")).run()
    _ok(at)
    at.session_state["walkthrough.step"] = step
    at.run()
    _ok(at)
    return at


@pytest.fixture()
def carded_zoo(tiny_models, tmp_path, monkeypatch):
    """The tiny models under the bundled names, each with the real mini's card: the steps read the card, the
    forward pass stays tiny."""
    zoo = tmp_path / "zoo"
    for fam, name in BUNDLED_NAMES.items():
        dst = zoo / name
        shutil.copytree(tiny_models[fam], dst)
        if (card := ASSETS / "models" / name / "encoderlab_card.json").exists():  # xlmr-e5-small: once trained
            shutil.copy(card, dst)
    # albert-mini's SOP numbers as they were before #16's retraining (46.6% against a 53.4% majority), so the
    # steps' "did not learn" note is tested whatever the committed card says; the tests below also set a learned one
    card, path = _albert_card(zoo)
    card["heldout"].update(pair_acc=0.4655, pair_majority=0.5345, pairs=595)
    path.write_text(json.dumps(card))
    monkeypatch.setenv("ENCODERLAB_ZOO", str(zoo))
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    return zoo


def _albert_card(zoo) -> tuple[dict, object]:
    path = zoo / BUNDLED_NAMES["albert"] / "encoderlab_card.json"
    return json.loads(path.read_text()), path


# ---------------------------------------------------------------------------------------------- defect 2
def _blocks_with_links(node, out):
    """(block, its page links) for every block whose direct children include page links."""
    children = getattr(node, "children", {})
    links = [c for c in children.values() if getattr(c, "type", None) == "page_link"]
    if links:
        out.append((node, links))
    for c in children.values():
        _blocks_with_links(c, out)
    return out


def test_every_steps_links_sit_in_one_wrapping_row(use_tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    from app.views.start.walkthrough.frame import BY_NUMBER, N_STEPS

    at = _walk(1)
    for step in range(1, N_STEPS + 1):
        at.session_state["walkthrough.step"] = step
        at.run()
        _ok(at)
        found = _blocks_with_links(at._tree, [])
        assert sum(len(links) for _, links in found) == len(BY_NUMBER[step].links) + len(BY_NUMBER[step].deep_links)
        for block, _links in found:  # one container holding them all, laid out in a row that wraps (no columns)
            assert len(found) == 1 and block.type != "column", step
            flex = block.proto.flex_container
            assert flex.direction == flex.HORIZONTAL and flex.wrap, step


# ---------------------------------------------------------------------------------------------- defect 10
def _values(ys) -> list[float]:
    """A trace's values from the chart's JSON (plotly writes numpy arrays as base64 typed arrays)."""
    if isinstance(ys, dict):
        import base64

        import numpy as np

        return [float(v) for v in np.frombuffer(base64.b64decode(ys["bdata"]), dtype=ys["dtype"])]
    return [float(v) for v in ys]


def test_step1_axes_fit_the_tallest_bar_with_nice_ticks(use_tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    at = _walk(1)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    bars = [y for tr in spec["data"] if tr["type"] == "bar" for y in _values(tr["y"])]
    line = [y for tr in spec["data"] if tr["type"] != "bar" for y in _values(tr["y"])]
    y, y2 = spec["layout"]["yaxis"], spec["layout"]["yaxis2"]
    assert y["range"][0] == 0 and max(bars) < y["range"][1] <= max(bars) * 1.6
    assert y2["range"][0] <= min(line) and max(line) <= y2["range"][1]
    nice = (1, 2, 2.5, 5)
    for ax in (y, y2):
        mant = ax["dtick"] / 10 ** math.floor(math.log10(ax["dtick"]))
        assert any(abs(mant - m) < 1e-9 for m in nice), ax["dtick"]
        assert abs(ax["tick0"] / ax["dtick"] - round(ax["tick0"] / ax["dtick"])) < 1e-9  # ticks at step multiples
    n1 = (y["range"][1] - y["range"][0]) / y["dtick"]
    n2 = (y2["range"][1] - y2["range"][0]) / y2["dtick"]
    assert abs(n1 - round(n1)) < 1e-9 and abs(n1 - n2) < 1e-9  # same number of steps: the ticks line up


def test_aligned_axes_numbers():
    from app.views.start.walkthrough.step_inputs import aligned_axes

    left, right = aligned_axes(2.372, [6.8, 7.1, 11.4, 10.9])  # the tour's chart
    assert left["range"] == [0, 3.0] and left["dtick"] == 0.5
    assert right["range"] == [6.0, 12.0] and right["dtick"] == 1.0
    assert aligned_axes(1.5, None)[1] == {}


# ---------------------------------------------------------------------------------------------- defect 8
def _colors(html: str) -> list[str]:
    return re.findall(r"color:(#[0-9A-Fa-f]{6})", html)


def test_step2_rows_share_the_legend_colours_and_whole_words_says_off(use_tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    at = _walk(2)
    for _ in range(40):  # a draw with a token replaced by a random one or kept (not only [MASK]): red or green
        strips = [m.value for m in at.markdown if "encoderlab-tokens" in m.value]
        if "#E45756" in strips[1] or "#54A24B" in strips[1]:
            break
        at.button(key="walkthrough.s2.remask").click().run()
    else:
        pytest.fail("no draw replaced a token by a random one or kept it")
    strips = [m.value for m in at.markdown if "encoderlab-tokens" in m.value]
    assert _colors(strips[0]) == _colors(strips[1])  # a selected token: the colour of what is done to it
    table = at.dataframe[0].value
    assert set(table["whole words"]) == {"off"}
    at.toggle(key="walkthrough.s2.whole_word").set_value(True).run()
    _ok(at)
    assert list(at.dataframe[0].value["whole words"])[0] == "on"


def _fake_result(ranks: list[int | None], k: int = 5):
    masks = []
    for r in ranks:
        cands = tuple(SimpleNamespace(token_id=100 + j) for j in range(k))
        original = SimpleNamespace(token_id=100 + r if r is not None and r < k else 7)
        masks.append(SimpleNamespace(candidates=cands, original=original, original_rank=r))
    return SimpleNamespace(masks=tuple(masks), masked_word="context")


def test_fill_caption_green_only_when_the_original_is_shown(ui_lang):
    from app.views.start.walkthrough.step_mlm import fill_caption

    ui_lang("en")
    assert "Green bar: the original." in fill_caption(_fake_result([2]))
    far = fill_caption(_fake_result([50]))  # the tour: "context" ranks 51st
    assert "Green bar" not in far and "not among the 5 guesses shown" in far and "guesses: 51." in far
    some = fill_caption(_fake_result([0, 50]))
    assert "piece(s) 2" in some
    none = fill_caption(_fake_result([40, 50]))
    assert "Green bar" not in none and "No original piece" in none
    assert "Green bar" not in fill_caption(_fake_result([None]))


# ---------------------------------------------------------------------------------------------- defect 7
def test_unlearned_pair_head_reads_the_card(carded_zoo):
    from core.walkthrough.checks import unlearned_pair_head

    note = unlearned_pair_head("encoderlab/albert-mini", "sop")
    card, path = _albert_card(carded_zoo)
    assert note is not None and note.acc == card["heldout"]["pair_acc"]
    assert note.majority == card["heldout"]["pair_majority"] and note.full == "albert-base-v2"
    assert unlearned_pair_head("encoderlab/bert-mini", "nsp") is None  # 91% against 57%: it learned
    assert unlearned_pair_head("albert-base-v2", "sop") is None  # no card: nothing claimed
    card["heldout"].update(pair_acc=0.83)
    path.write_text(json.dumps(card))
    assert unlearned_pair_head("encoderlab/albert-mini", "sop") is None  # a retrained mini: the note goes


def _noise(at) -> list[str]:
    return [w.value for w in at.warning if "did not learn" in w.value]


def test_steps_3_and_4_say_the_minis_sop_head_did_not_learn(carded_zoo):
    card, path = _albert_card(carded_zoo)
    acc, maj = f"{card['heldout']['pair_acc']:.1%}", f"{card['heldout']['pair_majority']:.1%}"
    at = _walk(3)
    (note,) = _noise(at)
    assert "encoderlab/albert-mini" in note and acc in note and maj in note and "albert-base-v2" in note
    (hint,) = [i.value for i in at.info if "Checkpoint" in i.value or "noise" in i.value]
    assert "noise" in hint and acc in hint and "albert-base-v2" in hint
    assert "Compare the (B, A) bars of the two heads" not in hint
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert any("noise" in tr["name"] for tr in spec["data"] if "albert" in tr["name"])
    at.session_state["walkthrough.step"] = 4
    at.run()
    _ok(at)
    (note4,) = _noise(at)
    assert acc in note4 and maj in note4

    card["heldout"].update(pair_acc=0.83)  # the card of a mini whose SOP head learned: no note anywhere
    path.write_text(json.dumps(card))
    at = _walk(3)
    assert not _noise(at)
    assert any("Compare the (B, A) bars of the two heads" in i.value for i in at.info)
    at.session_state["walkthrough.step"] = 4
    at.run()
    _ok(at)
    assert not _noise(at)


# ---------------------------------------------------------------------------------------------- defect 9
def test_step5_article_figures_have_no_arrow(use_tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    at = _walk(5)
    claims = [m for m in at.metric if "articles" in str(m.proto.delta)]
    assert len(claims) == 3
    for m in claims:
        assert m.proto.color == m.proto.GRAY and m.proto.direction == m.proto.NONE, m.proto

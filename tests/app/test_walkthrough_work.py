"""The walkthrough's steps draw and the page loads and starts work (#46 §2): each step's renderer is a flow that yields
what it needs (app.kit.walkthrough_work), the page answers each request where it was made, and a failure in
answering one reaches the step as if it had made the call itself (step 6's refused pair: an error in the step,
no run kept, the first run cancelled)."""

from __future__ import annotations

import inspect
import time

import pytest

from app.kit import walkthrough_work as W
from app.kit.state import SESSION_ID
from core.models.spec import ModelSpec
from core.registry import FAMILIES
from core.runtime.backend import runner
from core.runtime.jobs import CANCELLED
from tests.app.conftest import new_app, page_path

pytestmark = pytest.mark.timeout(300)


def test_every_step_renders_as_a_flow_the_page_drives():
    from app.views.start.walkthrough.frame import STEPS

    assert all(inspect.isgeneratorfunction(s.render) for s in STEPS), [
        s.number for s in STEPS if not inspect.isgeneratorfunction(s.render)
    ]


def _flow(seen: list):
    """A step's shape: two requests in turn, the second refused and handled, then one more."""
    lm = yield W.SidebarModel("mlm")
    seen.append(("model", lm))
    try:
        seen.append(("runs", (yield W.LrPair("f", "c", 5e-5, 2, "cpu"))))
    except ValueError as e:
        seen.append(("refused", str(e)))
    fam = next(iter(FAMILIES.values()))
    seen.append(("last", (yield W.Load(ModelSpec(fam.key, fam.base_checkpoint, "cpu"), "base"))))


def _answer(ask):
    if isinstance(ask, W.LrPair):
        raise ValueError("quota")
    return type(ask).__name__


def test_drive_answers_each_request_where_it_was_made_and_raises_a_failure_in_the_flow():
    seen: list = []
    W.drive(_flow(seen), _answer)
    assert seen == [("model", "SidebarModel"), ("refused", "quota"), ("last", "Load")]


def test_a_failure_the_flow_does_not_handle_leaves_drive():
    def flow():
        yield W.LrPair("f", "c", 5e-5, 2, "cpu")
        raise AssertionError("not reached")

    with pytest.raises(ValueError, match="quota"):
        W.drive(flow(), _answer)


def test_a_refused_pair_is_an_error_in_step_six_and_cancels_its_first_run(use_tiny_zoo, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("ENCODERLAB_SESSION_RUNNING", "1")
    monkeypatch.setenv("ENCODERLAB_SESSION_QUEUED", "0")  # one job per session: the pair's second run is refused
    at = new_app()
    at.switch_page(page_path("walkthrough")).run()
    at.session_state["walkthrough.step"] = 6
    at.run()
    assert not at.exception and not at.error, (at.exception, at.error)
    at.number_input(key="walkthrough.s6.steps").set_value(2)
    at.button(key="walkthrough.s6.start").click().run()
    assert not at.exception, at.exception
    assert len(at.error) == 1 and at.error[0].value
    assert "walkthrough.s6.runs" not in at.session_state
    mine = runner().jobs(owner=at.session_state[SESSION_ID])
    end = time.time() + 120
    while not all(j.done for j in mine):
        assert time.time() < end, "the cancelled run did not end"
        time.sleep(0.2)
    assert [j.status for j in mine] == [CANCELLED]  # the first run was dropped with the refused second one

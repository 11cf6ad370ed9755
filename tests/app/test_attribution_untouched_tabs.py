"""AppTest: the Attributions page's Patching and Counterfactuals tabs show no error to a session that did not ask them
for anything (bench/soak.py: "Patching needs a clean and a corrupted input: one of them is empty." and "There is no
text to edit" in a session that only typed into the One input tab and clicked Explain).

How a session gets empty boxes it never cleared: a page visit sets the tabs' examples in session state, and the
browser learns them only from that run's widgets (their one-time ``set_value``). Streamlit drops a run's messages
not yet sent when the next run starts (a click soon after the page switch, on a busy server); the next run draws the
boxes without the value (the server takes it as known), so the browser mounts them at the widget's own default, "",
and sends "" back with its next rerun as if typed. Both tabs are drawn whether open or not, so their refusals showed
as errors on the page. Now a refusal is a caption beside the tab's button until a run is asked for (the button or a
link): then it is the error."""

from __future__ import annotations

from tests.app.conftest import new_app, page_path

P = "attribution"
PATCH_BOXES = ("clean", "corrupted", "answer", "answer_x")


def _captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def _errors(at) -> list[str]:
    return [e.value for e in at.error]


def test_boxes_a_browser_mounted_empty_give_a_hint_and_an_error_only_once_a_run_is_asked(use_tiny_zoo):
    at = new_app()
    at.switch_page(page_path(P)).run()  # the page visit: the examples go to the browser with this run only
    assert not at.exception, at.exception
    boxes = [at.text_input(key=f"{P}.patch.{b}") for b in PATCH_BOXES] + [at.text_area(key=f"{P}.cf.text")]
    assert boxes[0].value == "The capital of France is [MASK]." and boxes[0].proto.set_value
    at.run()  # the next run (the browser never got the one before): the boxes come without their value ...
    boxes = [at.text_input(key=f"{P}.patch.{b}") for b in PATCH_BOXES] + [at.text_area(key=f"{P}.cf.text")]
    assert not any(b.proto.set_value for b in boxes) and {b.proto.default for b in boxes} == {""}
    for box in boxes:  # ... so the browser mounts them at their default, "", and sends that with its next rerun
        box.set_value(box.proto.default)
    at.run()
    assert not at.exception, at.exception
    assert not _errors(at), _errors(at)
    hints = _captions(at)
    assert "Patch would stop here: Patching needs a clean and a corrupted input: one of them is empty." in hints
    assert "Find counterfactuals would stop here: There is no text to edit" in hints
    at.button(key=f"{P}.patch.go").click().run()  # asked: now it is an error, and nothing runs
    assert _errors(at) == ["Patching needs a clean and a corrupted input: one of them is empty."]
    assert f"{P}.patch.job" not in at.session_state
    at.button(key=f"{P}.cf.go").click().run()
    assert [e for e in _errors(at) if "no text to edit" in e] and f"{P}.cf.job" not in at.session_state


def test_a_link_that_runs_an_empty_patching_still_says_why(use_tiny_zoo):
    """A link asks for the run as the button would: its refusal is the error, as before."""
    from streamlit.testing.v1 import AppTest

    from tests.app.conftest import MAIN

    at = AppTest.from_file(MAIN, default_timeout=120)
    at.query_params.update({f"{P}.tab": "patch", f"{P}.patch.clean": " "})
    at.switch_page(page_path(P)).run()
    assert not at.exception, at.exception
    assert "Patching needs a clean and a corrupted input: one of them is empty." in _errors(at)

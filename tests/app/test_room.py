"""The room in AppTest: sessions in one process share the in-process store, as the sessions of one server do.
A presenter starts a room; followers join with the code, follow the walkthrough, answer its poll, break away and
catch up; the room's sentences on Fill-mask; and the bad inputs (wrong code, closed room, a follower with a key,
HTML, a 10,000-character sentence, too many sentences)."""

from __future__ import annotations

import json

import pytest

from app.kit.render import as_text
from app.room import session as room_session
from app.room.joining import join_link, qr_svg
from core.runtime import room as R
from core.runtime.backend import store as room_store
from tests.app.conftest import click, open_page, page_path


def _presenter(page: str | None = None):
    at = open_page(None, params={"present": "1"})
    click(at, "Start a room")
    if page is not None:
        at.switch_page(page_path(page)).run()
        assert not at.exception, at.exception
    return at, at.session_state[room_session.CODE], at.session_state[room_session.KEY]


def _texts(at) -> str:
    parts = [
        e.value for kind in ("markdown", "info", "warning", "error", "success", "caption") for e in getattr(at, kind)
    ]
    return "\n".join(str(p) for p in parts)


def _poll_counts(at) -> list[int]:
    """The bars of the presenter's poll chart (the figure whose x axis counts answers)."""
    figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    poll = [f for f in figs if f["layout"].get("xaxis", {}).get("title", {}).get("text") == "Answers"]
    assert len(poll) == 1, [f["layout"].get("xaxis") for f in figs]
    return list(poll[0]["data"][0]["x"])


def _run(at):
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_room_follows_the_presenter_through_the_walkthrough_and_answers_its_poll(use_tiny_zoo):
    pres, code, key = _presenter("walkthrough")
    assert pres.query_params["room"] == code and pres.query_params["key"] == key
    assert f"You are presenting room **{code}** · **0** following" in _texts(pres)
    assert not pres.metric  # #46: no narrow metric column beside the link (its label was cut to "Follo…")
    assert join_link(code).endswith(f"/?room={code}") and key not in join_link(code)
    svg = qr_svg(join_link(code))
    assert svg.startswith("<svg") and "<script" not in svg.lower() and "onload" not in svg.lower()
    click(pres, "Next")
    click(pres, "Next")
    assert pres.radio(key="walkthrough.step").value == 3

    a = open_page(None, params={"room": code})
    b = open_page(None, params={"room": code})
    for f in (a, b):  # joined on Home, and the first poll took them to the presenter's page and step
        assert f.session_state[room_session.ROLE] == room_session.FOLLOWER and "key" not in f.query_params
        assert f.radio(key="walkthrough.step").value == 3
        assert f"Following the presenter in room {code}" in _texts(f)
    click(pres, "Next")
    for f in (a, b):  # already on that page: the newer step is restored there too
        assert _run(f).radio(key="walkthrough.step").value == 4

    # the poll: each follower's choice goes to the room; the presenter's chart counts them
    a.radio(key="walkthrough.q4").set_value(1).run()
    b.radio(key="walkthrough.q4").set_value(2).run()
    assert "Your answer went to the room" in _texts(a)
    assert not [btn for btn in a.button if btn.label.startswith("Reveal") or btn.label == "Show answer"]
    _run(pres)
    assert "The room's answers: 2 answered · 2 following" in _texts(pres)
    assert _poll_counts(pres) == [0, 1, 1]
    assert "Not quite" not in _texts(a) and not a.success  # not revealed yet
    click(pres, "Reveal the answer to everyone")
    assert "Hide the answer again" in [btn.label for btn in pres.button]
    _run(a)
    _run(b)
    assert [s.value for s in a.success] == ["Right!"]  # a chose the right option (1), b did not
    assert "Not quite" in _texts(b)

    # b breaks away: the presenter moves on, a follows, b stays; then b catches up
    click(b, "Break away")
    assert "On your own" in _texts(b)
    click(pres, "Next")
    assert _run(a).radio(key="walkthrough.step").value == 5
    assert _run(b).radio(key="walkthrough.step").value == 4
    _run(pres)
    assert room_store().view(code).following == 1
    click(b, "Catch up")
    assert _run(b).radio(key="walkthrough.step").value == 5 and "Following the presenter" in _texts(b)

    # a changes the step themself: they are on their own from then on, and the presenter's moves leave them be
    _run(a)  # (a follower's own change in the same poll as a presenter's change loses to the presenter's)
    a.radio(key="walkthrough.step").set_value(2).run()
    assert not a.session_state[room_session.FOLLOWING]
    click(pres, "Next")
    assert _run(a).radio(key="walkthrough.step").value == 2
    assert "You changed something yourself" in _texts(a) or "On your own" in _texts(a)

    # closing: followers keep their own session and see why; a late join is told the room closed
    click(pres, "Close the room")
    _run(a)
    assert "is closed: the presenter ended it" in _texts(a) and a.radio(key="walkthrough.step").value == 2
    late = open_page(None, params={"room": code})
    assert f"Room {code} is closed: the presenter closed it" in _texts(late)
    assert not late.session_state[room_session.CODE] if room_session.CODE in late.session_state else True
    click(a, "Leave the room")
    assert "room" not in a.query_params


def test_wrong_code_and_a_followers_try_at_the_presenters_controls(use_tiny_zoo):
    wrong = open_page(None, params={"room": "ZZZZ99"})
    assert "no room with the code 'ZZZZ99'" in _texts(wrong) and "room" not in wrong.query_params
    pres, code, key = _presenter("walkthrough")
    sneaky = open_page(None, params={"room": code, "key": key[:-2] + "xx"})
    assert "does not open the presenter's controls" in _texts(sneaky)
    assert sneaky.session_state[room_session.ROLE] == room_session.FOLLOWER and "key" not in sneaky.query_params
    assert not [b for b in sneaky.button if b.label in ("Close the room", "Reveal the answer to everyone")]
    with pytest.raises(R.NotPresenterError):
        room_store().reveal(code, key[:-2] + "xx", 1)
    # the presenter's own link (reloaded: a fresh session) gets the controls back
    again = open_page(None, params={"room": code, "key": key, "present": "1"})
    assert again.session_state[room_session.ROLE] == room_session.PRESENTER
    assert [b for b in again.button if b.label == "Close the room"]


def test_the_rooms_sentences_on_fill_mask(use_tiny_zoo, monkeypatch):
    pres, code, key = _presenter("fill_mask")
    f = open_page(None, params={"room": code})
    assert f.title[0].value == "Fill-mask" and "When the presenter asks for sentences" in _texts(f)
    pres.toggle(key="room.collect_toggle").set_value(True).run()
    _run(f)

    def send(text):
        f.text_input(key=room_session.SENTENCE).set_value(text)
        next(b for b in f.button if b.label == "Send to the room").click().run()
        assert not f.exception, f.exception
        return _texts(f)

    html = '<script>alert("x")</script><b>bold</b> The [MASK] is **here**.'
    assert "Sent:" in send(html)
    long = "y" * 9988 + " [MASK] here"
    assert len(long) == 10_000 and "10,000 characters; a room takes at most 280" in send(long)
    assert "has no [MASK]" in send("No mask in this one.")
    assert "Sent:" in send("Paris is the [MASK] of France.")
    assert "Sent:" in send("The cat sat on the [MASK].")
    assert "Slow down: at most 3 sentences every 30 s" in send("One too many [MASK].")

    _run(pres)
    shown = [m for m in pres.markdown if m.value == as_text(html.strip())]
    assert shown and not any(m.proto.allow_html for m in shown)  # as text: escaped, never HTML
    assert "Model: " in _texts(pres)  # each sentence with the model's top prediction
    subs = room_store().submissions(code, key)
    assert len(subs) == 3
    paris = next(s for s in subs if s.text.startswith("Paris"))
    pres.button(key=f"room.pick.{paris.id}").click().run()
    _run(f)
    assert f"Shown to everyone: {as_text(paris.text)}" in _texts(f)
    pres.button(key=f"room.hide.{paris.id}").click().run()
    assert not [m for m in pres.markdown if m.value == as_text(paris.text)]
    _run(f)
    assert "Shown to everyone" not in _texts(f)

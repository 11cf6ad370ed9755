"""What a room's presenter and followers see: the presenter's own messages (a closed room, a revealed poll), the
poll chart on a projector (full wrapped labels, bars with room, the right answer marked), and a follower's
sentence box above the page's output."""

from __future__ import annotations

import json

from app.kit.i18n import catalog
from app.room import polls
from app.room import session as room_session
from core.runtime import room as R
from tests.app.conftest import click, open_page, page_path


def _presenter(page: str):
    at = open_page(None, params={"present": "1"})
    click(at, "Start a room")
    at.switch_page(page_path(page)).run()
    assert not at.exception, at.exception
    return at, at.session_state[room_session.CODE]


def _texts(at) -> str:
    parts = [
        e.value for kind in ("markdown", "info", "warning", "error", "success", "caption") for e in getattr(at, kind)
    ]
    return "\n".join(str(p) for p in parts)


def _poll_figure(at) -> dict:
    figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    poll = [f for f in figs if f["layout"].get("xaxis", {}).get("title", {}).get("text") == "Answers"]
    assert len(poll) == 1
    return poll[0]


def test_the_presenter_reads_a_presenters_message_after_closing_the_room(use_tiny_zoo):
    pres, code = _presenter("walkthrough")
    click(pres, "Close the room")
    text = _texts(pres)
    assert f"You closed room {code}" in text
    assert "the presenter ended it" not in text and "Leave the room" not in [b.label for b in pres.button]
    click(pres, "Dismiss")  # and Start a room is back in the sidebar
    assert room_session.CODE not in pres.session_state and "Start a room" in [b.label for b in pres.sidebar.button]


def test_after_reveal_the_presenter_sees_the_answer_marked_not_you_did_not_pick(use_tiny_zoo):
    pres, code = _presenter("walkthrough")
    for _ in range(3):
        click(pres, "Next")
    assert pres.radio(key="walkthrough.step").value == 4
    f = open_page(None, params={"room": code})
    f.radio(key="walkthrough.q4").set_value(0).run()
    pres.run()
    assert _poll_figure(pres)["data"][0]["marker"]["color"] == [polls.BAR] * 3  # not revealed: unmarked
    click(pres, "Reveal the answer to everyone")
    text = _texts(pres)
    answer = catalog()["walkthrough.s4.opt1"]["en"]
    assert "You did not pick an option" not in text and "Not quite" not in text and "Right!" not in text
    assert f"The answer: **{answer}**" in text
    fig = _poll_figure(pres)
    bar = fig["data"][0]
    assert bar["marker"]["color"] == [polls.OTHER, polls.RIGHT, polls.OTHER]
    assert "<b>✓ No: its one" in fig["layout"]["yaxis"]["ticktext"][1]
    f.run()  # the follower who picked a wrong option still gets their own verdict
    assert "Not quite" in _texts(f)


def test_the_poll_chart_keeps_every_word_of_a_long_option_and_room_for_its_bars():
    options = [catalog()[f"walkthrough.s4.opt{j}"]["en"] for j in range(3)]
    tally = R.Tally(step=4, counts=(1, 2, 0))
    fig = polls.tally_chart(tally, options, correct=1)
    labels = fig.layout.yaxis.ticktext
    for label, option in zip(labels, options):
        text = label.removeprefix(f'<span style="color:{polls.RIGHT}"><b>✓ ').removesuffix("</b></span>")
        assert text.replace("<br>", " ") == option  # complete: "No: its one shared layer…" keeps its "No:"
        assert all(len(line) <= polls.WRAP for line in text.split("<br>"))  # wrapped: the labels leave the bars room
    assert "<br>" in labels[1] and "<b>✓ No:" in labels[1] and "✓" not in labels[0] + labels[2]
    assert fig.layout.yaxis.automargin and fig.layout.margin.l == 10
    assert list(fig.data[0].marker.color) == [polls.OTHER, polls.RIGHT, polls.OTHER]
    assert list(fig.data[0].customdata) == options  # the hover names the option in full
    lines = sum(label.count("<br>") + 1 for label in labels)
    assert fig.layout.height >= 90 + 18 * lines  # as tall as its wrapped labels
    unmarked = polls.tally_chart(tally, options)
    assert list(unmarked.data[0].marker.color) == [polls.BAR] * 3 and "✓" not in "".join(unmarked.layout.yaxis.ticktext)


def test_a_followers_sentence_box_comes_before_the_fill_mask_output(use_tiny_zoo):
    pres, code = _presenter("fill_mask")
    pres.toggle(key="room.collect_toggle").set_value(True).run()
    f = open_page(None, params={"room": code})
    assert f.title[0].value == "Fill-mask"
    send = next(b for b in f.main.button if b.label == "Send to the room")
    predict = next(b for b in f.main.button if b.label == "Predict")
    # the box is in the container under the follower's banner: before the page's title, form and output
    drawn = list(f.main)  # depth first: the order on the page
    where = {id(node): i for i, node in enumerate(drawn)}
    assert where[id(send)] < where[id(f.title[0])] < where[id(predict)]

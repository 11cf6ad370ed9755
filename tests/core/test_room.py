"""core/runtime/room.py and room_store.py: the room store (codes, keys, presenter state, polls, sentences, limits,
closing) and follow_step."""

from __future__ import annotations

import threading

import pytest

from core.runtime import room as R
from core.runtime.room_store import InProcessStore


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture()
def clock():
    return Clock()


@pytest.fixture()
def store(clock):
    return InProcessStore(
        R.RoomLimits(
            idle_s=600,
            closed_keep_s=300,
            presence_s=6,
            rate_n=3,
            rate_window_s=30,
            member_sentences=10,
            max_sentence_chars=280,
        ),
        clock=clock,
    )


def _room(store):
    made = store.create()
    store.join(made.code, "f1")
    return made


def test_codes_are_short_and_readable_and_keys_are_secret(store):
    made = store.create()
    assert len(made.code) == R.CODE_LEN and set(made.code) <= set(R.CODE_ALPHABET)
    assert made.key not in made.code and len(made.key) >= 16
    assert store.is_presenter(made.code, made.key)
    assert not store.is_presenter(made.code, "guess") and not store.is_presenter(made.code, None)
    assert made.key not in repr(store.view(made.code))  # the view members see never carries the key
    assert store.create().code != made.code


def test_a_wrong_code_is_refused_with_a_message(store):
    store.create()
    with pytest.raises(R.RoomError, match="no room with the code 'NOPE99'"):
        store.join("nope99", "f1")
    with pytest.raises(R.RoomError, match="no room"):
        store.view("")


def test_codes_are_read_as_typed(store):
    made = store.create()
    typed = made.code[:3].lower() + " - " + made.code[3:].lower()
    assert store.join(typed, "f1").code == made.code


def test_publish_bumps_the_version_only_on_a_change(store):
    made = _room(store)
    s1 = R.PresenterState.of(
        "walkthrough", {"walkthrough.step": "2", "room": made.code, "key": made.key, "lang": "en", "present": "1"}
    )
    assert s1.as_dict() == {"walkthrough.step": "2"}  # the room, the key, the language, presenter view stay out
    assert store.publish(made.code, made.key, s1) == 1
    assert store.publish(made.code, made.key, R.PresenterState.of("walkthrough", {"walkthrough.step": "2"})) == 1
    assert store.publish(made.code, made.key, R.PresenterState.of("walkthrough", {"walkthrough.step": "3"})) == 2
    assert store.view(made.code).state.as_dict() == {"walkthrough.step": "3"}


def test_presenter_controls_need_the_key(store):
    made = _room(store)
    state = R.PresenterState.of("home", {})
    calls = [
        lambda k: store.publish(made.code, k, state),
        lambda k: store.reveal(made.code, k, 1),
        lambda k: store.tally(made.code, k, 1, 3),
        lambda k: store.collect(made.code, k, True),
        lambda k: store.submissions(made.code, k),
        lambda k: store.pick(made.code, k, None),
        lambda k: store.close(made.code, k),
    ]
    for call in calls:
        for wrong in ("", "f1", made.key[:-1], None):
            with pytest.raises(R.NotPresenterError, match="Only the presenter"):
                call(wrong)
    assert store.view(made.code).open and store.view(made.code).state is None and not store.view(made.code).revealed


def test_polls_count_the_last_answer_of_each_member(store):
    made = _room(store)
    store.join(made.code, "f2")
    store.join(made.code, "f3")
    store.answer(made.code, "f1", 2, 0)
    store.answer(made.code, "f2", 2, 2)
    store.answer(made.code, "f3", 2, 2)
    store.answer(made.code, "f1", 2, 2)  # changed their mind
    store.answer(made.code, "f1", 3, 1)
    assert store.tally(made.code, made.key, 2, 3) == R.Tally(2, (0, 0, 3))
    assert store.tally(made.code, made.key, 3, 3).counts == (0, 1, 0)
    store.answer(made.code, "f3", 2, None)
    assert store.tally(made.code, made.key, 2, 3).answered == 2
    with pytest.raises(R.RoomError, match="Join room"):
        store.answer(made.code, "stranger", 2, 1)


def test_reveal_and_pick_bump_the_shared_version(store):
    made = _room(store)
    v0 = store.view(made.code).shared_version
    store.reveal(made.code, made.key, 2)
    store.reveal(made.code, made.key, 2)  # again: no change
    view = store.view(made.code)
    assert view.revealed == {2} and view.shared_version == v0 + 1
    store.reveal(made.code, made.key, 2, on=False)
    assert store.view(made.code).revealed == frozenset()


def test_following_count_and_presence(store, clock):
    made = _room(store)
    store.join(made.code, "f2")
    assert (store.view(made.code).following, store.view(made.code).members) == (2, 2)
    store.poll(made.code, "f2", following=False)
    assert (store.view(made.code).following, store.view(made.code).members) == (1, 2)
    clock.now += 5
    store.poll(made.code, "f1", following=True)
    clock.now += 3  # f2 last seen 8 s ago: gone
    assert (store.view(made.code).following, store.view(made.code).members) == (1, 1)


def test_sentences_are_kept_as_typed_and_the_presenter_hides_and_picks(store):
    made = _room(store)
    with pytest.raises(R.RoomError, match="not asking for sentences"):
        store.submit(made.code, "f1", "The [MASK] is blue.")
    store.collect(made.code, made.key, True)
    html = "<script>alert(1)</script> <b>bold</b> the [MASK] is **big**"
    a = store.submit(made.code, "f1", html)
    assert a.text == html  # stored as text: the app shows it as text
    b = store.submit(made.code, "f1", "Paris is the [MASK] of France.")
    assert [s.id for s in store.submissions(made.code, made.key)] == [a.id, b.id]
    store.pick(made.code, made.key, b.id)
    assert store.view(made.code).picked.text == "Paris is the [MASK] of France."
    store.hide(made.code, made.key, b.id)
    assert [s.id for s in store.submissions(made.code, made.key)] == [a.id]
    assert [s.id for s in store.submissions(made.code, made.key, hidden=True)] == [a.id, b.id]
    assert store.view(made.code).picked is None  # a hidden sentence is shown to nobody
    with pytest.raises(R.RoomError, match="hidden"):
        store.pick(made.code, made.key, b.id)
    with pytest.raises(R.RoomError, match="not in room"):
        store.hide(made.code, made.key, 999)


def test_a_10000_character_sentence_is_refused(store):
    made = _room(store)
    store.collect(made.code, made.key, True)
    with pytest.raises(R.RoomError, match="10,000 characters; a room takes at most 280"):
        store.submit(made.code, "f1", "x" * 9991 + " [MASK] .")
    with pytest.raises(R.RoomError, match="empty"):
        store.submit(made.code, "f1", "   ")
    assert store.submissions(made.code, made.key) == ()


def test_200_sentences_from_one_member_are_rate_limited(store, clock):
    made = _room(store)
    store.join(made.code, "f2")
    store.collect(made.code, made.key, True)
    accepted, refused = 0, []
    for i in range(200):
        try:
            store.submit(made.code, "f1", f"Sentence {i} has a [MASK].")
            accepted += 1
        except R.RateLimitError as e:
            refused.append(str(e))
    assert accepted == 3 and len(refused) == 197
    assert "at most 3 sentences every 30 s" in refused[0]
    store.submit(made.code, "f2", "Another member is not slowed by f1: [MASK].")
    clock.now += 31  # the window moved on
    store.submit(made.code, "f1", "Later, one more [MASK].")
    for _ in range(20):  # the per-member cap holds however slowly they send
        clock.now += 31
        try:
            store.submit(made.code, "f1", "Slow [MASK].")
        except R.RateLimitError as e:
            assert "the most one participant may send" in str(e)
            break
    else:
        pytest.fail("no per-member cap")
    assert sum(s.member == "f1" for s in store.submissions(made.code, made.key)) == 10


def test_closing_and_idle_timeout(store, clock):
    made = _room(store)
    store.close(made.code, made.key)
    view = store.view(made.code)
    assert not view.open and view.closed_reason == R.BY_PRESENTER
    with pytest.raises(R.RoomClosedError, match="closed: the presenter closed it"):
        store.join(made.code, "f9")
    with pytest.raises(R.RoomClosedError):
        store.submit(made.code, "f1", "Late [MASK].")

    idle = store.create()
    clock.now += 300
    store.publish(idle.code, idle.key, R.PresenterState.of("home", {}))  # presenter activity keeps it open
    clock.now += 500
    assert store.view(idle.code).open
    store.poll(idle.code, "f1", True)  # a follower's poll is not activity
    clock.now += 101
    view = store.view(idle.code)
    assert not view.open and view.closed_reason == R.BY_IDLE
    with pytest.raises(R.RoomClosedError, match="nothing happened in it for 10 minutes"):
        store.join(idle.code, "f2")
    clock.now += 301  # kept closed_keep_s, then evicted
    with pytest.raises(R.RoomError, match="no room"):
        store.view(idle.code)


def test_rooms_and_members_are_bounded(clock):
    small = InProcessStore(R.RoomLimits(max_rooms=2, max_members=2, presence_s=6), clock=clock)
    a = small.create()
    small.create()
    with pytest.raises(R.RoomError, match="2 rooms open"):
        small.create()
    small.join(a.code, "m1")
    small.join(a.code, "m2")
    with pytest.raises(R.RoomError, match="full"):
        small.join(a.code, "m3")
    clock.now += 10  # both gone: their places free up
    small.join(a.code, "m3")
    small.close(a.code, a.key)
    small.create()  # a closed room does not count


def test_limits_validate_and_read_the_environment(monkeypatch):
    with pytest.raises(ValueError, match="poll_s must be above 0"):
        R.RoomLimits(poll_s=0)
    with pytest.raises(ValueError, match="presence_s"):
        R.RoomLimits(poll_s=5, presence_s=2)
    monkeypatch.setenv("ENCODERLAB_ROOM_MAX_CHARS", "120")
    assert R.limits().max_sentence_chars == 120
    monkeypatch.setenv("ENCODERLAB_ROOM_POLL_S", "fast")
    with pytest.raises(ValueError, match="ENCODERLAB_ROOM_POLL_S"):
        R.limits()


def test_follow_step_decides_what_a_follower_does(store):
    made = _room(store)
    assert R.follow_step(store, made.code, "f1", (0, 0), True).action == R.STAY  # nothing published yet
    store.publish(made.code, made.key, R.PresenterState.of("fill-mask", {"fill_mask.text": "a [MASK]"}))
    step = R.follow_step(store, made.code, "f1", (0, 0), True)
    assert step.action == R.APPLY and step.view.state.page == "fill-mask"
    seen = (step.view.state_version, step.view.shared_version)
    assert R.follow_step(store, made.code, "f1", seen, True).action == R.STAY
    store.publish(made.code, made.key, R.PresenterState.of("walkthrough", {}))
    assert R.follow_step(store, made.code, "f1", seen, False).action == R.STAY  # broke away: not applied
    assert store.view(made.code).following == 0
    store.reveal(made.code, made.key, 1)
    assert R.follow_step(store, made.code, "f1", seen, False).action == R.REFRESH
    store.close(made.code, made.key)
    assert R.follow_step(store, made.code, "f1", seen, True).action == R.CLOSED


def test_diverged_compares_the_presenters_parameters():
    state = R.PresenterState.of("fill-mask", {"fill_mask.text": "a [MASK]", "family": "bert"})
    assert not R.diverged(
        state, "fill-mask", {"fill_mask.text": "a [MASK]", "family": "bert", "lang": "zh", "fill_mask.extra": "1"}
    )
    assert R.diverged(state, "fill-mask", {"fill_mask.text": "my own [MASK]", "family": "bert"})
    assert R.diverged(state, "attention", {"fill_mask.text": "a [MASK]", "family": "bert"})


def test_many_threads_share_one_store(store):
    made = _room(store)
    store.collect(made.code, made.key, True)
    members = [f"m{i}" for i in range(40)]
    for m in members:
        store.join(made.code, m)

    def work(m):
        for v in range(20):
            store.poll(made.code, m, True)
            store.answer(made.code, m, 1, v % 3)

    threads = [threading.Thread(target=work, args=(m,)) for m in members]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert store.tally(made.code, made.key, 1, 3).answered == 40
    assert store.view(made.code).following == 41  # f1 too

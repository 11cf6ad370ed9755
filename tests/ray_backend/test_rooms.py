"""Rooms on Ray: the presenter on this process, a follower on another process (another front-end); both reach the
named room actor, so the follower sees what the presenter publishes and the presenter counts the follower's answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.runtime.backend import store as room_store
from core.runtime.room import PresenterState, RoomClosedError, RoomError
from tests.ray_backend.conftest import RAY_TESTS

pytestmark = RAY_TESTS
ROOT = Path(__file__).resolve().parents[2]
FOLLOWER = """
import json, sys, time
from core.runtime import room as R
from core.runtime.backend import store as room_store
code = sys.argv[1]
rooms = room_store()
print(type(rooms).__name__, flush=True)
view = rooms.join(code, "follower-1")
seen = view.state_version
while True:  # wait for the presenter's next publish, as the page's poll does
    view = rooms.poll(code, "follower-1", True)
    if view.state_version > seen:
        break
    time.sleep(0.1)
rooms.answer(code, "follower-1", 3, 1)
print(json.dumps({"page": view.state.page, "params": view.state.as_dict(), "members": view.members}), flush=True)
try:
    rooms.join("ZZZZZZ", "follower-1")
except R.RoomError as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}), flush=True)
"""


@pytest.mark.timeout(300)
def test_presenter_and_follower_on_two_processes(ray_backend):
    rooms = room_store()
    assert type(rooms).__name__ == "RayRoomStore"  # what app/room calls (core.runtime.backend.store) is the backend's
    made = rooms.create()
    rooms.publish(made.code, made.key, PresenterState.of("fill_mask", {"text": "first"}))
    env = {
        **os.environ,
        "ENCODERLAB_BACKEND": "ray",
        "PYTHONPATH": str(ROOT),
        "ENCODERLAB_RAY_ADDRESS": ray_backend.address,
    }
    follower = subprocess.Popen(
        [sys.executable, "-c", FOLLOWER, made.code],
        env=env,
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert follower.stdout.readline().strip() == "RayRoomStore"
        end = time.time() + 120
        while rooms.view(made.code).members < 1:  # the follower has joined from its own process
            assert time.time() < end and follower.poll() is None, follower.stderr.read()[-3000:]
            time.sleep(0.1)
        rooms.publish(made.code, made.key, PresenterState.of("attention", {"text": "the cat sat", "layer": "2"}))
        got = json.loads(follower.stdout.readline())
        assert got["page"] == "attention" and got["params"]["text"] == "the cat sat" and got["members"] == 1
        err = json.loads(follower.stdout.readline())
        assert err["error"] == "RoomError" and "ZZZZZZ" in err["message"]  # the store's own error, not a Ray one
        assert follower.wait(60) == 0, follower.stderr.read()[-3000:]
    finally:
        if follower.poll() is None:
            follower.kill()
    assert rooms.tally(made.code, made.key, 3, 4).counts == (0, 1, 0, 0)
    with pytest.raises(RoomError):
        rooms.publish(made.code, "not-the-key", PresenterState.of("home", {}))
    rooms.close(made.code, made.key)
    with pytest.raises(RoomClosedError):
        rooms.join(made.code, "late")

"""Rooms on Ray: one named, detached actor holds the InProcessStore every front-end shares.

The presenter may be on one Streamlit process and each follower on another (a load balancer with sticky sessions
sends each browser to one front-end); they all reach the same actor by name. Its methods take and return the
store's plain frozen values, and the actor runs one call at a time, which does the in-process store's lock's job.
A RoomError raised in the actor reaches the page as itself (RoomClosedError, RateLimitError, ...), with its own
message. At the default poll interval that is one actor call per follower per second.
"""

from __future__ import annotations

from typing import Any

import ray
from ray.exceptions import RayActorError

from core.runtime.backend.base import outcome_error
from core.runtime.room import Created, PresenterState, RoomError, RoomStore, RoomView, Submission, Tally
from core.runtime.room_store import InProcessStore

ACTOR_NAME = "encoderlab-rooms"


@ray.remote(num_cpus=0)
class RoomActor:
    def __init__(self) -> None:
        self.store = InProcessStore()

    def call(self, method: str, args: tuple) -> tuple[str, Any]:
        try:
            return "ok", getattr(self.store, method)(*args)
        except RoomError as e:
            return "err", outcome_error(e)


def room_actor():
    """The deployment's room actor, created by the first front-end that asks. It lives on the head node (as Serve's
    controller does), so rooms outlive any front-end or worker that restarts."""
    return RoomActor.options(
        name=ACTOR_NAME, lifetime="detached", get_if_exists=True, resources={"node:__internal_head__": 0.001}
    ).remote()


class RayRoomStore(RoomStore):
    def __init__(self) -> None:
        self._actor = room_actor()

    def _c(self, method: str, *args: Any) -> Any:
        try:
            status, value = ray.get(self._actor.call.remote(method, args))
        except RayActorError:  # the head restarted: a fresh actor (its rooms are gone: the codes say so)
            self._actor = room_actor()
            status, value = ray.get(self._actor.call.remote(method, args))
        if status == "err":
            raise value
        return value

    def create(self) -> Created:
        return self._c("create")

    def view(self, code: str) -> RoomView:
        return self._c("view", code)

    def is_presenter(self, code: str, key: str | None) -> bool:
        return self._c("is_presenter", code, key)

    def join(self, code: str, member: str) -> RoomView:
        return self._c("join", code, member)

    def poll(self, code: str, member: str, following: bool) -> RoomView:
        return self._c("poll", code, member, following)

    def publish(self, code: str, key: str, state: PresenterState) -> int:
        return self._c("publish", code, key, state)

    def answer(self, code: str, member: str, step: int, choice: int | None) -> None:
        return self._c("answer", code, member, step, choice)

    def tally(self, code: str, key: str, step: int, n_options: int) -> Tally:
        return self._c("tally", code, key, step, n_options)

    def reveal(self, code: str, key: str, step: int, on: bool = True) -> None:
        return self._c("reveal", code, key, step, on)

    def collect(self, code: str, key: str, on: bool) -> None:
        return self._c("collect", code, key, on)

    def submit(self, code: str, member: str, text: str) -> Submission:
        return self._c("submit", code, member, text)

    def submissions(self, code: str, key: str, hidden: bool = False) -> tuple[Submission, ...]:
        return self._c("submissions", code, key, hidden)

    def hide(self, code: str, key: str, sid: int, hidden: bool = True) -> None:
        return self._c("hide", code, key, sid, hidden)

    def pick(self, code: str, key: str, sid: int | None) -> None:
        return self._c("pick", code, key, sid)

    def close(self, code: str, key: str) -> None:
        return self._c("close", code, key)

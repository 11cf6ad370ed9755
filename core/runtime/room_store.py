"""The in-process room store: rooms in this process's memory, behind the core.runtime.room.RoomStore interface."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from core.base.messages import msg
from core.runtime.room import (
    BY_IDLE,
    BY_PRESENTER,
    CODE_ALPHABET,
    CODE_LEN,
    Created,
    NotPresenterError,
    PresenterState,
    RateLimitError,
    RoomClosedError,
    RoomError,
    RoomLimits,
    RoomStore,
    RoomView,
    Submission,
    Tally,
    limits,
    normalize_code,
)


@dataclass
class _Member:
    seen: float
    following: bool = True
    sent: deque = field(default_factory=deque)  # monotonic times of the sentences in the rate window
    n_sent: int = 0


@dataclass
class _Room:
    code: str
    key_hash: bytes
    created: float
    last_active: float
    closed_reason: str | None = None
    closed_at: float = 0.0
    state: PresenterState | None = None
    state_version: int = 0
    shared_version: int = 0
    revealed: set = field(default_factory=set)
    collecting: bool = False
    picked: int | None = None
    answers: dict = field(default_factory=dict)  # step -> {member: choice}
    members: dict = field(default_factory=dict)  # member -> _Member
    subs: list = field(default_factory=list)  # Submission, oldest first
    next_sid: int = 1


def _hash(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class InProcessStore(RoomStore):
    """Rooms in this process's memory, behind one lock (every call is a few dict operations, so followers'
    polls never wait long on each other). ``clock``: monotonic seconds, replaceable in tests."""

    def __init__(self, room_limits: RoomLimits | None = None, clock: Callable[[], float] = time.monotonic):
        self.limits = room_limits or limits()
        self._clock = clock
        self._lock = threading.Lock()
        self._rooms: dict[str, _Room] = {}

    # -- helpers (called with the lock held)
    def _sweep(self, now: float) -> None:
        """Close rooms idle past idle_s; evict rooms closed longer than closed_keep_s."""
        lim = self.limits
        for code in list(self._rooms):
            r = self._rooms[code]
            if r.closed_reason is None and now - r.last_active > lim.idle_s:
                r.closed_reason, r.closed_at = BY_IDLE, now
            if r.closed_reason is not None and now - r.closed_at > lim.closed_keep_s:
                del self._rooms[code]

    def _room(self, code: str) -> _Room:
        now = self._clock()
        self._sweep(now)
        norm = normalize_code(code)
        r = self._rooms.get(norm)
        if r is None:
            raise RoomError(msg("room.no_such_room", code=norm or "(empty)"))
        return r

    def _open(self, code: str) -> _Room:
        r = self._room(code)
        if r.closed_reason is not None:
            why = (
                "the presenter closed it"
                if r.closed_reason == BY_PRESENTER
                else f"nothing happened in it for {self.limits.idle_s / 60:.0f} minutes"
            )
            raise RoomClosedError(msg("room.room_closed_your_own", code=r.code, why=why))
        return r

    def _presenter(self, code: str, key: str) -> _Room:
        r = self._open(code)
        if not (isinstance(key, str) and hmac.compare_digest(_hash(key), r.key_hash)):
            raise NotPresenterError(msg("room.only_presenter_room_can", code=r.code))
        r.last_active = self._clock()
        return r

    def _view(self, r: _Room, now: float) -> RoomView:
        present = [m for m in r.members.values() if now - m.seen <= self.limits.presence_s]
        picked = next((s for s in r.subs if s.id == r.picked and not s.hidden), None)
        return RoomView(
            code=r.code,
            open=r.closed_reason is None,
            closed_reason=r.closed_reason,
            state=r.state,
            state_version=r.state_version,
            shared_version=r.shared_version,
            revealed=frozenset(r.revealed),
            collecting=r.collecting,
            picked=picked,
            following=sum(m.following for m in present),
            members=len(present),
            idle_s=self.limits.idle_s,
        )

    # -- the interface
    def create(self) -> Created:
        with self._lock:
            now = self._clock()
            self._sweep(now)
            if sum(r.closed_reason is None for r in self._rooms.values()) >= self.limits.max_rooms:
                raise RoomError(msg("room.too_many_rooms", max_rooms=self.limits.max_rooms))
            while True:
                code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LEN))
                if code not in self._rooms:
                    break
            key = secrets.token_urlsafe(16)
            self._rooms[code] = _Room(code=code, key_hash=_hash(key), created=now, last_active=now)
            return Created(code, key)

    def view(self, code: str) -> RoomView:
        with self._lock:
            return self._view(self._room(code), self._clock())

    def is_presenter(self, code: str, key: str | None) -> bool:
        with self._lock:
            r = self._rooms.get(normalize_code(code))
            return r is not None and isinstance(key, str) and hmac.compare_digest(_hash(key), r.key_hash)

    def join(self, code: str, member: str) -> RoomView:
        with self._lock:
            r = self._open(code)
            now = self._clock()
            if member not in r.members:
                present = sum(now - m.seen <= self.limits.presence_s for m in r.members.values())
                if present >= self.limits.max_members:
                    raise RoomError(
                        msg("room.room_full_participants_ask", code=r.code, max_members=self.limits.max_members)
                    )
                # members gone for longer than presence_s make room for new ones (the dict stays bounded)
                for gone in [
                    k
                    for k, m in r.members.items()
                    if now - m.seen > self.limits.presence_s and len(r.members) >= self.limits.max_members
                ]:
                    del r.members[gone]
                r.members[member] = _Member(seen=now)
            else:
                r.members[member].seen = now
                r.members[member].following = True
            return self._view(r, now)

    def poll(self, code: str, member: str, following: bool) -> RoomView:
        with self._lock:
            r = self._room(code)
            now = self._clock()
            m = r.members.get(member)
            if m is not None:
                m.seen, m.following = now, bool(following)
            return self._view(r, now)

    def publish(self, code: str, key: str, state: PresenterState) -> int:
        with self._lock:
            r = self._presenter(code, key)
            if r.state != state:
                r.state = state
                r.state_version += 1
            return r.state_version

    def answer(self, code: str, member: str, step: int, choice: int | None) -> None:
        with self._lock:
            r = self._open(code)
            if member not in r.members:
                raise RoomError(msg("room.join_room_before_answering", code=r.code))
            votes = r.answers.setdefault(int(step), {})
            if choice is None:
                votes.pop(member, None)
            else:
                votes[member] = int(choice)
            r.last_active = self._clock()

    def tally(self, code: str, key: str, step: int, n_options: int) -> Tally:
        with self._lock:
            r = self._presenter(code, key)
            counts = [0] * n_options
            for choice in r.answers.get(int(step), {}).values():
                if 0 <= choice < n_options:
                    counts[choice] += 1
            return Tally(int(step), tuple(counts))

    def reveal(self, code: str, key: str, step: int, on: bool = True) -> None:
        with self._lock:
            r = self._presenter(code, key)
            before = set(r.revealed)
            (r.revealed.add if on else r.revealed.discard)(int(step))
            if r.revealed != before:
                r.shared_version += 1

    def collect(self, code: str, key: str, on: bool) -> None:
        with self._lock:
            r = self._presenter(code, key)
            if r.collecting != bool(on):
                r.collecting = bool(on)
                r.shared_version += 1

    def submit(self, code: str, member: str, text: str) -> Submission:
        lim = self.limits
        if not isinstance(text, str) or not text.strip():
            raise RoomError(msg("room.sentence_empty_type_sentence"))
        if len(text) > lim.max_sentence_chars:
            raise RoomError(
                msg("room.sentence_has_characters_room", n_text=len(text), max_sentence_chars=lim.max_sentence_chars)
            )
        with self._lock:
            r = self._open(code)
            now = self._clock()
            m = r.members.get(member)
            if m is None:
                raise RoomError(msg("room.join_room_before_sending", code=r.code))
            if not r.collecting:
                raise RoomError(msg("room.presenter_not_asking_sentences"))
            if m.n_sent >= lim.member_sentences:
                raise RateLimitError(msg("room.sentence_quota_reached", n_sent=m.n_sent))
            while m.sent and now - m.sent[0] > lim.rate_window_s:
                m.sent.popleft()
            if len(m.sent) >= lim.rate_n:
                wait = lim.rate_window_s - (now - m.sent[0])
                raise RateLimitError(
                    msg(
                        "room.slow_down_most_sentences",
                        rate_n=lim.rate_n,
                        rate_window_s=lim.rate_window_s,
                        wait_s=max(1, round(wait)),
                    )
                )
            if len(r.subs) >= lim.max_sentences:
                raise RoomError(msg("room.room_full_of_sentences", max_sentences=lim.max_sentences))
            sub = Submission(id=r.next_sid, member=member, text=text.strip(), at=time.time())
            r.next_sid += 1
            r.subs.append(sub)
            m.sent.append(now)
            m.n_sent += 1
            r.last_active = now
            return sub

    def submissions(self, code: str, key: str, hidden: bool = False) -> tuple[Submission, ...]:
        with self._lock:
            r = self._presenter(code, key)
            return tuple(s for s in r.subs if hidden or not s.hidden)

    def hide(self, code: str, key: str, sid: int, hidden: bool = True) -> None:
        with self._lock:
            r = self._presenter(code, key)
            for i, s in enumerate(r.subs):
                if s.id == sid:
                    r.subs[i] = Submission(s.id, s.member, s.text, s.at, hidden=bool(hidden))
                    if r.picked == sid:
                        r.shared_version += 1
                    return
            raise RoomError(msg("room.sentence_not_room", sid=sid, code=r.code))

    def pick(self, code: str, key: str, sid: int | None) -> None:
        with self._lock:
            r = self._presenter(code, key)
            if sid is not None and not any(s.id == sid and not s.hidden for s in r.subs):
                raise RoomError(msg("room.sentence_not_room_hidden", sid=sid, code=r.code))
            if r.picked != sid:
                r.picked = sid
                r.shared_version += 1

    def close(self, code: str, key: str) -> None:
        with self._lock:
            r = self._presenter(code, key)
            r.closed_reason, r.closed_at = BY_PRESENTER, self._clock()

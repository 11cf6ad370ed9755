"""The room: one presenter leads, followers' screens follow, and the room answers polls and sends sentences.

Everything a room shares lives in one store behind the ``RoomStore`` interface: the room itself (its code, the
hash of the presenter's secret, open or closed), the presenter's state (the page and its query parameters: every
page keeps its inputs in the URL, so that pair *is* the view), the poll answers, the revealed steps and the
room's sentences. The app (app/room/) only calls this interface; core.runtime.backend.store() gives the process's store
(in-process: core.runtime.room_store.InProcessStore; on Ray: core.runtime.backend.ray_rooms).

Followers poll: each poll is one ``follow_step`` call, which records that the follower is still there (and
whether they are following) and says what to do: nothing, apply the presenter's newer state, redraw (a poll was
revealed, a sentence picked), or stop (the room closed). bench/room.py drives the same function.

Secrets: joining needs only the code; every presenter action needs the presenter's key, which is in the
presenter's URL and never in the followers' link. The store keeps only a hash of it.

Bounds, each with its eviction rule (``RoomLimits``, read from the environment like core/base/settings.py):
rooms open at once (``max_rooms``; creating one more is refused), a room with no activity for ``idle_s`` closes
itself, a closed room is kept ``closed_keep_s`` (so a late follower is told "closed", not "no such room") and then
evicted; members per room, sentences per room, sentences per member, and a per-member rate limit.

Core never imports streamlit: the store is plain Python (a lock and dicts), usable from a notebook or a bench.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass

from core.base import settings
from core.base.messages import Problem, msg

ROOM_PARAM = "room"  # ?room=CODE: the followers' link
KEY_PARAM = "key"  # &key=SECRET: only in the presenter's own URL
# URL parameters that are the follower's own and never copied from the presenter: the room itself, the
# presenter's secret, the language (a follower may read 中文 while the presenter shows English), presenter view's
# projector fonts and pinned model, and app/nav.py's deep-link parameter.
NOT_SHARED = frozenset({ROOM_PARAM, KEY_PARAM, "lang", "present", "pin", "page"})
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read off a projector at the back of a room
CODE_LEN = 6

# follow_step's actions
STAY, APPLY, REFRESH, CLOSED = "stay", "apply", "refresh", "closed"
# why a room closed
BY_PRESENTER, BY_IDLE = "presenter", "idle"


class RoomError(Problem, ValueError):
    """A room call that cannot be done (wrong code, closed room, wrong key, a bad or too frequent sentence);
    the message says what happened and what to do."""


class RoomClosedError(RoomError):
    """The room exists but is closed (by the presenter, or after its idle time)."""


class NotPresenterError(RoomError):
    """A presenter action without the presenter's key."""


class RateLimitError(RoomError):
    """A member sent sentences faster than the room allows."""


# ---------------------------------------------------------------------------------------------- limits
@dataclass(frozen=True)
class RoomLimits:
    """How a room behaves; ``limits()`` reads them from the environment (ENCODERLAB_ROOM_*)."""

    poll_s: float = 1.0  # followers' poll interval (st.fragment(run_every=...)): the follow delay is at most this
    idle_s: float = 3600.0  # a room with no presenter action, answer or sentence for this long closes itself
    closed_keep_s: float = 3600.0  # a closed room is kept this long (late followers are told it closed), then evicted
    presence_s: float = 6.0  # a member not seen for this long no longer counts as in the room
    max_rooms: int = 200  # rooms open at once in this store
    max_members: int = 500  # members of one room
    max_sentence_chars: int = 280  # one sentence sent to the room
    max_sentences: int = 300  # sentences one room keeps (hidden ones included)
    member_sentences: int = 10  # sentences one member may send to one room
    rate_n: int = 3  # a member may send rate_n sentences ...
    rate_window_s: float = 30.0  # ... per this many seconds

    def __post_init__(self) -> None:
        for name in ("poll_s", "idle_s", "closed_keep_s", "presence_s", "rate_window_s"):
            if not getattr(self, name) > 0:
                raise ValueError(msg("room.roomlimits_must_above_got", name=name, value=getattr(self, name)))
        for name in ("max_rooms", "max_members", "max_sentence_chars", "max_sentences", "member_sentences", "rate_n"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(msg("room.roomlimits_must_whole_number", name=name, value=value))
        if self.presence_s < self.poll_s:
            raise ValueError(msg("room.roomlimits_presence_s_must", presence_s=self.presence_s, poll_s=self.poll_s))


def limits() -> RoomLimits:
    """The room limits as the environment gives them now. Raises ValueError naming a bad variable."""
    poll = settings.env_float("ENCODERLAB_ROOM_POLL_S", 1.0, lo=0.1)
    return RoomLimits(
        poll_s=poll,
        idle_s=settings.env_float("ENCODERLAB_ROOM_IDLE_S", 3600.0, lo=1.0),
        closed_keep_s=settings.env_float("ENCODERLAB_ROOM_CLOSED_KEEP_S", 3600.0, lo=1.0),
        presence_s=max(6.0, 4 * poll),
        max_rooms=settings.env_int("ENCODERLAB_ROOM_MAX_ROOMS", 200, lo=1),
        max_members=settings.env_int("ENCODERLAB_ROOM_MAX_MEMBERS", 500, lo=1),
        max_sentence_chars=settings.env_int("ENCODERLAB_ROOM_MAX_CHARS", 280, lo=1),
        max_sentences=settings.env_int("ENCODERLAB_ROOM_MAX_SENTENCES", 300, lo=1),
        member_sentences=settings.env_int("ENCODERLAB_ROOM_MEMBER_SENTENCES", 10, lo=1),
        rate_n=settings.env_int("ENCODERLAB_ROOM_RATE_N", 3, lo=1),
        rate_window_s=settings.env_float("ENCODERLAB_ROOM_RATE_WINDOW_S", 30.0, lo=0.1),
    )


# ---------------------------------------------------------------------------------------------- values
@dataclass(frozen=True)
class PresenterState:
    """What the presenter shows: the page (its url path in app/nav.py) and its shared query parameters."""

    page: str
    params: tuple[tuple[str, str], ...] = ()  # sorted (name, value) pairs, NOT_SHARED left out

    @classmethod
    def of(cls, page: str, params: Mapping[str, str]) -> PresenterState:
        return cls(page, tuple(sorted(shared_params(params).items())))

    def as_dict(self) -> dict[str, str]:
        return dict(self.params)


def shared_params(params: Mapping[str, str]) -> dict[str, str]:
    """``params`` without the parameters each participant keeps for themself (NOT_SHARED)."""
    return {str(k): str(v) for k, v in params.items() if k not in NOT_SHARED}


def diverged(state: PresenterState, page: str, params: Mapping[str, str]) -> bool:
    """True when a follower on ``page`` with ``params`` no longer shows ``state``: another page, or a shared
    parameter of the presenter's with another value (the follower changed an input). Parameters only the follower
    has are not counted: a page may add its defaults to the URL a run later than the presenter's did."""
    if page != state.page:
        return True
    return any(params.get(k) != v for k, v in state.params)


@dataclass(frozen=True)
class Created:
    code: str
    key: str  # the presenter's secret: goes into the presenter's URL only


@dataclass(frozen=True)
class Submission:
    id: int
    member: str
    text: str  # as sent: shown as text, never as Markdown or HTML
    at: float  # time.time() when it arrived
    hidden: bool = False


@dataclass(frozen=True)
class RoomView:
    """What every member sees of a room at one moment."""

    code: str
    open: bool
    closed_reason: str | None  # BY_PRESENTER or BY_IDLE once closed
    state: PresenterState | None  # None until the presenter's first run
    state_version: int  # bumps when the presenter's page or inputs change
    shared_version: int  # bumps when a poll is revealed, a sentence picked, sentences are asked for
    revealed: frozenset[int]  # walkthrough steps whose answer the presenter revealed
    collecting: bool  # the presenter asks the room for sentences
    picked: Submission | None  # the sentence the presenter shows to everyone
    following: int  # members seen in the last presence_s who follow
    members: int  # members seen in the last presence_s
    idle_s: float  # the room's idle timeout


@dataclass(frozen=True)
class Tally:
    """A poll's answers: ``counts[j]`` members chose option j."""

    step: int
    counts: tuple[int, ...]

    @property
    def answered(self) -> int:
        return sum(self.counts)


@dataclass(frozen=True)
class FollowStep:
    """What a follower's poll found: ``action`` is STAY, APPLY (show ``view.state``), REFRESH or CLOSED."""

    action: str
    view: RoomView


# ---------------------------------------------------------------------------------------------- the interface
class RoomStore(ABC):
    """Where rooms live. In-process by default (``InProcessStore``); every method takes and returns plain values,
    so a store in another process can stand behind the same interface (see ``store()``)."""

    @abstractmethod
    def create(self) -> Created:
        """A new open room with a fresh code and presenter key. Raises RoomError when too many rooms are open."""

    @abstractmethod
    def view(self, code: str) -> RoomView:
        """The room as members see it. Raises RoomError for an unknown code (a closed room is returned, not raised)."""

    @abstractmethod
    def is_presenter(self, code: str, key: str | None) -> bool:
        """Whether ``key`` is the presenter's key of room ``code`` (False for an unknown room)."""

    @abstractmethod
    def join(self, code: str, member: str) -> RoomView:
        """Add ``member`` (following). Raises RoomError for a wrong code, RoomClosedError for a closed room."""

    @abstractmethod
    def poll(self, code: str, member: str, following: bool) -> RoomView:
        """A follower's poll: mark ``member`` as present (and following or not) and return the room."""

    @abstractmethod
    def publish(self, code: str, key: str, state: PresenterState) -> int:
        """Set the presenter's state; returns the state version (bumped only when the state changed)."""

    @abstractmethod
    def answer(self, code: str, member: str, step: int, choice: int | None) -> None:
        """Record (or with None, withdraw) ``member``'s answer to step ``step``'s poll; the last answer counts."""

    @abstractmethod
    def tally(self, code: str, key: str, step: int, n_options: int) -> Tally:
        """The answers to step ``step``'s poll (presenter only)."""

    @abstractmethod
    def reveal(self, code: str, key: str, step: int, on: bool = True) -> None:
        """Reveal step ``step``'s answer to everyone (or hide it again)."""

    @abstractmethod
    def collect(self, code: str, key: str, on: bool) -> None:
        """Ask the room for sentences (or stop asking)."""

    @abstractmethod
    def submit(self, code: str, member: str, text: str) -> Submission:
        """Add a member's sentence. Raises RoomError (empty, too long, room full), RateLimitError (too many)."""

    @abstractmethod
    def submissions(self, code: str, key: str, hidden: bool = False) -> tuple[Submission, ...]:
        """The room's sentences, oldest first (presenter only); hidden ones only when ``hidden``."""

    @abstractmethod
    def hide(self, code: str, key: str, sid: int, hidden: bool = True) -> None:
        """Hide a sentence from the list (and from everyone's screen when it was the picked one)."""

    @abstractmethod
    def pick(self, code: str, key: str, sid: int | None) -> None:
        """Show sentence ``sid`` to everyone (None: show none)."""

    @abstractmethod
    def close(self, code: str, key: str) -> None:
        """Close the room; members keep their own sessions."""


def normalize_code(code: str | None) -> str:
    """A code as typed: spaces and dashes dropped, upper case ("abc 123" -> "ABC123")."""
    return "".join(ch for ch in str(code or "") if ch not in " -\t").upper()


# ---------------------------------------------------------------------------------------------- the follow path
def follow_step(rooms: RoomStore, code: str, member: str, seen: tuple[int, int], following: bool) -> FollowStep:
    """One follower poll (what the follower's st.fragment(run_every=...) runs each ``poll_s``): tell the store the
    member is here, and decide. ``seen``: the (state_version, shared_version) this follower shows.

    APPLY when following and the presenter's state is newer than ``seen``; REFRESH when a poll was revealed or a
    sentence picked (a redraw, the follower's inputs stay); CLOSED once the room closed; else STAY.
    Raises RoomError when the room no longer exists (evicted)."""
    view = rooms.poll(code, member, following)
    if not view.open:
        return FollowStep(CLOSED, view)
    if following and view.state is not None and view.state_version != seen[0]:
        return FollowStep(APPLY, view)
    if view.shared_version != seen[1]:
        return FollowStep(REFRESH, view)
    return FollowStep(STAY, view)

"""The hosted demo's limits under a scripted burst (#34 §4): a session submitting jobs in a tight loop, an upload
over the limit sent by many at once, a room member sending sentences as fast as it can. Each limit holds for the
session that pushes it, and another session still gets its share. Real components: the JobRunner with real jobs,
the upload readers, the in-process room store."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from core.base import settings
from core.base.uploads import UploadError, read_upload
from core.data.datasets_local import DataError, read_table
from core.data.token_data import read_tokens
from core.represent.corpus_index import CorpusIndexError, sentences_from_upload
from core.represent.probe_tasks import corpus_from_upload
from core.runtime.jobs import CANCELLED, QUEUED, RUNNING, JobRunner, QuotaError
from core.runtime.room import RateLimitError, RoomError, limits
from core.runtime.room_store import InProcessStore

THREADS = 8


@pytest.fixture()
def hosted(monkeypatch):
    """The hosted demo's settings, with none of its limits overridden."""
    monkeypatch.setenv("ENCODERLAB_HOSTED", "1")
    for name in ("SESSION_RUNNING", "SESSION_QUEUED", "MAX_UPLOAD_MB", "ROOM_RATE_N", "ROOM_RATE_WINDOW_S"):
        monkeypatch.delenv(f"ENCODERLAB_{name}", raising=False)
    return settings.current()


def _until_cancelled(ctx):
    """A training-like job: works in small steps until Cancel."""
    while True:
        ctx.check_cancelled()
        time.sleep(0.01)


def _burst(fn, n: int) -> list:
    """``fn()`` called ``n`` times from THREADS threads released together; each call's result or exception."""
    start = threading.Barrier(THREADS)

    def one(_):
        try:
            return fn()
        except Exception as e:  # what the burst is about: which calls were refused, and how
            return e

    def worker(k):
        start.wait()
        return [one(i) for i in range(k, n, THREADS)]

    with ThreadPoolExecutor(THREADS) as pool:
        return [r for rs in pool.map(worker, range(THREADS)) for r in rs]


def test_a_session_bursting_jobs_gets_its_queue_length_and_another_session_still_gets_in(hosted):
    cap = hosted.session_running + hosted.session_queued  # 1 running + 2 waiting on the hosted demo
    r = JobRunner({"cpu": 2}, workers=False)
    try:
        got = _burst(lambda: r.submit("burst", _until_cancelled, owner="a"), 40)
        taken = [j for j in got if not isinstance(j, Exception)]
        refused = [e for e in got if isinstance(e, Exception)]
        assert len(taken) == cap and len(refused) == 40 - cap, f"{len(taken)} of 40 jobs taken, quota {cap}"
        assert all(isinstance(e, QuotaError) for e in refused), {type(e) for e in refused}
        assert "Wait for one to finish or cancel one" in str(refused[0])
        assert sum(j.status == RUNNING for j in taken) == hosted.session_running
        assert sum(j.status == QUEUED for j in taken) == hosted.session_queued
        theirs = [r.submit(f"b{i}", _until_cancelled, owner="b") for i in range(cap)]  # not held by a's burst
        deadline = time.time() + 10
        while theirs[0].status != RUNNING and time.time() < deadline:  # the runner's second CPU slot
            time.sleep(0.01)
        assert theirs[0].status == RUNNING, "another session's job waited behind a's burst"
        with pytest.raises(QuotaError):
            r.submit("b over", _until_cancelled, owner="b")
    finally:
        for owner in ("a", "b"):
            r.cancel_owner(owner, running=True)
    for j in r.jobs():
        assert r.wait(j, timeout=30).status == CANCELLED


def test_an_upload_over_the_hosted_limit_is_refused_by_every_reader_under_a_burst(hosted):
    limit = hosted.max_upload_mb
    assert limit == 5.0
    over = b"a sentence\n" * int(limit * 2**20 // 11 + 1)  # just over 5 MiB of text
    assert len(over) > limit * 2**20
    readers = {
        "upload box": (lambda: read_upload(over, "big.txt"), UploadError),
        "fine-tune table": (lambda: read_table(over, "big.csv"), DataError),
        "fine-tune tokens": (lambda: read_tokens(over, "big.conll"), DataError),
        "corpus search": (lambda: sentences_from_upload(over, "big.txt"), CorpusIndexError),
        "probes": (lambda: corpus_from_upload(over, "big.txt"), ValueError),
    }
    for name, (read, error) in readers.items():
        got = _burst(read, THREADS * 2)
        assert all(isinstance(e, error) for e in got), f"{name}: {[type(e).__name__ for e in got]}"
        assert all("uploads up to 5 MB" in str(e) for e in got), f"{name}: {got[0]}"
    assert read_upload(b"a sentence\n" * 1000, "small.txt")  # a file under the limit is read


def test_a_room_member_bursting_sentences_gets_the_rooms_rate_and_another_member_is_not_held(hosted):
    now = [1000.0]
    lim = limits()
    store = InProcessStore(lim, clock=lambda: now[0])
    room = store.create()
    for member in ("fast", "calm"):
        store.join(room.code, member)
    store.collect(room.code, room.key, True)
    got = _burst(lambda: store.submit(room.code, "fast", "one more sentence"), 40)
    sent = [s for s in got if not isinstance(s, Exception)]
    refused = [e for e in got if isinstance(e, Exception)]
    assert len(sent) == lim.rate_n, f"{len(sent)} sentences in {lim.rate_window_s:.0f} s, the room allows {lim.rate_n}"
    assert all(isinstance(e, RateLimitError) for e in refused) and "Slow down" in str(refused[0])
    calm = [store.submit(room.code, "calm", f"my sentence {i}") for i in range(lim.rate_n)]  # not held by "fast"
    assert len({s.id for s in calm}) == lim.rate_n
    with pytest.raises(RateLimitError):
        store.submit(room.code, "calm", "one too many")
    now[0] += lim.rate_window_s + 1  # the window has passed: "fast" may send again, up to its room quota
    total = len(sent)
    while total < lim.member_sentences:
        got = _burst(lambda: store.submit(room.code, "fast", "again"), 20)
        total += sum(not isinstance(s, Exception) for s in got)
        now[0] += lim.rate_window_s + 1
    assert total == lim.member_sentences
    with pytest.raises(RoomError, match="the most one participant may send"):
        store.submit(room.code, "fast", "past the quota")
    assert len(store.submissions(room.code, room.key)) == lim.member_sentences + lim.rate_n

"""Walk findings (tag "start"): the Hub check on a machine with no network, and warm latencies in Compare models."""
from __future__ import annotations

import logging
import socket
import threading
from dataclasses import dataclass

import pytest

from core.models import downloads
from core.predict import fill_mask as fm


@pytest.fixture()
def thread_errors(monkeypatch):
    """Exceptions that reached threading.excepthook (what printed a socket.gaierror traceback per Hub check)."""
    seen: list = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.exc_type))
    return seen


def test_unresolvable_hub_is_one_quiet_false(monkeypatch, thread_errors, caplog):
    def no_dns(*a, **k):
        raise socket.gaierror(-3, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")
    with caplog.at_level(logging.DEBUG, logger=downloads.__name__):
        assert downloads.reachable(timeout=30) is False  # the helper thread ends at once: no wait for the timeout
        assert downloads.hub_reachable(timeout=30) is False
    for th in threading.enumerate():  # any resolver thread still running has finished before we look
        if th.name == "hub-reachable":
            th.join(5)
    assert thread_errors == []  # caught where it happens, not a thread's traceback
    assert all(r.levelno <= logging.DEBUG for r in caplog.records) and len(caplog.records) <= 2  # one line a check


def test_reachability_is_asked_once_per_while(monkeypatch):
    asked: list = []
    monkeypatch.setattr(downloads, "reachable", lambda *a, **k: asked.append(1) or False)
    downloads.forget_reachability()
    try:
        assert downloads.hub_reachable_recently() is False and downloads.hub_reachable_recently() is False
        assert len(asked) == 1  # remembered: the sidebar does not connect on every script run
        assert not downloads.can_have_now("Hub download")  # downloads allowed is not enough without a Hub
        assert not downloads.can_have_now("unavailable")
        assert all(downloads.can_have_now(s) for s in ("bundled", "local folder", "HF cache"))
        assert len(asked) == 1  # what is here already needs no network check
        downloads.forget_reachability()
        monkeypatch.setattr(downloads, "reachable", lambda *a, **k: asked.append(1) or True)
        assert downloads.can_have_now("Hub download") and len(asked) == 2
    finally:
        downloads.forget_reachability()


@dataclass(frozen=True)
class _Res:
    checkpoint: str
    latency_ms: float


def _fake_models(monkeypatch, times: dict[str, list[float]]):
    """fill_mask replaced by a stub answering each model's latencies in turn; returns the calls made."""
    calls: list[str] = []

    def fake(m, cfg):
        calls.append(m)
        return _Res(m, times[m][sum(c == m for c in calls) - 1])

    monkeypatch.setattr(fm, "fill_mask", fake)
    monkeypatch.setattr(fm, "check_mlm", lambda m: None)
    return calls


def test_compare_times_warm_calls_and_keeps_the_first_apart(monkeypatch):
    # a cold first call of 76.5 ms, then warm calls with one slow outlier: the median of the warm calls is shown
    calls = _fake_models(monkeypatch, {"a": [76.5, 8.0, 40.0, 8.4], "b": [9.0, 5.0, 6.0, 7.0]})
    res = fm.compare(["a", "b"], fm.FillMaskConfig("The [MASK] is here."), repeats=3)
    assert calls == ["a"] * 4 + ["b"] * 4  # one warm-up, then three timed, per model
    assert [r.latency_ms for r in res.results] == [8.4, 6.0]  # the warm-up's 76.5 and 9.0 are not in the median
    assert res.first_ms == (76.5, 9.0) and res.repeats == 3
    assert [r.checkpoint for r in res.results] == ["a", "b"]


def test_compare_without_warmup_times_every_call(monkeypatch):
    calls = _fake_models(monkeypatch, {"a": [3.0, 1.0], "b": [2.0, 4.0]})
    res = fm.compare(["a", "b"], fm.FillMaskConfig("The [MASK] is here."), warmup=False, repeats=2)
    assert len(calls) == 4 and res.first_ms == () and [r.latency_ms for r in res.results] == [2.0, 3.0]

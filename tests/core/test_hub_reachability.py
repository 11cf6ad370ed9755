"""core.models.downloads asks the Hub quietly: with no DNS the check is one quiet False with no thread traceback,
and the answer is remembered for a while (hub_reachable_recently, can_have_now)."""

from __future__ import annotations

import logging
import socket
import threading

import pytest

from core.models import downloads


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

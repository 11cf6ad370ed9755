"""app/kit/patching_work: a (model, config) pair is computed once in the process, concurrent asks wait for it, a
cancelled or failed run leaves nothing behind, and a waiting ask still stops on Cancel."""

from __future__ import annotations

import threading
import time

import pytest

from app.kit import patching_work as pw
from core.inspect.patching import PatchConfig
from core.models.loading import ModelSpec, load


@pytest.fixture()
def lm(tiny_models):
    pw.forget_all()
    yield load(ModelSpec("bert", str(tiny_models["bert"]), "cpu"), "mlm")
    pw.forget_all()


def cfg(lm, word: str = "cat") -> PatchConfig:
    mask = lm.tokenizer.mask_token
    return PatchConfig(f"the {word} sat on the {mask} .", f"the mat sat on the {mask} .", kinds=("resid",))


def counting(monkeypatch, delay: float = 0.0) -> list:
    calls = []
    real = pw.patch

    def counted(lm, cfg, progress=None):
        calls.append(cfg)
        time.sleep(delay)
        return real(lm, cfg, progress=progress)

    monkeypatch.setattr(pw, "patch", counted)
    return calls


def test_the_same_pair_is_computed_once(lm, monkeypatch):
    calls = counting(monkeypatch)
    said = []
    first = pw.patch_once(lm, cfg(lm), lambda f, m: said.append(m))
    again = pw.patch_once(lm, cfg(lm), lambda f, m: said.append(m))
    assert again is first and len(calls) == 1 and said[-1].kind == "progress.patching.shared"
    other = pw.patch_once(lm, cfg(lm, "dog"), lambda f, m: None)  # another config: computed
    assert other is not first and len(calls) == 2


def test_concurrent_asks_wait_for_the_first(lm, monkeypatch):
    calls = counting(monkeypatch, delay=1.0)
    out = []
    threads = [
        threading.Thread(target=lambda: out.append(pw.patch_once(lm, cfg(lm), lambda f, m: None))) for _ in range(4)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(calls) == 1 and len(out) == 4 and all(r is out[0] for r in out)


class Cancelled(Exception):
    pass


def test_a_cancelled_run_leaves_nothing_and_a_waiter_stops_on_cancel(lm, monkeypatch):
    calls = counting(monkeypatch, delay=1.5)

    def cancel(_f, _m):
        raise Cancelled

    started = threading.Event()

    def slow_first():
        started.set()
        pw.patch_once(lm, cfg(lm), lambda f, m: None)

    th = threading.Thread(target=slow_first)
    th.start()
    started.wait()
    time.sleep(0.2)  # the first holds the pair's lock
    with pytest.raises(Cancelled):  # a waiting ask reports progress while it waits: Cancel stops it
        pw.patch_once(lm, cfg(lm), cancel)
    th.join()
    assert len(calls) == 1
    with pytest.raises(Cancelled):  # cancelled during its own run: nothing kept for that config
        pw.patch_once(lm, cfg(lm, "dog"), cancel)
    pw.patch_once(lm, cfg(lm, "dog"), lambda f, m: None)
    assert len(calls) == 3

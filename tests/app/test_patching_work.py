"""app/kit/patching_work: a (model, config) pair is computed once in the process, concurrent asks wait for it, a
cancelled or failed run leaves nothing behind, and a waiting ask still stops on Cancel."""

from __future__ import annotations

import threading

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


def counting(monkeypatch, hold: threading.Event | None = None, inside: threading.Event | None = None) -> list:
    """Count the computations; each, once inside (``inside`` set), waits for ``hold`` before computing."""
    calls = []
    real = pw.patch

    def counted(lm, cfg, progress=None):
        calls.append(cfg)
        if inside is not None:
            inside.set()
        if hold is not None:
            assert hold.wait(60)
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
    hold, inside = threading.Event(), threading.Event()
    calls = counting(monkeypatch, hold, inside)
    out = []
    threads = [
        threading.Thread(target=lambda: out.append(pw.patch_once(lm, cfg(lm), lambda f, m: None))) for _ in range(4)
    ]
    for th in threads:
        th.start()
    assert inside.wait(60)
    hold.set()  # the first computes while the other three wait on its lock
    for th in threads:
        th.join()
    assert len(calls) == 1 and len(out) == 4 and all(r is out[0] for r in out)
    assert pw.running_entries() == 0


class Cancelled(Exception):
    pass


def test_a_cancelled_run_leaves_nothing_and_a_waiter_stops_on_cancel(lm, monkeypatch):
    hold, inside = threading.Event(), threading.Event()
    calls = counting(monkeypatch, hold, inside)

    def cancel(_f, _m):
        raise Cancelled

    th = threading.Thread(target=lambda: pw.patch_once(lm, cfg(lm), lambda f, m: None))
    th.start()
    assert inside.wait(60)  # the first holds the pair's lock
    with pytest.raises(Cancelled):  # a waiting ask reports progress while it waits: Cancel stops it
        pw.patch_once(lm, cfg(lm), cancel)
    hold.set()
    th.join()
    assert len(calls) == 1
    with pytest.raises(Cancelled):  # cancelled during its own run: nothing kept for that config
        pw.patch_once(lm, cfg(lm, "dog"), cancel)
    pw.patch_once(lm, cfg(lm, "dog"), lambda f, m: None)
    assert len(calls) == 3 and pw.running_entries() == 0

"""core.predict.fill_mask.compare times warm calls: one warm-up per model kept apart (first_ms), the median of the
warm calls shown; without warm-up every call is timed."""

from __future__ import annotations

from dataclasses import dataclass

from core.predict import fill_mask as fm


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

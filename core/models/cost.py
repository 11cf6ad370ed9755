"""A model's cost in one place: what a run asks of the model (forwards, backwards, calls) and what that takes in
seconds on this model and device, from two timed plain forwards (a line: a fixed cost per call plus a cost per row).
Every estimate shown before a run starts prices its model work here: Attributions (core.inspect.attribution_estimate)
and Layer probes (core.represent.probes)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cost:
    """What one run of a method costs for an input of ``seq`` tokens: examples through the model forwards and
    backwards, and the forward calls (batches) captum makes, which are the progress ticks."""

    forwards: int
    backwards: int
    calls: int


# A backward pass costs about this many forwards. The textbook figure is 2 (gradients of activations and of
# weights); measured on encoderlab/bert-mini (CPU, 15 tokens) forward+backward took 2.2x a forward at 50 rows and
# 2.6x at 1 row, so 1.5.
BACKWARD_FACTOR = 1.5


@dataclass(frozen=True)
class ForwardTiming:
    """Two timed plain forwards of one input (``seq`` tokens) on one model: one row took ``one_s`` seconds and
    ``rows`` rows (one batch) ``rows_s``. A forward call of n rows is taken to cost a + b·n, the line through those
    two points (a: the call's fixed overhead, b: per row)."""

    seq: int
    rows: int
    one_s: float
    rows_s: float

    @classmethod
    def per_row(cls, seconds: float) -> ForwardTiming:
        """A line with no per-call overhead: ``seconds`` for every row (what a timed batch divided by its rows
        gives)."""
        return cls(seq=0, rows=2, one_s=seconds, rows_s=2 * seconds)

    def per_call_and_row(self) -> tuple[float, float]:
        if self.rows <= 1:
            return 0.0, self.one_s
        b = max(0.0, (self.rows_s - self.one_s) / (self.rows - 1))
        return max(0.0, self.one_s - b), b

    def seconds(self, cost: Cost) -> float:
        """Seconds for ``cost``: its calls' overhead plus its rows, with each backward counted BACKWARD_FACTOR
        forwards (a method's backwards run over the same rows as its forwards)."""
        a, b = self.per_call_and_row()
        forward_s = cost.calls * a + cost.forwards * b
        return forward_s * (1.0 + BACKWARD_FACTOR * cost.backwards / max(cost.forwards, 1))

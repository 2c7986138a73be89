"""Training diagnostics that layers publish from inside the training step.

A layer calls `record(name, value, reduction)` during its forward pass; the
trainer's step opens `recording()` around the forward pass and returns the
recorded scalars with the loss, and the training loop writes them to
TensorBoard (`logs/train/`, under `diagnostics/`). Outside `recording()`
(evaluation, export, eager use) `record` does nothing and costs nothing.

The reduction says how the values of the steps between two log lines are
summarised, so a single-step event (a routing denominator crossing zero, a
gradient spike) is not lost between log steps: "min", "max" or "mean".

The recorder is per thread: under a `MirroredStrategy` each replica runs
its forward pass in its own thread and records its own values (the trainer
averages them over the replicas).
"""

import contextlib
import threading

REDUCTIONS = ("min", "max", "mean")

_state = threading.local()


@contextlib.contextmanager
def recording():
    """Collects what `record` is given inside the block.

    Yields:
      A dict {name: (scalar tensor, reduction)}, filled as layers record.
    """
    previous = getattr(_state, "scalars", None)
    _state.scalars = scalars = {}
    try:
        yield scalars
    finally:
        _state.scalars = previous


def record(name, value, reduction):
    """Publishes the scalar `value` under `name` when recording.

    Args:
      name: TensorBoard tag, e.g. "rcn/pass_1/alpha_max".
      value: a float scalar tensor of the current forward pass.
      reduction: "min", "max" or "mean": how values of consecutive steps are
        summarised between log steps.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    scalars = getattr(_state, "scalars", None)
    if scalars is not None:
        scalars[name] = (value, reduction)


class WindowSummary:
    """Summarises per-step scalars over a logging window by their reductions."""

    def __init__(self):
        self._values = {}
        self._reductions = {}

    def add(self, scalars):
        """scalars: {name: (float, reduction)} of one step."""
        for name, (value, reduction) in scalars.items():
            self._values.setdefault(name, []).append(value)
            self._reductions[name] = reduction

    def flush(self):
        """The window's summary {name: float}; starts a new window."""
        summary = {}
        for name, values in self._values.items():
            reduction = self._reductions[name]
            summary[name] = min(values) if reduction == "min" else max(values) if reduction == "max" else sum(values) / len(values)
        self._values = {}
        return summary

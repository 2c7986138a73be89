"""The pace of a training run: how long it will take, from the steps timed so far."""

import logging
import statistics
import time

from common.wording import duration

log = logging.getLogger("train")


class RunPace:
    """The pace of a run, from the steps this process timed.

    A process's first `WARMUP_STEPS` steps are not timed: the first traces
    the train step, the next ones retrace it for new batch shapes and warm
    its caches, and each can take many times a steady step. After
    `ESTIMATE_STEPS` more, it logs once what the whole run will take at
    their median pace (a median, so a late retrace among them does not
    move it), and `advice` (the quick preset's command) when that is over
    an hour. `left` then goes on at the mean pace since the warm-up,
    validations and checkpoints included once some happened.

    Args:
      total_steps: the run's steps at most (every phase's every epoch).
      advice: what to say when the run would take over an hour, or None.
    """

    WARMUP_STEPS = 10
    ESTIMATE_STEPS = 20

    def __init__(self, total_steps, advice=None):
        self.total_steps = total_steps
        self.advice = advice
        self.ticks = 0  # the steps this process has done
        self.previous = None  # the time of the last tick
        self.steady = None  # (step, time) at the end of the warm-up
        self.durations = []  # the timed steps' seconds, until the estimate
        self.seconds_per_step = None

    def tick(self, step):
        now = time.monotonic()
        self.ticks += 1
        previous, self.previous = self.previous, now
        if self.ticks <= self.WARMUP_STEPS:
            if self.ticks == self.WARMUP_STEPS:
                self.steady = (step, now)
            return
        self.seconds_per_step = (now - self.steady[1]) / (step - self.steady[0])
        if len(self.durations) < self.ESTIMATE_STEPS:
            self.durations.append(now - previous)
            if len(self.durations) == self.ESTIMATE_STEPS:
                self._estimate(step)

    def _estimate(self, step):
        pace = statistics.median(self.durations)
        total = pace * (self.total_steps - step)
        log.info("estimate: %.3g s a step here (the median of %d steps after %d of warm-up), about %s for the "
                 "run's %s steps left (validation not yet included)", pace, self.ESTIMATE_STEPS, self.WARMUP_STEPS,
                 duration(total), f"{self.total_steps - step:,}")
        if self.advice and total > 3600:
            log.info("%s", self.advice)

    def left(self, step):
        """The run's remaining wall time at the current pace, as text
        ("3.4 h"), or None before a pace is known."""
        if self.seconds_per_step is None:
            return None
        return duration(self.seconds_per_step * max(self.total_steps - step, 0))

"""The pace of a run: its estimate from steady steps and what is left."""

import logging

from engine import run_pace


class FakeClock:
    def __init__(self, monkeypatch):
        self.now = 1000.0
        monkeypatch.setattr(run_pace.time, "monotonic", lambda: self.now)


def _ticks(clock, fake, seconds, first_step):
    """Ticks `clock` once a step for steps taking `seconds` (a list) in turn."""
    for step, duration in enumerate(seconds, start=first_step):
        fake.now += duration
        clock.tick(step)


def test_the_estimate_skips_the_warm_up_and_takes_the_median_step(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="train")
    fake = FakeClock(monkeypatch)
    # A resumed process (from step 500): 10 warm-up steps of a minute each (tracing, retracing), then 20
    # steps of 4 s, one of which retraces for 90 s.
    clock = run_pace.RunPace(total_steps=1530, advice="use the quick preset")
    _ticks(clock, fake, [60.0] * 10, first_step=501)
    assert clock.left(510) is None and not caplog.records
    _ticks(clock, fake, [4.0] * 7 + [90.0] + [4.0] * 11, first_step=511)
    assert not caplog.records  # 19 timed steps: no estimate yet
    _ticks(clock, fake, [4.0], first_step=530)
    # The median step, 4 s, for the 1,000 steps left: 4,000 s, over an hour.
    assert [r.getMessage() for r in caplog.records] == [
        "estimate: 4 s a step here (the median of 20 steps after 10 of warm-up), about 67 min for the run's "
        "1,000 steps left (validation not yet included)",
        "use the quick preset"]
    # What is left goes on at the mean pace since the warm-up: (19 × 4 + 90) / 20 = 8.3 s a step.
    assert clock.left(530) == "2.3 h" and clock.left(1530) == "0 s"
    # A validation of 36 s before step 531: (166 + 4 + 36) / 21 = 9.8 s a step, for 999 steps.
    fake.now += 36.0
    _ticks(clock, fake, [4.0], first_step=531)
    assert clock.left(531) == "2.7 h"
    assert len(caplog.records) == 2  # estimated once


def test_no_advice_for_a_run_under_an_hour(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="train")
    fake = FakeClock(monkeypatch)
    clock = run_pace.RunPace(total_steps=130, advice="use the quick preset")
    _ticks(clock, fake, [30.0] * 30, first_step=1)
    assert [r.getMessage() for r in caplog.records] == [
        "estimate: 30 s a step here (the median of 20 steps after 10 of warm-up), about 50 min for the run's "
        "100 steps left (validation not yet included)"]

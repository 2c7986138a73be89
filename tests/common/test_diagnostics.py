import pytest
import tensorflow as tf

from common import diagnostics


def test_record_is_a_no_op_outside_recording_and_collects_inside():
    diagnostics.record("ignored", tf.constant(1.0), "max")
    with diagnostics.recording() as outer:
        diagnostics.record("a", tf.constant(2.0), "min")
        with diagnostics.recording() as inner:
            diagnostics.record("b", tf.constant(3.0), "mean")
        diagnostics.record("c", tf.constant(4.0), "max")
    assert {k: (float(v), r) for k, (v, r) in outer.items()} == {"a": (2.0, "min"), "c": (4.0, "max")}
    assert list(inner) == ["b"]
    diagnostics.record("ignored", tf.constant(1.0), "max")
    assert len(outer) == 2


def test_unknown_reduction_is_rejected():
    with pytest.raises(ValueError, match="reduction"):
        diagnostics.record("x", tf.constant(1.0), "median")


def test_window_summary_keeps_single_step_extremes():
    window = diagnostics.WindowSummary()
    for value in (3.0, -7.0, 5.0):
        window.add({"low": (value, "min"), "high": (value, "max"), "avg": (value, "mean")})
    assert window.flush() == {"low": -7.0, "high": 5.0, "avg": pytest.approx(1 / 3)}
    window.add({"low": (1.0, "min")})
    assert window.flush() == {"low": 1.0}
    assert window.flush() == {}

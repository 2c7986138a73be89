"""common.machine: the cores and load a run records."""

import os

from common import machine


def test_cores_are_this_process_cpu_affinity():
    assert machine.cores() == len(os.sched_getaffinity(0))


def test_load_average_is_the_one_minute_value_rounded(monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (1.23456, 2.0, 3.0))
    assert machine.load_average() == 1.23

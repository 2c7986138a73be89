"""What a run or a measurement records of the machine it ran on: the cores
it may use and the 1-minute load average."""

import os


def cores():
    """The cores this process may use (all of the machine's where the
    system cannot say)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity on macOS or Windows
        return os.cpu_count()


def load_average():
    """The 1-minute load average, to 2 decimals."""
    return round(os.getloadavg()[0], 2)

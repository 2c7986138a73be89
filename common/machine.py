"""What a run or a measurement records of the machine it ran on: the cores
it may use, the 1-minute load average, the CPU's model name and its flags
(from /proc/cpuinfo)."""

import os
import platform

CPUINFO = "/proc/cpuinfo"


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


def cpu_model(path=CPUINFO):
    """The CPU's model name: the first `model name` of a /proc/cpuinfo
    file, else `platform.processor()`, else None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                key, colon, value = line.partition(":")
                if colon and key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def read_cpu_flags(path=CPUINFO):
    """The CPU's flags: the words of the first x86 `flags` or aarch64
    `Features` line of a /proc/cpuinfo file, or None when the file cannot be
    read or has neither line."""
    try:
        with open(path, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                key, colon, value = line.partition(":")
                if colon and key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        return None
    return None

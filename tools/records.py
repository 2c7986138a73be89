"""The record of a measurement, kept as JSON under results/ for `tools.report`.

Every benchmark command (`tools.bench`, `tools.bench_fisher_vectors`,
`tools.bench_order_similarity`, `tools.bench_vsepp`) takes `--record FILE`
and then also writes FILE (atomically, at the end; the path is checked
before any work) holding its printed report(s) in an envelope:

    {"command": "python -m tools.bench --model gru --preset quick",
     "date": "2026-11-24T07:00:00+00:00", "cores": 2, "cpu": "Intel(R) Xeon(R) ...",
     "load_average": [0.12, 1.9], "python": "3.11.7", "tensorflow": "2.21.0",
     "reports": [{...}, ...]}

`command` is the command as typed, without `--record FILE` (or
`--record=FILE`); `date` (UTC) is its start; `cores` the cores this process
may use; `cpu` the CPU's model name (null when unknown); `load_average` the
1-minute load average at the start and at the end; `reports` always a list.
`evaluate.py --json FILE` and `tools.word_order --json FILE` write the same
envelope (their record option is --json), and `tools.time_tests` records the
test suite's run with the same helpers. The cores and the load are
`common.machine`'s, which train.py's results.json records too.
"""

import datetime
import importlib.metadata
import json
import platform
import shlex
import sys

from common.files import check_output_file, write_json_atomically
from common.machine import cores, load_average
from tools.hardware import CPUINFO

RECORD_OPTION = "--record"


def add_record_option(parser):
    """Adds `--record FILE` to a benchmark's argument parser."""
    parser.add_argument(RECORD_OPTION, metavar="FILE",
                        help="also write the report(s) as JSON to FILE, with the command, date, machine and versions")


def command_line(program, argv=None, option=RECORD_OPTION):
    """`python -m PROGRAM ARGV...` (`python PROGRAM ARGV...` for a script,
    "evaluate.py") as a shell takes it, without the option that names the
    record file (`option`: --record, or --json for evaluate.py and
    tools.word_order) and its value (argv: the command's arguments, by
    default this process's)."""
    argv = sys.argv[1:] if argv is None else argv
    kept, words = [], iter(argv)
    for word in words:
        if word == "--":  # what follows is positional
            kept += [word, *words]
            break
        name, equals, _ = word.partition("=")
        # argparse takes any unambiguous prefix of an option ("--rec FILE").
        if len(name) > 2 and option.startswith(name):
            if not equals:
                next(words, None)
            continue
        kept.append(word)
    runner = ["python", program] if program.endswith(".py") else ["python", "-m", program]
    return shlex.join([*runner, *kept])


def utc_now():
    """The date and time now, in UTC, to the second (ISO 8601)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


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


def versions():
    """{"python": ..., "tensorflow": ...}: the versions installed (the
    TensorFlow version None when none is), read without importing TensorFlow."""
    tensorflow = None
    for distribution in ("tensorflow", "tensorflow-cpu", "tf-nightly"):
        try:
            tensorflow = importlib.metadata.version(distribution)
            break
        except importlib.metadata.PackageNotFoundError:
            pass
    return {"python": platform.python_version(), "tensorflow": tensorflow}


class Recording:
    """The record of one benchmark command: created at its start, which
    checks `path` (an `InputError` naming `option`, --record or --json,
    unless a file can be written there) and takes the date and the load average; `write(reports)`
    at its end writes the record (see the module's docstring).

    With `path` None (no --record) it checks and writes nothing.
    """

    def __init__(self, path, command, option=RECORD_OPTION):
        if path is not None:
            check_output_file(path, option)
        self.path = path
        self.command = command
        self.date = utc_now()
        self.load_at_start = load_average()

    def record(self, reports):
        """The record of `reports` (a list of report dicts), as of now."""
        return {
            "command": self.command,
            "date": self.date,
            "cores": cores(),
            "cpu": cpu_model(),
            "load_average": [self.load_at_start, load_average()],
            **versions(),
            "reports": list(reports),
        }

    def write(self, reports):
        """Writes the record of `reports` to the path, atomically (if there is one)."""
        if self.path is not None:
            write_json_atomically(self.path, json.dumps(self.record(reports), indent=1) + "\n")

"""Runs the test suite and records what it took, for the sentence of README.md and docs/testing.md.

    python -m tools.time_tests                          # the README's `python -m pytest`, into results/test_suite.json
    python -m tools.time_tests tests/common -q --out /tmp/suite.json
    python -m tools.report --snapshot results/runs.json --update README.md docs/*.md   # then the sentences

Runs `python -m pytest` with the given arguments (none: the README's test
command) from the repository's root, passing its output through, and
writes to --out (atomically; default: the repository's
results/test_suite.json) a `common.records.TestSuiteRun`: the command,
the date (UTC), pytest's exit status, the outcome counts of its final
summary line ("894 passed, 3 deselected in 664.82s (0:11:04)": passed,
failed, errors, skipped, deselected, xfailed, ...), the wall seconds, the
CPU seconds (user + system) of pytest and every process it waited for,
the cores this process may use, the CPU's model name and the
instruction set of TensorFlow's kernels on it (the suite's time depends on
the machine), the 1-minute load average at the start and at the end, and
the Python and TensorFlow versions (all taken as the benchmarks'
`--record` takes them). A
failed suite is recorded too (the report says it
failed); the exit status is pytest's. Every argument but `--out FILE` /
`--out=FILE` goes to pytest (paths in them are relative to the
repository's root, where pytest runs; --out's to the current directory).
Ctrl-C stops pytest and records nothing.
"""

import argparse
import json
import re
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

from common import machine, records
from common.errors import ArgumentParser, InputError
from common.files import check_output_file, write_json_atomically

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = str(ROOT / "results" / "test_suite.json")

# pytest's final summary line, "=" borders and colours aside: outcomes
# ("3 passed, 1 error", or "no tests ran"), then "in 1.23s" and with long
# runs "(0:11:04)".
_SUMMARY = re.compile(r"(?P<outcomes>.+?) in (?P<seconds>[\d.]+)s(?: \(\d+:\d\d:\d\d\))?")
_OUTCOME = re.compile(r"(\d+) (\w+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# The singular pytest prints for one error or warning.
_PLURALS = {"error": "errors", "warning": "warnings"}


def parse_args(argv=None):
    """Namespace(out, pytest_args): `--out FILE` (or `--out=FILE`) is
    ours, every other argument pytest's, in its order."""
    parser = ArgumentParser(prog="python -m tools.time_tests", usage="%(prog)s [PYTEST ARGS...] [--out FILE]",
                                     description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    argv = list(sys.argv[1:] if argv is None else argv)
    out, pytest_args = DEFAULT_OUT, []
    words = iter(argv)
    for word in words:
        if word in ("-h", "--help"):
            parser.print_help()
            parser.exit()
        if word == "--out":
            out = next(words, None)
            if out is None:
                parser.error("--out: expected a file name")
        elif word.startswith("--out="):
            out = word.removeprefix("--out=")
        else:
            pytest_args.append(word)
    if not out:
        parser.error("--out: expected a file name")
    return argparse.Namespace(out=out, pytest_args=pytest_args)


def parse_summary(lines):
    """{outcome: count} of pytest's final summary line, the last among
    `lines` ({} for "no tests ran"); None when there is none (pytest
    stopped before it: a usage error, an internal error)."""
    for line in reversed(list(lines)):
        text = _ANSI.sub("", line).strip().strip("=").strip()
        match = _SUMMARY.fullmatch(text)
        if not match:
            continue
        if match["outcomes"] == "no tests ran":
            return {}
        parts = match["outcomes"].split(", ")
        outcomes = [_OUTCOME.fullmatch(part) for part in parts]
        if all(outcomes):
            return {_PLURALS.get(name, name): int(count) for count, name in (outcome.groups() for outcome in outcomes)}
    return None


def _cpu_seconds_of_children():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pytest_command(pytest_args):
    """The command line of the timed run, as the README writes it (run with this interpreter)."""
    return ["python", "-m", "pytest", *pytest_args]


def time_tests(pytest_args, out=None, output=None):
    """Runs `python -m pytest *pytest_args` from the repository's root, its
    output passed through to `output` (default: stdout), and returns (its
    exit status, the record described in the module's docstring), written
    to `out` when given."""
    output = sys.stdout if output is None else output
    command = pytest_command(pytest_args)
    date = records.utc_now()
    load_start = machine.load_average()
    cpu_start = _cpu_seconds_of_children()
    start = time.monotonic()
    last_lines = []
    with subprocess.Popen([sys.executable, *command[1:]], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace") as process:
        for line in process.stdout:
            output.write(line)
            output.flush()
            last_lines = [*last_lines[-19:], line]  # the summary line is the last, or nearly
    wall_seconds = time.monotonic() - start
    cpu_seconds = _cpu_seconds_of_children() - cpu_start
    load_end = machine.load_average()
    counts = parse_summary(last_lines)
    record = records.TestSuiteRun(
        command=shlex.join(command), date=date, exit_status=process.returncode, counts={} if counts is None else counts,
        wall_seconds=round(wall_seconds, 1), cpu_seconds=round(cpu_seconds, 1), cores=machine.cores(),
        cpu=machine.cpu_model(), isa=str(machine.instruction_set()), load_average=[load_start, load_end], **records.versions())
    if out is not None:
        write_json_atomically(out, record.to_json())
    return process.returncode, record.to_dict()


def main(argv=None):
    # Not common.errors.run_command: it loads TensorFlow here and sets
    # TF_CPP_MIN_LOG_LEVEL, which the timed pytest would inherit.
    args = parse_args(argv)
    try:
        check_output_file(args.out, "--out")  # before the suite's minutes, not after
        records.check_replaceable(args.out, "--out", shlex.join(pytest_command(args.pytest_args)))
        status, record = time_tests(args.pytest_args, args.out)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: nothing recorded in {args.out}", file=sys.stderr)
        return 130
    print(f"recorded in {args.out}: {json.dumps(record)}", file=sys.stderr)
    return status if status >= 0 else 128 - status  # killed by a signal: the shell's 128 + its number


if __name__ == "__main__":
    sys.exit(main())

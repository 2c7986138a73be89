"""What a run or a measurement records, declared once: the JSON files that
train.py, evaluate.py, the benchmarks and `tools.time_tests` write and
`python -m tools.report` reads, as dataclasses both sides use.

- `RunResults`: a training run's results.json (`engine.training`).
- `Measurement`: the envelope of a measurement, written by every benchmark
  command's `--record FILE` (`tools.bench`, `tools.bench_fisher_vectors`,
  `tools.bench_order_similarity`, `tools.bench_vsepp`, ...) and by
  `evaluate.py --json FILE` and `tools.word_order --json FILE`, through
  `Recording`:

      {"version": 1, "command": "python -m tools.bench --model gru --preset quick",
       "date": "2026-11-24T07:00:00+00:00", "cores": 2, "cpu": "Intel(R) Xeon(R) ...",
       "load_average": [0.12, 1.9], "python": "3.11.7", "tensorflow": "2.21.0",
       "reports": [{...}, ...]}

- `TestSuiteRun`: the test suite's run (`tools.time_tests`).

A record names no folder of the machine that wrote it (`portable_path`):
a path inside the repository is written relative to it, any other
absolute path as `<dir>/` and its last part.

Each record has a `version` (VERSION when written; a file written before
records had one is version 1). `Record.read(values, where)` checks a
parsed JSON object whole: a missing or mistyped key is an `InputError`
naming `where` (the file) and the key; a null is an absent key, which takes
the field's default; keys the type does not declare are ignored. The
machine's facts (cores, load, CPU) are `common.machine`'s.
"""

import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import re
import shlex
import sys
from pathlib import Path
from typing import Any, Callable, ClassVar

from common import machine
from common.errors import InputError
from common.files import check_output_file, read_text, write_json_atomically

VERSION = 1
RECORD_OPTION = "--record"
# The repository's folder, what the paths a record holds are relative to.
REPOSITORY = Path(__file__).resolve().parent.parent
# What stands for the folders of an absolute path outside the repository.
OUTSIDE = "<dir>"


# --- Kinds of values -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Kind:
    """What a key's value must be, in words (to follow "must be" in an
    error), and its check."""

    what: str
    check: Callable[[Any], bool]


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_whole_number(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_command(value):
    """Whether `value` is a command line shlex can split."""
    if not isinstance(value, str):
        return False
    try:
        shlex.split(value)
    except ValueError:  # an unclosed quote
        return False
    return True


def _is_metrics(value):
    return isinstance(value, dict) and all(metric is None or is_number(metric) for metric in value.values())


STRING = Kind("a string", lambda value: isinstance(value, str))
NUMBER = Kind("a number", is_number)
WHOLE_NUMBER = Kind("a whole number", is_whole_number)
COMMAND = Kind("a command line (a string shlex can split)", is_command)
METRICS = Kind("an object of metrics whose values are numbers", _is_metrics)
LOAD = Kind("a list of two numbers (the 1-minute load average at the start and at the end)",
            lambda value: isinstance(value, list) and len(value) == 2 and all(map(is_number, value)))
DATE = Kind("an ISO date and time (YYYY-MM-DDTHH:MM:SS...)",
            lambda value: isinstance(value, str) and re.fullmatch(r"\d{4}-\d\d-\d\d(T.*)?", value) is not None)
REQUIRED = object()


def excerpt(value, limit=60):
    """A value, for errors, as JSON and short."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_key(values, where, key, kind, required):
    """InputError naming `where` and `key` unless `values[key]` is of
    `kind`, or absent (or null) and not `required`."""
    value = values.get(key)
    if value is None:
        if required:
            raise InputError(f"{where}: lacks the key {key!r} ({kind.what})")
    elif not kind.check(value):
        if kind is METRICS and isinstance(value, dict):  # the metric at fault
            metric = next(name for name, number in value.items() if not (number is None or is_number(number)))
            raise InputError(f"{where}: the key '{key}.{metric}' must be a number, got {excerpt(value[metric])}")
        raise InputError(f"{where}: the key {key!r} must be {kind.what}, got {excerpt(value)}")


def key(kind, default=REQUIRED):
    """A record's field: its kind, and its value when the key is absent
    (REQUIRED: none, its absence is an error; a list or a dict default is
    copied for each record)."""
    if default is REQUIRED:
        return dataclasses.field(metadata={"kind": kind})
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata={"kind": kind})
    return dataclasses.field(default=default, metadata={"kind": kind})


# --- The records ---------------------------------------------------------------------------------


@dataclasses.dataclass(kw_only=True)
class Record:
    """A record's fields are declared with `key`; its version comes first."""

    version: int = key(WHOLE_NUMBER, VERSION)

    # The error for a file that is no JSON object, after its name.
    not_an_object: ClassVar[str] = "not a JSON object"
    # Whether to_dict leaves out the keys at their default (null, {}), and the JSON's indent.
    omit_defaults: ClassVar[bool] = False
    indent: ClassVar[int] = 1

    @classmethod
    def fields(cls):
        """(name, kind, required) of each field, in order."""
        return [(field.name, field.metadata["kind"],
                 field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING)
                for field in dataclasses.fields(cls)]

    @classmethod
    def read(cls, values, where):
        """The record of the JSON object `values` (read from `where`),
        checked whole: see the module's docstring."""
        if not isinstance(values, dict):
            raise InputError(f"{where}: {cls.not_an_object}")
        check_key(values, where, "version", WHOLE_NUMBER, False)
        version = 1 if values.get("version") is None else values["version"]  # no version: written before it
        if version > VERSION:
            raise InputError(f"{where}: version {version}, newer than this code reads (up to {VERSION}); "
                             "update the code")
        for name, kind, required in cls.fields():
            check_key(values, where, name, kind, required)
        given = {name: values[name] for name, _, _ in cls.fields() if values.get(name) is not None}
        return cls(**{**given, "version": version})

    def to_dict(self):
        values = dataclasses.asdict(self)
        if self.omit_defaults:
            optional = {name for name, _, required in self.fields() if not required}
            values = {name: value for name, value in values.items()
                      if name not in optional or (value is not None and value != {})}
        return values

    def to_json(self):
        return json.dumps(self.to_dict(), indent=self.indent) + "\n"


@dataclasses.dataclass(kw_only=True)
class RunResults(Record):
    """A training run's results.json: the dev and test metrics of its best
    checkpoint (`dev`, `test`), that checkpoint (relative to the run's
    folder) and the dev metric that chose it (`selection_metric`, the
    run's `train.selection_metric`), what a fitted model chose (`fit`, under
    keys of its own), train.py's command line, the epochs trained (every
    phase's; gradient-trained models only), and the time the run took
    (`engine.time_spent`): wall and CPU time (user + system, all threads)
    summed over the processes (`pieces`) that trained it, the cores the
    last could use, the CPU model and the instruction set its kernels ran
    on (`cpu`, `isa`: each different one of the pieces', joined by " and ";
    None for a run recorded before runs named their machine), the 1-minute
    load average at the start and at the end and the peak memory. Keys
    without a value are left out of the file."""

    not_an_object: ClassVar[str] = "not a JSON object; not written by train.py?"
    omit_defaults: ClassVar[bool] = True
    indent: ClassVar[int] = 2

    dev: dict = key(METRICS)
    test: dict = key(METRICS)
    checkpoint: str = key(STRING, None)
    selection_metric: str = key(STRING, None)
    fit: dict = key(Kind("an object (what the model recorded)", lambda value: isinstance(value, dict)), {})
    command: str = key(COMMAND, None)
    epochs: float = key(NUMBER, None)
    wall_seconds: float = key(NUMBER, None)
    cpu_seconds: float = key(NUMBER, None)
    cores: int = key(NUMBER, None)
    cpu: str = key(STRING, None)
    isa: str = key(STRING, None)
    load_average: list = key(LOAD, None)
    peak_memory_bytes: int = key(NUMBER, None)
    pieces: int = key(NUMBER, None)


@dataclasses.dataclass(kw_only=True)
class Measurement(Record):
    """The envelope of a measurement (see the module's docstring):
    `command` is the command as typed, without its record option and file;
    `date` (UTC) its start; `cores` the cores the process could use; `cpu`
    the CPU's model name (null when unknown); `load_average` the 1-minute
    load average at the start and at the end; `python` and `tensorflow`
    the versions (TensorFlow's null when not installed); `reports` what
    the command reported, always a list."""

    not_an_object: ClassVar[str] = "not a JSON object of a recorded command (command, reports)"

    command: str = key(STRING)
    date: str = key(DATE, None)
    cores: int = key(NUMBER, None)
    cpu: str = key(STRING, None)
    load_average: list = key(LOAD, None)
    python: str = key(STRING, None)
    tensorflow: str = key(STRING, None)
    reports: list = key(Kind("a list of the reports (JSON objects) the command printed",
                             lambda value: isinstance(value, list) and value
                             and all(isinstance(report, dict) for report in value)))


@dataclasses.dataclass(kw_only=True)
class TestSuiteRun(Record):
    """The test suite's run (`python -m tools.time_tests`): the command,
    its date (UTC), pytest's exit status and outcome counts, the wall and
    CPU seconds, the cores, the CPU's model name (null when unknown) and
    the instruction set TensorFlow's kernels use there (`isa`; both null in
    a record written before they were kept), the load at the start
    and at the end, and the Python and TensorFlow versions (TensorFlow's
    null when not installed)."""

    __test__ = False  # not a pytest test class
    not_an_object: ClassVar[str] = "not a JSON object; not written by `python -m tools.time_tests`?"

    command: str = key(STRING)
    date: str = key(DATE)
    exit_status: int = key(WHOLE_NUMBER)
    counts: dict = key(Kind("an object of pytest's outcome counts (whole numbers ≥ 0)",
                            lambda value: isinstance(value, dict)
                            and all(is_whole_number(count) and count >= 0 for count in value.values())))
    wall_seconds: float = key(NUMBER)
    cpu_seconds: float = key(NUMBER)
    cores: int = key(NUMBER)
    cpu: str = key(STRING, None)
    isa: str = key(STRING, None)
    load_average: list = key(LOAD)
    python: str = key(STRING)
    tensorflow: str = key(STRING, None)


# --- Writing a measurement -----------------------------------------------------------------------


def add_record_option(parser):
    """Adds `--record FILE` to a benchmark's argument parser."""
    parser.add_argument(RECORD_OPTION, metavar="FILE",
                        help="also write the report(s) as JSON to FILE, with the command, date, machine and versions")


def portable_path(path, repository=REPOSITORY):
    """`path` as a record writes it: an absolute path inside `repository`
    relative to it ("/home/me/zoo/runs/gru" -> "runs/gru"), any other
    absolute path as OUTSIDE and its last part ("/data/glove.txt" ->
    "<dir>/glove.txt"), a relative path as it is. Symbolic links are not
    followed: a path through the repository's `runs` link stays inside it."""
    path = str(path)
    if not os.path.isabs(path):
        return path
    normal = Path(os.path.normpath(path))
    if normal.is_relative_to(repository):
        return normal.relative_to(repository).as_posix()
    return f"{OUTSIDE}/{normal.name}"


def portable_arguments(words, repository=REPOSITORY):
    """Command-line words, each absolute path in them made `portable_path`:
    a whole word, or a value after "=" or between commas
    ("model.members=/a/run1,/a/run2")."""
    return [re.sub(r"(?<![^=,])/[^=,]*", lambda match: portable_path(match.group(), repository), word)
            for word in words]


def command_line(program, argv=None, option=RECORD_OPTION, environ=None):
    """`python -m PROGRAM ARGV...` (`python PROGRAM ARGV...` for a script,
    "evaluate.py") as a shell takes it, without the option that names the
    record file (`option`: --record, or --json for evaluate.py and
    tools.word_order) and its value (argv: the command's arguments, by
    default this process's), after the variables of `environ` (default:
    this process's) that choose which kernels run
    (`machine.KERNEL_VARIABLES`, e.g. `ONEDNN_MAX_CPU_ISA=AVX2`): a speed
    measured on capped kernels says so in its command. Its paths are
    `portable_arguments`."""
    argv = sys.argv[1:] if argv is None else argv
    environ = os.environ if environ is None else environ
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
    variables = [f"{name}={environ[name]}" for name in machine.KERNEL_VARIABLES if name in environ]
    return shlex.join([*variables, *runner, *portable_arguments(kept)])


def utc_now():
    """The date and time now, in UTC, to the second (ISO 8601)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


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


def check_replaceable(path, option, command):
    """Refuses (an `InputError` naming `option` and `path`) to write the
    record of `command` over a file that holds anything but a record of the
    same command: a record is replaced only by a newer one of its own
    command, so no command loses another's (or a user's file)."""
    if not os.path.exists(path):
        return
    try:
        held = json.loads(read_text(path))
    except (InputError, json.JSONDecodeError):
        held = None
    recorded = held.get("command") if isinstance(held, dict) else None
    if recorded != command:
        holds = f"the record of `{recorded}`" if isinstance(recorded, str) else "no record of a command"
        raise InputError(f"{option} {path}: holds {holds}, which the record of `{command}` would replace; "
                         "give another file, or remove that one first")


class Recording:
    """The record of one measuring command: created at its start, which
    checks `path` (an `InputError` naming `option`, --record or --json,
    unless a file can be written there that holds no other command's
    record: `check_replaceable`) and takes the date and the load average;
    `write(reports)` at its end writes the `Measurement`.

    With `path` None (no --record) it checks and writes nothing.
    """

    def __init__(self, path, command, option=RECORD_OPTION):
        if path is not None:
            check_output_file(path, option)
            check_replaceable(path, option, command)
        self.path = path
        self.command = command
        self.date = utc_now()
        self.load_at_start = machine.load_average()

    def record(self, reports):
        """The `Measurement` of `reports` (a list of report dicts), as of now."""
        return Measurement(command=self.command, date=self.date, cores=machine.cores(), cpu=machine.cpu_model(),
                           load_average=[self.load_at_start, machine.load_average()], **versions(),
                           reports=list(reports))

    def write(self, reports):
        """Writes the record of `reports` to the path, atomically (if there is one)."""
        if self.path is not None:
            write_json_atomically(self.path, self.record(reports).to_json())

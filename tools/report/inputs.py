"""What the report reads, each checked whole before any output is made:
the runs (train.py's model directories, or a snapshot of them), the TOML
of tables.toml and papers.toml, the recorded reports of record rows and
the test suite's records (results.json and the records by their types,
`common.records`)."""

import json
import tomllib
from pathlib import Path

from common.errors import InputError
from common.files import read_text
from common.records import STRING, Kind, Measurement, RunResults, TestSuiteRun, check_key, excerpt, is_number
from common.wording import counted
from models.experiments import load_run
from tools.plot_training import read_scalars

RESULTS_DIR = Path(__file__).resolve().parents[2] / "results"

# results.json, the records and the test suite's record are checked by
# their types (`common.records`); a snapshot's run is its run's record: the
# model and preset (config.json's), the fields of its results.json but the
# version and the checkpoint, and the dev rsum of every validation.

RESULT_KEYS = tuple(name for name, _, _ in RunResults.fields() if name not in ("version", "checkpoint"))
DEV_HISTORY = Kind("a list of numbers", lambda value: isinstance(value, list) and all(map(is_number, value)))


def _run_fields(results):
    """{key: value} of a `RunResults`' fields a run's record keeps."""
    return {key: getattr(results, key) for key in RESULT_KEYS}


def read_runs(root):
    """{run name: record} of every train.py run under `root` (see the
    docstring of tools.report.cli); the name is the path below `root`."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: not a directory of training runs")
    runs = {}
    for config_path in sorted(root.rglob("config.json")):
        model_dir = config_path.parent
        if config_path.is_file() and (model_dir / "results.json").is_file() and _is_train_config(config_path):
            runs[model_dir.relative_to(root).as_posix()] = read_run(model_dir)
    if not runs:
        raise InputError(f"{root}: no model directory with train.py's config.json and a results.json below it")
    return runs


def _is_train_config(path):
    """Whether the config.json at `path` is train.py's (a JSON object with
    a "model_name"), not another tool's."""
    try:
        config = json.loads(read_text(path))
    except (InputError, json.JSONDecodeError):
        return False
    return isinstance(config, dict) and "model_name" in config


def read_run(model_dir):
    """The record of one run: what the tables need from its config.json,
    results.json and dev event files; a missing or mistyped key is an
    InputError naming the file and the key."""
    model_dir = Path(model_dir)
    experiment = load_run(model_dir).experiment
    results_path = model_dir / "results.json"
    record = {"model": experiment.model_name, "preset": experiment.preset,
              **_run_fields(RunResults.read(_read_json(results_path), results_path))}
    # A run recorded before results.json named the metric that chose its checkpoint: its config's.
    record["selection_metric"] = record["selection_metric"] or experiment.train.selection_metric
    record["dev_history"] = _dev_rsums(model_dir)
    return record


def _read_json(path):
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: {error}") from None


def _dev_rsums(model_dir):
    """The dev rsum of every validation, in step order ([] without logs)."""
    if not (Path(model_dir) / "logs" / "dev").is_dir():
        return []
    steps, values = read_scalars(model_dir, "dev").get("rsum", ([], []))
    return [value for _, value in sorted(zip(steps, values))]


def read_runs_and_snapshots(runs_dir=None, snapshots=(), replace=True):
    """(root, {run name: record}, {run name: where it was read}) of the
    runs of the `snapshots`, in their order, and of those under
    `runs_dir`: a later one's run replaces an earlier one's run of the same
    name, and the commands are written under the last one's root
    (`runs_dir`, when given). With `replace` False, a run that would
    replace a run of another record is an InputError naming both."""
    root, runs, origins = None, {}, {}
    for path in snapshots:
        root, found = read_snapshot(path)
        _join(runs, origins, found, {name: f"{path}: run {name!r}" for name in found}, replace)
    if runs_dir:
        found = read_runs(runs_dir)
        root = runs_dir.rstrip("/") or "/"
        _join(runs, origins, found, {name: str(Path(runs_dir) / name / "results.json") for name in found}, replace)
    return root, runs, origins


def _join(runs, origins, found, where, replace):
    """Adds the runs `found` (read from `where`, by name) to `runs` and
    `origins`; unless `replace`, none may change a run already there."""
    changed = [name for name in found if name in runs and found[name] != runs[name]]
    if changed and not replace:
        name = changed[0]
        more = f" (and {counted(len(changed) - 1, 'more run')}: {', '.join(changed[1:])})" if changed[1:] else ""
        raise InputError(f"{where[name]}: would replace {origins[name]}, another run of that name "
                         f"(test rsum {_rsum(runs[name])} → {_rsum(found[name])}){more}; give --replace to replace "
                         "recorded runs, or train into a folder of another name")
    runs.update(found)
    origins.update(where)


def _rsum(record):
    rsum = record["test"].get("rsum")
    return "?" if rsum is None else f"{rsum:.1f}"


def read_snapshot(path):
    """(root, {run name: record}) of a snapshot written by --save-snapshot;
    a malformed one is an InputError naming it (and the run and the key)."""
    snapshot = _read_json(Path(path))
    if not isinstance(snapshot, dict) or not {"root", "runs"} <= snapshot.keys():
        raise InputError(f"{path}: not a snapshot written by `python -m tools.report --save-snapshot` "
                         "(a JSON object with \"root\" and \"runs\")")
    root, runs = snapshot["root"], snapshot["runs"]
    if not isinstance(root, str):
        raise InputError(f"{path}: the key 'root' must be a string, got {excerpt(root)}")
    if not isinstance(runs, dict) or not runs:
        raise InputError(f"{path}: the key 'runs' must be an object of runs (run name: record), got {excerpt(runs)}")
    records = {}
    for name, record in runs.items():
        where = f"{path}: run {name!r}"
        if not isinstance(record, dict):
            raise InputError(f"{where}: must be an object (a run's record), got {excerpt(record)}")
        for key in ("model", "preset"):
            check_key(record, where, key, STRING, required=True)
        results = RunResults.read(record, where)
        check_key(record, where, "dev_history", DEV_HISTORY, required=False)
        records[name] = {"model": record["model"], "preset": record["preset"], **_run_fields(results),
                         "dev_history": record.get("dev_history") or []}
    return root, records


def read_toml(path):
    try:
        with open(path, "rb") as file:
            return tomllib.load(file)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise InputError(f"{path}: {error}") from None


# A record row ({ record = FILE, select = {...}, labels = [...] }) is one
# report of a JSON file under results/ (FILE relative to the tables file)
# that a command recorded: `python -m tools.bench ... --record FILE` (and
# the family benchmarks), `python evaluate.py ... --json FILE`, `python -m
# tools.word_order ... --json FILE`. The file holds the command, its
# reports (a list of objects) and optionally when and where it ran; select
# picks the one report whose keys have the given values (none: the file's
# only report). Its cells are the test-metric columns (the report's keys of
# the same names) and value columns ({ value = "TEMPLATE" }, filled in from
# the report's keys); the table lists the record's command and, under it,
# its date, cores and load.

def read_records(tables, source):
    """{file: record} of every record row's file (relative to the tables
    file `source`), each checked whole, and each row's select matching one
    report: an InputError naming the file and the key at fault."""
    records = {}
    for table in tables:
        samples = [item for claim in table.get("compare", []) for item in (*claim["a"], *claim["b"])]
        for row in [*table.get("rows", []), *samples]:
            if not isinstance(row, dict) or "record" not in row:
                continue
            file = row["record"]
            if file not in records:
                path = Path(source).parent / file
                records[file] = {**Measurement.read(_read_json(path), path).to_dict(), "path": str(path)}
            select_report(records[file], row)
    return records


def select_report(record, row):
    """The one report of `record` whose keys have the values of `row`'s
    select; an InputError unless exactly one has."""
    select = row.get("select", {})
    matches = [report for report in record["reports"] if all(report.get(k) == v for k, v in select.items())]
    if len(matches) != 1:
        what = f"the report with {excerpt(select)}" if select else "one report (add select = { KEY = VALUE } to choose)"
        raise InputError(f"{record['path']}: {len(matches)} reports match where the tables need {what}")
    return matches[0]


def read_test_suites(tables, source):
    """{table id: record} of the test-suite tables (checked by
    check_tables), each read from its file (relative to the tables file
    `source`) and checked whole: a missing or mistyped key is an
    InputError naming the file and the key."""
    suites = {}
    for table in tables:
        if "test_suite" in table:
            path = Path(source).parent / table["test_suite"]
            suites[table["id"]] = TestSuiteRun.read(_read_json(path), path).to_dict()
    return suites

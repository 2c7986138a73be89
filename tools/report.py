"""The results tables of README.md and docs/ and the recall@K plot, generated from training runs.

    python -m tools.report runs/                                  # the tables of these runs, as markdown, to stdout
    python -m tools.report runs/ --plot docs/recall_at_k.png --update README.md docs/*.md --save-snapshot results/runs.json
    python -m tools.report --snapshot results/runs.json --update README.md docs/*.md
    python -m tools.report runs/ --snapshot results/runs.json --save-snapshot results/runs.json --update README.md docs/*.md

Reads every model directory under RUNS (any depth) that holds a
`config.json` and a `results.json` written by train.py, and the dev rsum of
every validation from its `logs/dev/` event files. Which runs make which
table, their labels and the papers' rows beside them are set in
`results/tables.toml`; the papers' numbers are in `results/papers.toml`,
copied from the papers' tables. Each table comes with the command of each
of its rows (the command line train.py recorded, its `--model-dir` written
as RUNS/<run>); a table's rows whose run is missing are left out, and runs
in no table get a table of their own at the end. Given a runs directory
and no `--update`, the report prints only the tables that show at least
one of its runs (and that table of their own), not the test-suite
sentences and recorded reports the docs carry; with `--update` or
`--snapshot` it prints every block it makes.

A table's columns are test metrics (METRICS), "paper:METRIC" (its row's
paper's value), what describes a run (RUN_COLUMNS), or what a fitted model
chose: results.json's "fit" holds whatever the model recorded (numbers or
strings, under keys of its own), and the column

    { fit = "TEMPLATE", header = "HEADER" }

fills in TEMPLATE, a Python format string whose fields are recorded keys
("{KEY}", "{KEY:FORMAT}" with a format spec such as .1f, g or .1%; any
number of them, any text around them), from each run's fit. Its cell is
empty for a run that did not record every key it names, and in mean and
paper rows; `header` is optional (default: the template with each field
written as its key). The report knows no model's keys: the tables name
them (see results/tables.toml). Mean rows average the test metrics, the
dev rsum and the times (in minutes), and show the cores when all their
runs had the same; a run without a value (an old run's CPU time, cores or
load) leaves its cell, and its mean rows' cell, empty.

A row `{ record = FILE, select = {...}, labels = [...] }` is a report that
a command recorded as JSON under results/ (`tools.bench ... --record`,
`evaluate.py ... --json`, `tools.word_order ... --json`; see "Recorded
reports" below), and a column `{ value = "TEMPLATE" }` fills a template in
from it. A table `{ id, compare = [...] }` tests claims "A is better than
B" over seeds with a stated decision rule (see "Comparisons" below).

A table `{ id, test_suite = FILE }` is no table but one sentence: how the
test suite's run recorded in FILE (JSON, relative to tables.toml, written
by `python -m tools.time_tests`) ended, its counts, wall and CPU time,
cores and load; a failed run says "failed" and its exit status.

`--update FILE...` rewrites each table's block between the lines
`<!-- report:ID -->` and `<!-- /report:ID -->`, wherever it is among the
markdown FILEs: every table of tables.toml (and "other-runs" when there
are such runs) needs a block in exactly one of them, once; a block whose
ID is no table's is an error naming its file and the ID. `--save-snapshot`
keeps what was read from the runs in one small JSON file, from which
`--snapshot` regenerates the same output without the runs (the tables of
README.md and docs/*.md are checked against it by the tests); a
test-suite table's FILE is read either way. Given both RUNS and
`--snapshot`, the report reads the snapshot's runs and those under RUNS,
a run under RUNS replacing the snapshot's run of the same name: how new
runs join the recorded ones (`--save-snapshot` then keeps them all).

A directory under RUNS is a run when its config.json is a JSON object with
a "model_name" (train.py's) and it holds a results.json; others (another
tool's config.json and results.json, a run still training) are skipped. A
run's config.json and results.json, a snapshot, tables.toml, papers.toml
and a test suite's FILE are checked whole before any output is made: a
missing or mistyped key is a one-line error naming the file and the key.
All outputs (`--update`, `--plot`, `--save-snapshot`) are checked
(directories, the plot's extension, FILE's blocks) and made in memory
before the first is written, each atomically: bad input leaves all of
them as they were (and a write failing on the disk names those written
before it).
"""

import argparse
import dataclasses
import json
import re
import shlex
import statistics
import string
import sys
import tomllib
from pathlib import Path

from common.errors import InputError, run_command
from common.files import atomic_write, check_output_file, read_text
from common.records import (STRING, Kind, Measurement, RunResults, TestSuiteRun, check_key, excerpt, is_command,
                            is_number)
from common.wording import counted
from tools.plot_training import figure_format, read_scalars

RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"

# Metric columns: key in results.json's "test" (or a paper's row), header,
# format. Ranks print as integers when they are (the papers' medians may be
# halves).
METRICS = {
    "i2t_r1": ("i2t R@1", ".1f"),
    "i2t_r5": ("R@5", ".1f"),
    "i2t_r10": ("R@10", ".1f"),
    "i2t_medr": ("medr", "rank"),
    "i2t_meanr": ("meanr", ".1f"),
    "i2t_rsum": ("i2t R-sum", ".1f"),
    "i2t_map": ("i2t mAP", ".3f"),
    "t2i_r1": ("t2i R@1", ".1f"),
    "t2i_r5": ("R@5", ".1f"),
    "t2i_r10": ("R@10", ".1f"),
    "t2i_medr": ("medr", "rank"),
    "t2i_meanr": ("meanr", ".1f"),
    "t2t_meanr": ("sentence meanr", ".1f"),
    "rsum": ("rsum", ".1f"),
}
# Columns that describe a run rather than its test metrics (what its fit
# chose: a TemplateColumn, named in tables.toml).
RUN_COLUMNS = {
    "dev_rsum": "dev rsum",
    "dev_history": "dev rsum per validation",
    "best_dev_at": "best dev rsum at",
    "epochs": "epochs",
    "pieces": "pieces",
    "wall_time": "wall time",
    "cpu_time": "CPU time",
    "cores": "cores",
    "load": "load (start → end)",
    "peak_memory": "peak memory",
}
# The time columns and the results.json key of their seconds: a run's
# wall time, and the CPU time (user + system) of its process.
TIME_COLUMNS = {"wall_time": "wall_seconds", "cpu_time": "cpu_seconds"}
RECALL_KS = (1, 5, 10)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="?", help="a directory of model directories written by train.py (any depth)")
    parser.add_argument("--snapshot", help="read the runs from a snapshot written by --save-snapshot instead")
    parser.add_argument("--save-snapshot", metavar="JSON", help="write what was read from the runs to this file")
    parser.add_argument("--tables", default=str(RESULTS_DIR / "tables.toml"), help="(default: %(default)s)")
    parser.add_argument("--papers", default=str(RESULTS_DIR / "papers.toml"), help="(default: %(default)s)")
    parser.add_argument("--update", metavar="MARKDOWN", nargs="+",
                        help="rewrite the tables' blocks in these files (each block in exactly one of them)")
    parser.add_argument("--plot", metavar="FIGURE", help="draw the recall@K curves of the first table's runs, "
                        "in the format of the file's extension (.png, .pdf, .svg, ...)")
    return parser.parse_args(argv)


# --- Reading runs ---------------------------------------------------------------------------------


def read_runs(root):
    """{run name: record} of every train.py run under `root` (see the
    module's docstring); the name is the path below `root`."""
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
    config_path, results_path = model_dir / "config.json", model_dir / "results.json"
    config, results = _read_json(config_path), _read_json(results_path)
    if not isinstance(config, dict):
        raise InputError(f"{config_path}: not a JSON object; not written by train.py?")
    for key in ("model_name", "preset"):
        check_key(config, config_path, key, STRING, required=True)
    record = {"model": config["model_name"], "preset": config["preset"], **_run_fields(RunResults.read(results, results_path))}
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


def read_runs_and_snapshot(runs_dir=None, snapshot=None):
    """(root, {run name: record}, {run name: where it was read}) of the
    runs under `runs_dir`, of a snapshot, or of both: a run of `runs_dir`
    replaces the snapshot's run of the same name, and the commands are
    then written under `runs_dir`."""
    root, runs, origins = None, {}, {}
    if snapshot:
        root, runs = read_snapshot(snapshot)
        origins = {name: f"{snapshot}: run {name!r}" for name in runs}
    if runs_dir:
        found = read_runs(runs_dir)
        root = runs_dir.rstrip("/") or "/"
        runs.update(found)
        origins.update({name: str(Path(runs_dir) / name / "results.json") for name in found})
    return root, runs, origins


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


# --- Checking the inputs --------------------------------------------------------------------------
#
# results.json, the records and the test suite's record are checked by
# their types (`common.records`); a snapshot's run is its run's record: the
# model and preset (config.json's), the fields of its results.json but the
# version and the checkpoint, and the dev rsum of every validation.

RESULT_KEYS = tuple(name for name, _, _ in RunResults.fields() if name not in ("version", "checkpoint"))
DEV_HISTORY = Kind("a list of numbers", lambda value: isinstance(value, list) and all(map(is_number, value)))


def _run_fields(results):
    """{key: value} of a `RunResults`' fields a run's record keeps."""
    return {key: getattr(results, key) for key in RESULT_KEYS}


def check_papers(papers, source):
    """The papers' rows as papers.toml gives them, checked: [PAPER] tables
    with an optional source string and [PAPER.ROW] tables of metrics."""
    for paper, rows in papers.items():
        if not isinstance(rows, dict):
            raise InputError(f"{source}: {paper} must be a table [{paper}] of the paper's rows, got {excerpt(rows)}")
        for name, row in rows.items():
            key = f"{paper}.{name}"
            if name == "source":
                if not isinstance(row, str):
                    raise InputError(f"{source}: {key} must be a string, got {excerpt(row)}")
                continue
            if not isinstance(row, dict):
                raise InputError(f"{source}: {key} must be a table [{key}] of the row's metrics, got {excerpt(row)}")
            for metric, value in row.items():
                if metric not in METRICS:
                    raise InputError(f"{source}: {key}.{metric}: unknown metric; known: {', '.join(METRICS)}")
                if not is_number(value):
                    raise InputError(f"{source}: {key}.{metric} must be a number, got {excerpt(value)}")
    return papers


TABLE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
LABEL_FIELDS = ("model", "preset")


def check_tables(data, papers, source, papers_source="papers.toml"):
    """The [[table]] entries of tables.toml (`data`, as read), checked
    whole (see its header comment): an InputError naming `source`, the
    table and the key at fault."""
    unknown = sorted(set(data) - {"table"})
    if unknown:
        raise InputError(f"{source}: unknown key {unknown[0]!r}; the file holds only [[table]] entries")
    tables = data.get("table", [])
    if isinstance(tables, dict):
        raise InputError(f"{source}: [table] must be [[table]] (an array of tables, one [[table]] per table)")
    if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
        raise InputError(f"{source}: 'table' must be [[table]] entries, got {excerpt(tables)}")
    ids = set()
    for number, table in enumerate(tables, start=1):
        table_id = table.get("id")
        if not isinstance(table_id, str) or not TABLE_ID.fullmatch(table_id):
            raise InputError(f"{source}: [[table]] number {number}: the key 'id' must be a name of letters, digits, "
                             f"'_', '.' and '-' (its README block's), got {excerpt(table_id)}")
        where = f"{source}: table {table_id!r}"
        if table_id in ids or table_id == "other-runs":
            raise InputError(f"{where}: " + ("a second table of this id" if table_id in ids else
                                             "the id 'other-runs' is the report's own table of the runs in no table"))
        ids.add(table_id)
        _check_table(table, where, papers, papers_source)
    return tables


def _check_table(table, where, papers, papers_source):
    if "compare" in table:
        _check_comparisons(table, where, papers, papers_source)
        return
    if "test_suite" in table:
        unknown = sorted(set(table) - {"id", "test_suite"})
        if unknown:
            raise InputError(f"{where}: unknown key {unknown[0]!r}; a test-suite table has only id and test_suite")
        if not isinstance(table["test_suite"], str) or not table["test_suite"]:
            raise InputError(f"{where}: the key 'test_suite' must be the path of a JSON file written by "
                             f"`python -m tools.time_tests` (relative to the tables file), got {excerpt(table['test_suite'])}")
        return
    unknown = sorted(set(table) - {"id", "labels", "columns", "rows", "commands", "spread"})
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r}; a table has id, labels, columns, rows, commands, spread")
    for key in ("labels", "columns", "rows"):
        if key not in table:
            raise InputError(f"{where}: lacks the key {key!r}")
    labels, columns, rows = table["labels"], table["columns"], table["rows"]
    if not isinstance(labels, list) or not labels or not all(isinstance(label, str) for label in labels):
        raise InputError(f"{where}: the key 'labels' must be a list of the label columns' headers, got {excerpt(labels)}")
    if not isinstance(columns, list):
        raise InputError(f"{where}: the key 'columns' must be a list of columns, got {excerpt(columns)}")
    for spec in columns:
        _column(spec, where)
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise InputError(f"{where}: the key 'rows' must be a list of rows ({{ run = ... }}), got {excerpt(rows)}")
    if table.get("commands", "details") != "details":
        raise InputError(f"{where}: the key 'commands' can only be \"details\" (fold the commands away), "
                         f"got {excerpt(table['commands'])}")
    if not isinstance(table.get("spread", False), bool):
        raise InputError(f"{where}: the key 'spread' must be true or false, got {excerpt(table['spread'])}")
    for number, row in enumerate(rows, start=1):
        _check_row(row, f"{where}: row {number}", len(labels), papers, papers_source)


def _check_row(row, where, n_labels, papers, papers_source):
    unknown = sorted(set(row) - {"run", "mean", "paper", "record", "select", "labels", "command"})
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r}; a row has run (and command), mean, record (and select) "
                         "or paper, and labels")
    if "command" in row:
        if "run" not in row:
            raise InputError(f"{where}: 'command' makes a row's run; the row names no run")
        if not is_command(row["command"]) or shlex.split(row["command"])[:2] != ["python", "train.py"]:
            raise InputError(f"{where}: the key 'command' must be a `python train.py ...` command line, "
                             f"got {excerpt(row['command'])}")
    kinds = [kind for kind in ("run", "mean", "record") if kind in row]
    if len(kinds) > 1:
        raise InputError(f"{where}: has both {kinds[0]!r} and {kinds[1]!r}; a row is one run, the mean of runs "
                         "or a recorded report")
    if "select" in row and "record" not in row:
        raise InputError(f"{where}: 'select' chooses among a record's reports; the row names no record")
    if "record" in row:
        _check_record_row(row, where)
    elif "run" in row:
        if not isinstance(row["run"], str) or not row["run"]:
            raise InputError(f"{where}: the key 'run' must be a run's name (its path below RUNS), got {excerpt(row['run'])}")
    elif "mean" in row:
        runs = row["mean"]
        if not isinstance(runs, list) or len(runs) < 2 or not all(isinstance(name, str) and name for name in runs):
            raise InputError(f"{where}: the key 'mean' must be a list of at least two runs' names, got {excerpt(runs)}")
        if "paper" in row:
            raise InputError(f"{where}: a mean row has no paper; a paper's row is a row of its own")
    elif "paper" not in row:
        raise InputError(f"{where}: names no run, mean, record or paper")
    if "paper" in row and "record" in row:
        raise InputError(f"{where}: a record row has no paper; a paper's row is a row of its own")
    if "paper" in row:
        paper, _, name = row["paper"].partition("/") if isinstance(row["paper"], str) else ("", "", "")
        if name == "source" or not isinstance(papers.get(paper), dict) or name not in papers[paper]:
            raise InputError(f"{where}: the key 'paper' must name a row PAPER/ROW of {papers_source}, got {excerpt(row['paper'])}")
    labels = row.get("labels")
    if not isinstance(labels, list) or len(labels) != n_labels or not all(isinstance(label, str) for label in labels):
        raise InputError(f"{where}: the key 'labels' must be a list of {n_labels} strings (one per label column), got {excerpt(labels)}")
    for label in labels:
        _check_label(label, where, "run" in row)


def _check_label(label, where, is_run):
    """A label is a format string: in a run row, {model} and {preset} are
    its run's; {{ and }} are literal braces."""
    usage = "a run row's labels may use {model} and {preset}; write a literal brace as {{ or }}"
    try:
        fields = [(key, spec, conversion) for _, key, spec, conversion in string.Formatter().parse(label) if key is not None]
    except ValueError as error:
        raise InputError(f"{where}: the label {label!r}: {error}; {usage}") from None
    for key, spec, conversion in fields:
        if not is_run or key not in LABEL_FIELDS or spec or conversion:
            field = "{" + key + ("!" + conversion if conversion else "") + (":" + spec if spec else "") + "}"
            raise InputError(f"{where}: the label {label!r} has the placeholder {field}; {usage}")


def _check_record_row(row, where):
    if not isinstance(row["record"], str) or not row["record"].endswith(".json"):
        raise InputError(f"{where}: the key 'record' must be the path of a recorded JSON file (relative to the "
                         f"tables file), got {excerpt(row['record'])}")
    select = row.get("select", {})
    if not isinstance(select, dict) or not all(isinstance(value, (str, int, float)) for value in select.values()):
        raise InputError(f"{where}: the key 'select' must be a table of report keys and the values to match "
                         f"(e.g. {{ model = \"gru\" }}), got {excerpt(select)}")


COMPARISON_KEYS = {"claim", "a", "b", "metric", "paper"}
MIN_SEEDS = 3  # samples (seeds) per side of a comparison


def _is_sample(item):
    """A comparison's sample: a run's name or a recorded report."""
    if isinstance(item, dict):
        return set(item) <= {"record", "select"} and "record" in item
    return isinstance(item, str) and bool(item)


def _check_comparisons(table, where, papers, papers_source):
    unknown = sorted(set(table) - {"id", "compare", "commands"})
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r}; a comparison table has id, compare and commands")
    if table.get("commands", "details") != "details":
        raise InputError(f"{where}: the key 'commands' can only be \"details\", got {excerpt(table['commands'])}")
    comparisons = table["compare"]
    if not isinstance(comparisons, list) or not comparisons or not all(isinstance(c, dict) for c in comparisons):
        raise InputError(f"{where}: the key 'compare' must be a list of comparisons ({{ claim = ..., a = [...], "
                         f"b = [...] }}), got {excerpt(comparisons)}")
    for number, comparison in enumerate(comparisons, start=1):
        at = f"{where}: comparison {number}"
        unknown = sorted(set(comparison) - COMPARISON_KEYS)
        if unknown:
            raise InputError(f"{at}: unknown key {unknown[0]!r}; a comparison has {', '.join(sorted(COMPARISON_KEYS))}")
        if not isinstance(comparison.get("claim"), str) or not comparison["claim"]:
            raise InputError(f"{at}: the key 'claim' must be the claim's words (\"A > B\"), got {excerpt(comparison.get('claim'))}")
        for side in ("a", "b"):
            items = comparison.get(side)
            if not isinstance(items, list) or len(items) < MIN_SEEDS or not all(map(_is_sample, items)):
                raise InputError(f"{at}: the key {side!r} must be a list of at least {MIN_SEEDS} runs' names or "
                                 f"{{ record = FILE, select = {{...}} }} reports (one per seed), got {excerpt(items)}")
            for item in items:
                if isinstance(item, dict):
                    _check_record_row(item, at)
        if comparison.get("metric", "rsum") not in METRICS:
            raise InputError(f"{at}: the key 'metric' must be one of {', '.join(METRICS)}, got {excerpt(comparison['metric'])}")
        paper = comparison.get("paper")
        if paper is not None:
            keys = paper if isinstance(paper, list) and len(paper) == 2 else [None]
            for key in keys:
                name, _, row = key.partition("/") if isinstance(key, str) else ("", "", "")
                if row == "source" or not isinstance(papers.get(name), dict) or row not in papers[name]:
                    raise InputError(f"{at}: the key 'paper' must be two rows [A, B] (PAPER/ROW) of {papers_source}, "
                                     f"got {excerpt(paper)}")


# --- Tables ---------------------------------------------------------------------------------------


def render(tables, papers, runs, root, source="tables.toml", origins=None, suites=None, records=None):
    """{table id: markdown block} of every table (checked by check_tables)
    with at least one row, plus "other-runs" for the runs that no table
    names; `source` (the tables' file) names the table in errors, `origins`
    ({run name: its results.json, or the snapshot and the run}) the run.
    A test-suite table's block is the sentence of its record in `suites`
    (read_test_suites' {table id: record}), and record rows are read from
    `records` (read_records' {file: record}); both are read from beside
    `source` when not given."""
    suites = read_test_suites(tables, source) if suites is None else suites
    records = read_records(tables, source) if records is None else records
    blocks = {}
    named = set()
    for table in tables:
        if "test_suite" in table:
            blocks[table["id"]] = suite_sentence(suites[table["id"]])
            continue
        named.update(table_runs(table))
        if "compare" in table:
            block = render_comparisons(table, papers, runs, root, records)
        else:
            block = render_table(table, papers, runs, root, source, origins, records)
            if block is None and _reproducible(table):
                block = (f"No run of this table is recorded yet: `python -m tools.reproduce {table['id']}` "
                         "trains its runs, then prints it.")
        if block is not None:
            blocks[table["id"]] = block
    others = [name for name in runs if name not in named]
    if others:
        table = {
            "id": "other-runs",
            "labels": ["run", "model", "preset"],
            "columns": ["i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10", "rsum", "dev_rsum", "wall_time"],
            "rows": [{"run": name, "labels": [_literal(name), "`{model}`", "{preset}"]} for name in others],
        }
        blocks["other-runs"] = render_table(table, papers, runs, root, source, origins)
    return blocks


def _reproducible(table):
    """Whether every run row of a table of runs gives the command that
    makes its run (`tools.reproduce`)."""
    run_rows = [row for row in table["rows"] if "run" in row]
    return bool(run_rows) and all("command" in row for row in run_rows)


def _literal(text):
    """`text` as a label that prints it (its braces doubled)."""
    return text.replace("{", "{{").replace("}", "}}")


def render_table(table, papers, runs, root, source="tables.toml", origins=None, records=None):
    """One table as markdown: the commands of its runs and records, the
    table, then when and where each record was made; None when none of its
    runs or records is there."""
    columns = [_column(spec, f"{source}: table {table['id']!r}") for spec in table["columns"]]
    records = records or {}
    rows = [row for row in table["rows"] if _row_runs(row) <= runs.keys() and row.get("record", "") in {"", *records}]
    if not any(_row_runs(row) or "record" in row for row in rows):
        return None
    headers = [*table["labels"], *(_header(column) for column in columns)]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        cells = _row_cells(row, columns, papers, runs, table.get("spread", False), origins or {}, records)
        lines.append("| " + " | ".join(cells) + " |")
    names = [name for row in rows for name in ([row["run"]] if "run" in row else row.get("mean", []))]
    files = list(dict.fromkeys(row["record"] for row in rows if "record" in row))
    commands = [_command(runs[name], root, name) for name in dict.fromkeys(names)]
    commands += list(dict.fromkeys(records[file]["command"] for file in files))
    table_text = "\n".join(lines)
    made = [_record_sentence(file, records[file]) for file in files]
    if made:
        table_text += "\n\n" + "\n".join(made)
    return _commands_block(commands, table.get("commands") == "details") + "\n\n" + table_text


def _commands_block(commands, folded):
    """The commands as a bash block, folded away in <details> when `folded`."""
    code = "```bash\n" + "\n".join(commands) + "\n```"
    if folded:
        summary = "The command of this run" if len(commands) == 1 else f"The commands of these {len(commands)} runs"
        code = f"<details><summary>{summary}</summary>\n\n{code}\n\n</details>"
    return code


@dataclasses.dataclass(frozen=True)
class TemplateColumn:
    """A column filled in from a template: `template` (a format string
    whose fields are the keys `keys`) filled in from a run's fit (`source`
    "fit") or from a recorded report (`source` "value", see RecordRow)."""

    source: str
    template: str
    header: str
    keys: tuple
    where: str = dataclasses.field(compare=False)  # the column, in errors

    @classmethod
    def parse(cls, spec, where):
        """The column of the spec { fit = TEMPLATE, header = HEADER } or
        { value = TEMPLATE, header = HEADER }; a malformed one is an
        InputError naming `where`. A value template's field may index a
        recorded list ({ci95[0]:.3f})."""
        source = "fit" if "fit" in spec else "value"
        what, one = ("recorded keys", "a recorded key") if source == "fit" else ("a report's keys", "a report's key")

        def malformed(problem):
            usage = f'{{ {source} = "... {{KEY}} ... {{KEY:FORMAT}} ...", header = "..." }}'
            return InputError(f"{where}: {problem}; a {source} column is {usage}")

        unknown = sorted(set(spec) - {source, "header"})
        if unknown:
            raise malformed(f"unknown setting {', '.join(unknown)}")
        template, header = spec.get(source), spec.get("header")
        if not isinstance(template, str):
            raise malformed(f"{source} must be a format string of {what}")
        if header is not None and not isinstance(header, str):
            raise malformed("header must be a string")
        try:
            parts = list(string.Formatter().parse(template))
        except ValueError as error:
            raise malformed(f"{source}: {error}") from None
        field_pattern = r"[A-Za-z_]\w*" + ("" if source == "fit" else r"(\[\d+\])*")
        keys, default_header = [], []
        for text, field, format_spec, conversion in parts:
            default_header.append(text)
            if field is None:
                continue
            if not re.fullmatch(field_pattern, field) or conversion is not None:
                shown = "{" + field + ("" if conversion is None else "!" + conversion) + "}"
                raise malformed(f"the field {shown} is not {{KEY}} or {{KEY:FORMAT}} of {one}")
            if not _is_format_spec(format_spec):
                raise malformed(f"the field {{{field}:{format_spec}}} has no valid format spec")
            key = re.match(r"\w+", field).group()
            keys.append(key)
            default_header.append(key)
        if not keys:
            raise malformed(f"{source} names no recorded key")
        header = "".join(default_header) if header is None else header
        return cls(source, template, header, tuple(dict.fromkeys(keys)), where)

    def cell(self, values, origin="the run"):
        """The template filled in from `values` (a fit or a report); empty
        when it lacks a key. `origin` (where they were read) names the run
        or the record in errors."""
        values = {key: values.get(key) for key in self.keys}
        if None in values.values():
            return ""
        try:
            return self.template.format_map(values)
        except (ValueError, TypeError, IndexError) as error:
            noun = "fit" if self.source == "fit" else "report"
            raise InputError(f"{self.where}: cannot format the {noun} {values}: {error} (the {noun} of {origin})") from None


def _is_format_spec(format_spec):
    """Whether `format_spec` formats a number or a string."""
    if "{" in format_spec or "}" in format_spec:
        return False
    for probe in (0.5, 1, "x"):
        try:
            format(probe, format_spec)
            return True
        except (ValueError, TypeError):
            pass
    return False


def _column(spec, where):
    """A table's column: the name of a metric or run column (as written) or
    a TemplateColumn; an unknown or malformed one is an InputError."""
    if isinstance(spec, dict) and ("fit" in spec or "value" in spec):
        return TemplateColumn.parse(spec, f"{where}: column {_toml(spec)}")
    if isinstance(spec, str) and (spec in METRICS or spec in RUN_COLUMNS or spec.removeprefix("paper:") in METRICS):
        return spec
    known = ", ".join([*METRICS, *RUN_COLUMNS, "paper:METRIC", '{ fit = "TEMPLATE", header = "HEADER" }',
                       '{ value = "TEMPLATE", header = "HEADER" }'])
    raise InputError(f"{where}: unknown column {_toml(spec)}; known: {known}")


def _toml(value):
    """A column spec, for errors, about as tables.toml writes it."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + " }"
    return repr(value)


def _header(column):
    if isinstance(column, TemplateColumn):
        return column.header
    if column.startswith("paper:"):
        return "paper " + METRICS[column[len("paper:"):]][0]
    if column in METRICS:
        return METRICS[column][0]
    return RUN_COLUMNS[column]


def _row_runs(row):
    return set(row.get("mean", [])) | ({row["run"]} if "run" in row else set())


def table_runs(table):
    """The names of the runs a table (checked by check_tables) shows: its
    rows' runs, or the runs its comparisons' samples name; none for a
    test-suite table."""
    if "compare" in table:
        return {item for claim in table["compare"] for item in (*claim["a"], *claim["b"]) if isinstance(item, str)}
    return {name for row in table.get("rows", []) for name in _row_runs(row)}


def _labels(row, record=None):
    """A row's labels, its run's {model} and {preset} filled in."""
    fields = {"model": record["model"], "preset": record["preset"]} if record else {}
    return [label.format_map(fields) for label in row["labels"]]


def _row_cells(row, columns, papers, runs, spread, origins, records):
    if "record" in row:
        report = _with_sums(_select_report(records[row["record"]], row))
        origin = f"results/{row['record']}"
        return _labels(row) + [_record_cell(column, report, origin) for column in columns]
    if "run" in row:
        record = runs[row["run"]]
        paper = _with_sums(_paper_row(papers, row["paper"])) if "paper" in row else {}
        origin = origins.get(row["run"], f"run {row['run']!r}")
        return _labels(row, record) + [_run_cell(column, record, paper, origin) for column in columns]
    if "mean" in row:
        records = [runs[name] for name in row["mean"]]
        return _labels(row) + [_mean_cell(column, records, spread) for column in columns]
    values = _with_sums(_paper_row(papers, row["paper"]))
    return _labels(row) + [_metric_cell(column, values.get(column)) if column in METRICS else "" for column in columns]


def _number(column, record):
    """A run's value of a numeric column (test metrics, dev rsum, seconds
    of a time column), else None."""
    if column in METRICS:
        return _with_sums(record["test"]).get(column)
    if column == "dev_rsum":
        return record["dev"].get("rsum")
    return record[TIME_COLUMNS[column]] if column in TIME_COLUMNS else None


def _mean_cell(column, records, spread):
    """A mean row's cell: the mean of a numeric column over `records`, and
    its standard deviation when `spread`; times in minutes. The cores when
    all runs had the same; empty for any other column or a run without
    the value."""
    if column == "cores":
        values = {record["cores"] for record in records}
        return _cores(values.pop()) if len(values) == 1 and None not in values else ""
    samples = [_number(column, record) for record in records]
    if None in samples:
        return ""
    unit = ""
    if column in TIME_COLUMNS:  # minutes, so that the mean and its spread share one unit
        samples, unit = [seconds / 60 for seconds in samples], " min"
    text = _format(column, statistics.mean(samples))
    if spread:
        text += f" ± {_format(column, statistics.stdev(samples))}"
    return text + unit


def _paper_row(papers, key):
    paper, _, name = key.partition("/")
    try:
        return papers[paper][name]
    except KeyError:
        raise InputError(f"papers table: no row {key!r}") from None


def _with_sums(metrics):
    """The metrics, with i2t/t2i R-sums and rsum computed from the recalls
    where absent (the papers rarely print them)."""
    values = dict(metrics)
    for direction in ("i2t", "t2i"):
        recalls = [values.get(f"{direction}_r{k}") for k in RECALL_KS]
        if None not in recalls:
            values.setdefault(f"{direction}_rsum", sum(recalls))
    if "i2t_rsum" in values and "t2i_rsum" in values:
        values.setdefault("rsum", values["i2t_rsum"] + values["t2i_rsum"])
    return values


def _metric_cell(column, value):
    return "" if value is None else _format(column, value)


def _format(column, value):
    spec = METRICS[column][1] if column in METRICS else ".1f"
    if spec == "rank":
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
    return format(value, spec)


def _run_cell(column, record, paper, origin):
    if isinstance(column, TemplateColumn):
        return column.cell(record["fit"], origin) if column.source == "fit" else ""
    if column in METRICS or column == "dev_rsum":
        return _metric_cell(column, _number(column, record))
    if column.startswith("paper:"):
        return _metric_cell(column[len("paper:"):], paper.get(column[len("paper:"):]))
    if column == "dev_history":
        return ", ".join(f"{value:.1f}" for value in record["dev_history"])
    if column == "best_dev_at":
        # "10 of 10 (still rising)": the best validation was the last; the
        # run stopped while still improving, undertrained at its budget.
        history = record["dev_history"]
        if not history:
            return ""
        best = history.index(max(history)) + 1
        return f"{best} of {len(history)}" + (" (still rising)" if best == len(history) > 1 else "")
    if column in TIME_COLUMNS:
        seconds = record[TIME_COLUMNS[column]]
        return "" if seconds is None else _duration(seconds)
    if column == "cores":
        return "" if record["cores"] is None else _cores(record["cores"])
    if column == "load":
        return "" if record["load_average"] is None else _load(record["load_average"])
    if column in ("epochs", "pieces"):
        return "" if record[column] is None else f"{record[column]:g}"
    if column == "peak_memory":
        size = record["peak_memory_bytes"]
        return "" if size is None else f"{size / 2**30:.1f} GiB"
    raise AssertionError(column)


def _duration(seconds):
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.2f} h"


def _cores(cores):
    return f"{cores:g}"


def _load(load_average):
    start, end = load_average
    return f"{start:.1f} → {end:.1f}"


def _command(record, root, name):
    """The run's train.py command line, its --model-dir written as
    ROOT/NAME (where the report found it)."""
    if not record["command"]:
        return f"# {root}/{name}: no command recorded"
    words = shlex.split(record["command"])
    for i, word in enumerate(words):
        if word == "--model-dir" and i + 1 < len(words):
            words[i + 1] = f"{root}/{name}"
        elif word.startswith("--model-dir="):
            words[i] = f"--model-dir={root}/{name}"
    return shlex.join(words)


# --- Comparisons ----------------------------------------------------------------------------------
#
# A comparison table ({ id, compare = [...] }) tests claims "A is better
# than B" over seeds: each side's mean ± standard deviation of a test metric
# over its samples (at least MIN_SEEDS: runs, or recorded reports such as
# `evaluate.py --json` of each seed's model), and the decision rule: A is
# ahead when it is better than B's mean by more than the larger of the two
# standard deviations, B is ahead by the same rule the other way, else a
# tie. Better is higher, and lower for a rank (RANK_METRICS).

VERDICTS = {1: "A ahead: reproduced", 0: "tie: not resolved", -1: "B ahead: reversed"}
RANK_METRICS = {metric for metric, (_, spec) in METRICS.items() if spec == "rank" or metric.endswith("meanr")}


def comparison(a_values, b_values, lower_is_better=False):
    """(A's mean, A's s.d., B's mean, B's s.d., the rule's margin, the
    verdict: 1 when A is ahead, -1 when B is, 0 for a tie)."""
    a_mean, b_mean = statistics.mean(a_values), statistics.mean(b_values)
    a_sd, b_sd = statistics.stdev(a_values), statistics.stdev(b_values)
    margin = max(a_sd, b_sd)
    better = (b_mean - a_mean) if lower_is_better else (a_mean - b_mean)
    verdict = 1 if better > margin else -1 if better < -margin else 0
    return a_mean, a_sd, b_mean, b_sd, margin, verdict


def render_comparisons(table, papers, runs, root, records=None):
    """A comparison table as markdown (the commands of its runs and
    records, folded away by default, then one row per claim); None when
    none of its comparisons has all its samples."""
    records = records or {}

    def present(item):
        return item in runs if isinstance(item, str) else item["record"] in records

    claims = [c for c in table["compare"] if all(map(present, (*c["a"], *c["b"])))]
    if not claims:
        return None
    headers = ["claim (A better than B)", "metric", "A: mean ± s.d.", "B: mean ± s.d.", "A − B",
               "rule: better by >", "here", "paper: A − B"]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for claim in claims:
        metric = claim.get("metric", "rsum")
        a_values, b_values = ([_sample(item, metric, runs, records) for item in claim[side]] for side in ("a", "b"))
        if None in a_values or None in b_values:
            raise InputError(f"table {table['id']!r}: claim {claim['claim']!r}: a sample lacks the test metric {metric!r}")
        a_mean, a_sd, b_mean, b_sd, margin, verdict = comparison(a_values, b_values, metric in RANK_METRICS)
        paper = ""
        if "paper" in claim:
            a_paper, b_paper = (_with_sums(_paper_row(papers, key)).get(metric) for key in claim["paper"])
            paper = "" if None in (a_paper, b_paper) else f"{a_paper - b_paper:+.1f}"
        cells = [claim["claim"], METRICS[metric][0], f"{_format(metric, a_mean)} ± {_format(metric, a_sd)}",
                 f"{_format(metric, b_mean)} ± {_format(metric, b_sd)}", f"{a_mean - b_mean:+.1f}",
                 _format(metric, margin), VERDICTS[verdict], paper]
        lines.append("| " + " | ".join(cells) + " |")
    items = [item for claim in claims for item in (*claim["a"], *claim["b"])]
    commands = [_command(runs[item], root, item) if isinstance(item, str) else records[item["record"]]["command"]
                for item in items]
    commands = list(dict.fromkeys(commands))
    return _commands_block(commands, table.get("commands", "details") == "details") + "\n\n" + "\n".join(lines)


def _sample(item, metric, runs, records):
    """A comparison sample's value of a test metric (None without it)."""
    if isinstance(item, str):
        return _number(metric, runs[item])
    value = _with_sums(_select_report(records[item["record"]], item)).get(metric)
    return value if is_number(value) else None


# --- Recorded reports -----------------------------------------------------------------------------
#
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
            _select_report(records[file], row)
    return records


def _select_report(record, row):
    select = row.get("select", {})
    matches = [report for report in record["reports"] if all(report.get(k) == v for k, v in select.items())]
    if len(matches) != 1:
        what = f"the report with {excerpt(select)}" if select else "one report (add select = { KEY = VALUE } to choose)"
        raise InputError(f"{record['path']}: {len(matches)} reports match where the tables need {what}")
    return matches[0]


def _record_cell(column, report, origin):
    if isinstance(column, TemplateColumn):
        return column.cell(report, origin) if column.source == "value" else ""
    if column in METRICS:
        value = report.get(column)
        return _metric_cell(column, value) if is_number(value) else ""
    return ""


def _record_sentence(file, record):
    """When and where a record was made, one line (its file alone when it
    recorded neither)."""
    facts = [record["date"][:16].replace("T", " ") + " UTC" if record["date"] else None,
             counted(record["cores"], "core", spec="g") if record["cores"] is not None else None,
             record["cpu"],
             f"load {_load(record['load_average'])}" if record["load_average"] else None]
    facts = [fact for fact in facts if fact]
    return f"Recorded in `results/{file}`" + (f": {', '.join(facts)}." if facts else ".")


# --- The test suite's time -----------------------------------------------------------------------
#
# A test-suite table ({ id, test_suite = FILE }) is one sentence made from
# the JSON FILE (relative to the tables file) that `python -m
# tools.time_tests` wrote: how the suite ended and what its time measured.

# The outcomes in the order of the sentence (pytest's summary line order
# varies); any other a plugin counts comes after them. Warnings are not
# outcomes of tests.
OUTCOMES = ("passed", "failed", "errors", "skipped", "deselected", "xfailed", "xpassed")


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


def suite_sentence(record):
    """One sentence: the command, its outcome counts (or how it failed),
    wall and CPU time, cores, load at its start and end, its date and the
    versions it ran on."""
    counts = record["counts"]
    names = [*(name for name in OUTCOMES if name in counts), *(name for name in counts if name not in OUTCOMES)]
    outcome = ", ".join(f"{counts[name]} {'error' if name == 'errors' and counts[name] == 1 else name}"
                        for name in names if counts[name] and name != "warnings")
    outcome = outcome or "no tests ran"
    if record["exit_status"] != 0:
        outcome = f"failed (exit status {record['exit_status']}): {outcome}"
    cores = record["cores"]
    versions = f"Python {record['python']}" + (f", TensorFlow {record['tensorflow']}" if record["tensorflow"] else "")
    return (f"`{record['command']}`: {outcome} in {_duration(record['wall_seconds'])} wall "
            f"({_duration(record['cpu_seconds'])} CPU) on {counted(cores, 'core', spec='g')}, "
            f"load {_load(record['load_average'])}, {record['date'][:10]} ({versions}).")


# --- Output ---------------------------------------------------------------------------------------


def _block_pattern(table_id):
    name = re.escape(table_id)
    return re.compile(rf"(<!-- report:{name} -->\n)(?:.*?\n)?(<!-- /report:{name} -->)", re.S)


_BLOCK_START = re.compile(r"^<!-- report:(\S+) -->$", re.M)


def check_blocks(texts, table_ids):
    """InputError unless each of `table_ids` has a block in exactly one of
    the markdown files `texts` ({path: text}), once, and every block there
    is one of `table_ids` or "other-runs" (the report's own); the error
    names the file(s) and the id."""
    found = {}
    for path, text in texts.items():
        ids = [match.group(1) for match in _BLOCK_START.finditer(text)]
        for table_id in ids:
            if table_id not in table_ids and table_id != "other-runs":
                raise InputError(f"{path}: the block <!-- report:{table_id} --> is of no table of the tables file "
                                 f"(known: {', '.join(table_ids)})")
            if not _block_pattern(table_id).search(text):
                raise InputError(f"{path}: <!-- report:{table_id} --> has no <!-- /report:{table_id} --> line after it")
            found.setdefault(table_id, []).append(str(path))
    for table_id, paths in found.items():
        if len(paths) > 1:
            raise InputError(f"{', '.join(dict.fromkeys(paths))}: {len(paths)} blocks <!-- report:{table_id} -->; "
                             "a table has one block in one file")
    for table_id in table_ids:
        if table_id not in found:
            raise InputError(f"{', '.join(map(str, texts))}: no <!-- report:{table_id} --> ... <!-- /report:{table_id} --> "
                             f"block for table {table_id!r}")


def updated_markdown(texts, blocks, table_ids=()):
    """{path: text} of the markdown files `texts` ({path: text}) with each
    block's text between `<!-- report:ID -->` and `<!-- /report:ID -->`
    replaced, wherever it is; the files are checked by check_blocks for
    the blocks and `table_ids` (every table's, the ones without runs too)."""
    check_blocks(texts, list(dict.fromkeys([*table_ids, *blocks])))
    updated = {}
    for path, text in texts.items():
        for table_id, block in blocks.items():
            text = _block_pattern(table_id).sub(lambda match, block=block: match.group(1) + block + "\n" + match.group(2), text)
        updated[path] = text
    return updated


def markdown_blocks(text):
    """{table id: block} of the report blocks in markdown text."""
    blocks = re.finditer(r"<!-- report:(\S+) -->\n(?:(.*?)\n)?<!-- /report:\1 -->", text, re.S)
    return {match.group(1): match.group(2) or "" for match in blocks}


def plot_recalls(table, runs, fmt="png", origins=None):
    """R@K of image annotation and image search for the table's runs, one
    line each, drawn in memory: (the plotted series [{"run", "label",
    "i2t", "t2i"}], the figure's bytes in the format `fmt`). A run without
    one of the recalls is an InputError naming where it was read
    (`origins`: {run name: its results.json, or the snapshot and the run})."""
    rows = [row for row in table["rows"] if row.get("run") in runs]
    series = []
    for row in rows:
        record = runs[row["run"]]
        curves = {}
        for direction in ("i2t", "t2i"):
            for k in RECALL_KS:
                if not is_number(record["test"].get(f"{direction}_r{k}")):
                    where = (origins or {}).get(row["run"], f"run {row['run']!r}")
                    raise InputError(f"{where}: lacks the key 'test.{direction}_r{k}', which the recall@K plot (--plot) draws")
            curves[direction] = [record["test"][f"{direction}_r{k}"] for k in RECALL_KS]
        label = " ".join(_labels(row, record)).replace("`", "")
        series.append({"run": row["run"], "label": label, **curves})

    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(13, 6), sharey=True)
    try:
        for i, line in enumerate(series):
            # 20 colours, then the same dashed.
            style = {"color": plt.cm.tab20(i % 20), "linestyle": "-" if i < 20 else "--", "marker": "o"}
            for axis, direction in zip(axes, ("i2t", "t2i")):
                axis.plot(RECALL_KS, line[direction], label=line["label"], **style)
        for axis, title in zip(axes, ("image annotation (i2t)", "image search (t2i)")):
            axis.set_title(title)
            axis.set_xscale("log")
            axis.set_xticks(RECALL_KS, [str(k) for k in RECALL_KS])
            axis.set_xlabel("K")
            axis.grid(True, alpha=0.3)
        axes[0].set_ylabel("R@K (%), Flickr8k 1K test")
        axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
        figure.tight_layout()
        image = io.BytesIO()
        try:
            figure.savefig(image, format=fmt, dpi=100)
        except (RuntimeError, OSError, ValueError) as error:  # e.g. .pgf without a LaTeX to run
            raise InputError(f"--plot: matplotlib cannot write the figure as .{fmt} ({error_line(error)})") from None
    finally:
        plt.close(figure)
    return series, image.getvalue()


def error_line(error):
    """An exception's message, one line."""
    return " ".join(str(error).split()) or type(error).__name__


def write_all(outputs):
    """Writes each (path, bytes) of `outputs`, atomically; when one fails
    after others were written, the error says which were."""
    written = []
    for path, data in outputs:
        try:
            atomic_write(path, lambda file, data=data: file.write(data))
        except InputError as error:
            if written:
                raise InputError(f"{error}; already written: {', '.join(written)}") from None
            raise
        written.append(str(path))


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    if args.runs is None and args.snapshot is None:
        raise InputError("give a runs directory, --snapshot, or both")
    # Every input and output is checked before the runs are read (the long part).
    outputs = [(argument, path) for argument, paths in
               (("--save-snapshot", [args.save_snapshot]), ("--update", args.update or []), ("--plot", [args.plot]))
               for path in paths if path]
    for i, (argument, path) in enumerate(outputs):
        for other_argument, other in [*outputs[:i], ("--tables", args.tables), ("--papers", args.papers)]:
            if Path(path).resolve() == Path(other).resolve():
                if argument == other_argument:
                    raise InputError(f"{argument} {path}: is given twice")
                raise InputError(f"{argument} {path}: is also the file of {other_argument}; give each output a file of its own")
        if argument != "--plot":
            check_output_file(path, argument)
    fmt = figure_format(args.plot, "--plot") if args.plot else None
    papers = check_papers(read_toml(args.papers), args.papers)
    tables = check_tables(read_toml(args.tables), papers, args.tables, args.papers)
    suites = read_test_suites(tables, args.tables)
    records = read_records(tables, args.tables)
    run_tables = [table for table in tables if "rows" in table]
    if args.plot and not run_tables:
        raise InputError(f"--plot {args.plot}: {args.tables} has no table of runs; the plot draws the runs of its first")
    markdown = {}
    if args.update:
        markdown = {path: read_text(path) for path in args.update}
        check_blocks(markdown, [table["id"] for table in tables])
    root, runs, origins = read_runs_and_snapshot(args.runs, args.snapshot)

    # Everything made in memory, then written.
    blocks = render(tables, papers, runs, root, args.tables, origins, suites, records)
    writes, plotted = [], []
    if args.save_snapshot:
        text = json.dumps({"root": root, "runs": runs}, indent=1, sort_keys=True) + "\n"
        writes.append((args.save_snapshot, text.encode("utf-8")))
    if args.update:
        table_ids = [table["id"] for table in tables]
        writes += [(path, text.encode("utf-8")) for path, text in updated_markdown(markdown, blocks, table_ids).items()]
    if args.plot:
        if not any(row.get("run") in runs for row in run_tables[0]["rows"]):
            raise InputError(f"--plot {args.plot}: none of the runs of the first table of {args.tables} "
                             f"({run_tables[0]['id']!r}) is there to draw")
        plotted, image = plot_recalls(run_tables[0], runs, fmt, origins)
        writes.append((args.plot, image))
    write_all(writes)
    for series in plotted:
        print(json.dumps(series), file=sys.stderr)
    if args.snapshot is None and not args.update:
        # A report on the user's own runs: the tables that show one of them, not
        # the test-suite sentences and recorded reports README.md and docs/ carry.
        shown = {table["id"] for table in tables if table_runs(table) & runs.keys()} | {"other-runs"}
        blocks = {table_id: block for table_id, block in blocks.items() if table_id in shown}
    print("\n\n".join(f"<!-- report:{table_id} -->\n{block}\n<!-- /report:{table_id} -->" for table_id, block in blocks.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Reproduces a results table: trains every run of it that has not finished, then prints the table.

    python -m tools.reproduce paper-length                  # trains into runs/, then prints the table
    python -m tools.reproduce paper-length --dry-run        # only says what it would run
    python -m tools.reproduce zoo --runs /data/my-runs      # elsewhere

TABLE is a table id of results/tables.toml (the README's and docs' report
blocks are named by it: `<!-- report:TABLE -->`). Each run the table names
(its rows' runs and their means' runs, or a comparison's runs, in the
table's order) is, in RUNS/NAME:
  finished     (results.json written): skipped;
  interrupted  (config.json, no results.json: a run stopped or killed):
               continued, `python -m train --model-dir RUNS/NAME --resume`;
  absent:      started with its command: the row's `command` in
               tables.toml (or, where the table gives none, that of a
               row of another table for the same run), else the command
               the recorded run of the snapshot (results/runs.json) was
               made with, as `python -m train`; its --model-dir becomes
               RUNS/NAME, and other runs' directories it names (an
               ensemble's members) are taken from RUNS too.
Before any run (and with --dry-run), what each command reads is checked:
its --data folder, and its --set data.path (a folder), model.word_vectors
(a file or folder, unless "word2vec": trained on the captions) and run
directories (under RUNS or the snapshot's root: a finished run, or one a
row before it makes); an interrupted run's are its config.json's. A
missing one refuses the whole reproduction in one line naming the run
and the file. The commands run one at a time with this Python, in the
current folder (relative paths in them are its); the first that fails
stops the reproduction (a run it leaves is continued by the next call).
Ctrl-C or a SIGTERM stops the run under way between two steps, with a
checkpoint, and then the reproduction. Then the table is printed from
RUNS and the snapshot, a run of RUNS replacing the snapshot's run of the
same name (`python -m tools.report RUNS --snapshot SNAPSHOT --update
README.md docs/*.md` puts all the tables into the docs, and refuses to
replace a recorded run unless given --replace).
Recorded reports (benchmarks: a table's `record` rows) are not re-run
here; their commands are printed with the table.
"""

import argparse
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import train
from common.errors import ArgumentParser, InputError, run_command
from models.experiments import CONFIG_FILE, load_run
from tools import report

STOPPED = 130  # train.py's exit status when a signal stopped it
TRAIN = ["python", "-m", "train"]  # train.py from any folder (pip install -e .), as the README says
# `ModelConfig.word_vectors`' value for vectors trained on the captions, not a file.
TRAINED_WORD_VECTORS = "word2vec"


def parse_args(argv):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", help="a table id of the tables file")
    parser.add_argument("--runs", default="runs", help="where the runs are, and go (default: %(default)s)")
    parser.add_argument("--snapshot", default=str(report.RESULTS_DIR / "runs.json"),
                        help="the recorded runs, for their commands and the table (default: %(default)s)")
    parser.add_argument("--tables", default=str(report.RESULTS_DIR / "tables.toml"), help="(default: %(default)s)")
    parser.add_argument("--papers", default=str(report.RESULTS_DIR / "papers.toml"), help="(default: %(default)s)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands it would run, run none")
    return parser.parse_args(argv)


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    papers = report.check_papers(report.read_toml(args.papers), args.papers)
    tables = report.check_tables(report.read_toml(args.tables), papers, args.tables, args.papers)
    table = _table(tables, args.table, args.tables)
    snapshot_root, recorded = report.read_snapshot(args.snapshot)
    plan = plan_commands(table, recorded, snapshot_root, args.runs, row_commands(tables))
    missing = missing_inputs(plan, args.runs, snapshot_root)
    if missing:
        raise InputError(f"{'; '.join(missing)}; nothing was run")
    for name, command in plan:
        print(f"{name}: {'finished' if command is None else shlex.join(command)}", flush=True)
    if args.dry_run:
        return 0
    for name, command in plan:
        status = 0 if command is None else run_train_command(command)
        if status == STOPPED:
            raise KeyboardInterrupt(f"{args.runs}/{name} stopped with a checkpoint; the table is not rendered "
                                    "(run this again to continue it)")
        if status:
            raise InputError(f"{args.runs}/{name}: `{shlex.join(command)}` failed; the table is not rendered "
                             "(run this again to continue it)")
    root, runs, origins = report.read_runs_and_snapshots(args.runs, [args.snapshot])
    block = report.render([table], papers, runs, root, args.tables, origins).get(table["id"])
    print(block if block is not None else f"none of the runs of table {table['id']!r} is there")
    return 0


def run_train_command(command):
    """Runs a `python train.py ...` command with this Python; returns its
    exit status. A stop reaches the run as it would in a terminal of its
    own, and this waits while it stops between two steps with a checkpoint
    (docs/training.md): Ctrl-C, which the terminal sends to the whole
    foreground process group, is left to the run, and a SIGTERM is passed
    on to it."""
    process = subprocess.Popen([sys.executable, *command[1:]])
    # Set after the start: the run keeps its own reaction to SIGINT.
    previous = {signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN),
                signal.SIGTERM: signal.signal(signal.SIGTERM, lambda number, frame: process.send_signal(number))}
    try:
        return process.wait()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _table(tables, table_id, source):
    for table in tables:
        if table["id"] == table_id:
            if "test_suite" in table:
                raise InputError(f"{source}: table {table_id!r} is the test suite's sentence (`python -m tools.time_tests`)")
            return table
    raise InputError(f"{source}: no table {table_id!r} (tables: {', '.join(table['id'] for table in tables)})")


def table_runs(table):
    """{run name: its row's command or None}, in the table's order."""
    if "compare" in table:
        return {item: None for comparison in table["compare"] for item in (*comparison["a"], *comparison["b"])
                if isinstance(item, str)}
    runs = {}
    for row in table["rows"]:
        if "run" in row:
            runs[row["run"]] = row.get("command")
        for name in row.get("mean", []):
            runs.setdefault(name, None)
    return runs


def row_commands(tables):
    """{run name: the command a row of `tables` gives it}."""
    return {row["run"]: row["command"] for table in tables for row in table.get("rows", [])
            if "run" in row and "command" in row}


def plan_commands(table, recorded, snapshot_root, runs_dir, commands=None):
    """[(run name, the command that finishes it, or None: finished)] of
    the table's runs, in its order (see the module's docstring); `commands`
    ({run name: command}, `row_commands`), those other tables' rows give."""
    commands = commands or {}
    plan = []
    names = table_runs(table)
    for name, command in names.items():
        model_dir = Path(runs_dir) / name
        if (model_dir / "results.json").is_file():
            plan.append((name, None))
        elif (model_dir / "config.json").is_file():
            plan.append((name, [*TRAIN, "--model-dir", str(model_dir), "--resume"]))
        elif model_dir.exists():
            raise InputError(f"{model_dir}: exists but holds no training run (no config.json): remove it to start the run")
        else:
            command = command or commands.get(name) or (recorded[name]["command"] if name in recorded else None)
            if command is None:
                raise InputError(f"{name}: no command to make it (give its row a command in the tables file, "
                                 "or record the run in the snapshot)")
            words = shlex.split(command)
            if words[:2] != ["python", "train.py"]:
                raise InputError(f"{name}: its recorded command is not a `python train.py ...` command: {command}")
            plan.append((name, _in_runs_dir(words, model_dir, snapshot_root, runs_dir, names)))
    return plan


def _in_runs_dir(words, model_dir, snapshot_root, runs_dir, names):
    """A recorded `python train.py` command line as `python -m train`, its
    --model-dir `model_dir` and the runs it names ("SNAPSHOT_ROOT/NAME", in
    any argument, alone or in a comma list) under `runs_dir`."""
    def moved(value):
        return ",".join(f"{runs_dir}/{part[len(snapshot_root) + 1:]}"
                        if part.startswith(f"{snapshot_root}/") and part[len(snapshot_root) + 1:] in names else part
                        for part in value.split(","))

    out = list(TRAIN)
    for i, word in enumerate(words[2:], start=2):
        if words[i - 1] == "--model-dir":
            out.append(str(model_dir))
        elif word.startswith("--model-dir="):
            out.append(f"--model-dir={model_dir}")
        else:
            key, equals, value = word.rpartition("=")
            out.append(f"{key}={moved(value)}" if equals else moved(word))
    if "--model-dir" not in out and not any(word.startswith("--model-dir=") for word in out):
        out += ["--model-dir", str(model_dir)]
    return out


def missing_inputs(plan, runs_dir, snapshot_root):
    """["RUN: SETTING: what is missing", ...] of the inputs the commands of
    `plan` (plan_commands') read that are not there and that no run of the
    plan before them makes (see the module's docstring)."""
    made, missing = set(), []
    run_roots = (f"{runs_dir}/", f"{snapshot_root}/")
    for name, command in plan:
        model_dir = Path(runs_dir) / name
        if command is not None:
            missing += [f"{name}: {problem}" for problem in _missing(_reads(command, model_dir), made, run_roots)]
        made.add(model_dir)
    return missing


def _reads(command, model_dir):
    """[(how the command names it, SETTING, value)] of what a plan's
    command reads: its --data and --set values, or those an interrupted
    run's config.json holds."""
    if "--resume" in command:
        path = model_dir / CONFIG_FILE
        experiment = load_run(model_dir).experiment
        return [(f"{path}: data.path", "data.path", experiment.data.path),
                (f"{path}: model.word_vectors", "model.word_vectors", experiment.model.word_vectors)]
    args = train.parse_args(command[len(TRAIN):])
    reads = [(f"--data {args.data}", "data.path", args.data)] if args.data else []
    for item in args.set:
        key, _, value = item.partition("=")
        reads.append((f"--set {item}", key.strip(), value))
    return reads


def _missing(reads, made, run_roots):
    """What of `reads` (_reads') is not there: a data folder, a word
    vector file or folder, or a run directory (a value under `run_roots`)
    that is neither finished nor in `made`."""
    problems = []
    for named, key, value in reads:
        if key == "data.path" and not Path(value).is_dir():
            problems.append(f"{named}: no such folder")
        elif key == "model.word_vectors" and value not in (None, "null", TRAINED_WORD_VECTORS) and not Path(value).exists():
            problems.append(f"{named}: file not found")
        for part in str(value).split(","):
            if part.startswith(run_roots) and Path(part) not in made and not (Path(part) / "results.json").is_file():
                problems.append(f"{named}: {part} is no finished run, and no run before this one makes it")
    return problems


if __name__ == "__main__":
    sys.exit(main())

"""The results tables of README.md and docs/ and the recall@K plot, generated from training runs.

    python -m tools.report runs/                                  # the tables of these runs, as markdown, to stdout
    python -m tools.report runs/ --plot docs/recall_at_k.png --update README.md docs/*.md --save-snapshot results/runs.json
    python -m tools.report --snapshot results/runs.json --update README.md docs/*.md

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
markdown FILEs: every table of tables.toml and "other-runs" (the runs no
table names; empty when there are none) need a block in exactly one of
them, once; a block whose
ID is no table's is an error naming its file and the ID. `--save-snapshot`
keeps what was read from the runs in one small JSON file, from which
`--snapshot` regenerates the same output without the runs (the tables of
README.md and docs/*.md are checked against it by the tests); a
test-suite table's FILE is read either way. Given both RUNS and
`--snapshot`, the report reads the snapshot's runs and those under RUNS.

Nothing recorded is lost unless `--replace` says so. `--save-snapshot`
over an existing snapshot reads it first and keeps its runs, so runs
under RUNS join the recorded ones (the first command above adds yours to
results/runs.json and the tables). A run under RUNS (or of --snapshot)
whose name is a recorded run's and whose record differs is refused,
naming both; `--update` is refused when a table of the markdown files
would lose rows (its runs not among those read), and `--plot` over an
existing figure unless a snapshot is read. With `--replace`, the outputs
are made from what was read alone: --save-snapshot holds only its runs,
and a run under RUNS replaces the recorded run of its name. Printing
alone loses nothing: a run under RUNS then replaces the snapshot's.

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
import json
import sys
from pathlib import Path

from common.errors import ArgumentParser, InputError, run_command
from common.files import atomic_write, check_output_file, read_text
from common.wording import counted
from tools.plot_training import figure_format
from tools.report.checks import check_papers, check_tables
from tools.report.inputs import RESULTS_DIR, read_records, read_runs_and_snapshots, read_test_suites, read_toml
from tools.report.markdown import check_blocks, shrinking_blocks, updated_markdown
from tools.report.plot import plot_recalls
from tools.report.tables import render, table_runs


def parse_args(argv):
    parser = ArgumentParser(prog="python -m tools.report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="?", help="a directory of model directories written by train.py (any depth)")
    parser.add_argument("--snapshot", help="read the runs from a snapshot written by --save-snapshot instead")
    parser.add_argument("--save-snapshot", metavar="JSON", help="write what was read from the runs to this file")
    parser.add_argument("--tables", default=str(RESULTS_DIR / "tables.toml"), help="(default: %(default)s)")
    parser.add_argument("--papers", default=str(RESULTS_DIR / "papers.toml"), help="(default: %(default)s)")
    parser.add_argument("--update", metavar="MARKDOWN", nargs="+",
                        help="rewrite the tables' blocks in these files (each block in exactly one of them)")
    parser.add_argument("--plot", metavar="FIGURE", help="draw the recall@K curves of the first table's runs, "
                        "in the format of the file's extension (.png, .pdf, .svg, ...)")
    parser.add_argument("--replace", action="store_true",
                        help="let the outputs lose recorded runs: --save-snapshot holds only the runs read, a run of "
                        "RUNS replaces a recorded run of its name, --update and --plot may show fewer")
    return parser.parse_args(argv)


def write_all(outputs):
    """Writes each (path, bytes) of `outputs`, atomically; when one fails
    after others were written, the error says which were. Returns the
    paths written."""
    written = []
    for path, data in outputs:
        try:
            atomic_write(path, lambda file, data=data: file.write(data))
        except InputError as error:
            if written:
                raise InputError(f"{error}; already written: {', '.join(written)}") from None
            raise
        written.append(str(path))
    return written


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
    # What the outputs were made from: the snapshot read, and the one --save-snapshot would replace.
    snapshots = list(dict.fromkeys(str(path) for path in (_kept_snapshot(args), args.snapshot) if path))
    if args.plot and Path(args.plot).exists() and not snapshots and not args.replace:
        raise InputError(f"--plot {args.plot}: exists, and the runs it draws are not known here; draw it from the "
                         "recorded runs too (--snapshot, or --save-snapshot over them) or give --replace")
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
    # Only printing loses nothing: then the runs read replace those recorded.
    root, runs, origins = read_runs_and_snapshots(args.runs, snapshots, replace=args.replace or not outputs)

    # Everything made in memory, then written.
    blocks = render(tables, papers, runs, root, args.tables, origins, suites, records)
    writes, plotted = [], []
    if args.save_snapshot:
        text = json.dumps({"root": root, "runs": runs}, indent=1, sort_keys=True) + "\n"
        writes.append((args.save_snapshot, text.encode("utf-8")))
    if args.update:
        shrinking = [] if args.replace else shrinking_blocks(markdown, blocks, runs.keys())
        if shrinking:
            lost = ", ".join(f"{path} {table_id!r} {now} → {after}" for path, table_id, now, after in shrinking)
            raise InputError(f"--update: tables would lose rows ({lost}): their runs are not among those read; add "
                             "--snapshot with the recorded runs, or give --replace")
        table_ids = [table["id"] for table in tables]
        writes += [(path, text.encode("utf-8")) for path, text in updated_markdown(markdown, blocks, table_ids).items()]
    if args.plot:
        if not any(row.get("run") in runs for row in run_tables[0]["rows"]):
            raise InputError(f"--plot {args.plot}: none of the runs of the first table of {args.tables} "
                             f"({run_tables[0]['id']!r}) is there to draw")
        plotted, image = plot_recalls(run_tables[0], runs, fmt, origins)
        writes.append((args.plot, image))
    written = write_all(writes)
    for series in plotted:
        print(json.dumps(series), file=sys.stderr)
    if written:
        print(f"written ({counted(len(runs), 'run')}): {', '.join(written)}", file=sys.stderr)
    if args.snapshot is None and not args.update:
        # A report on the user's own runs: the tables that show one of them, not
        # the test-suite sentences and recorded reports README.md and docs/ carry.
        shown = {table["id"] for table in tables if table_runs(table) & runs.keys()} | {"other-runs"}
        blocks = {table_id: block for table_id, block in blocks.items() if table_id in shown}
    print("\n\n".join(f"<!-- report:{table_id} -->\n{block}\n<!-- /report:{table_id} -->" for table_id, block in blocks.items()))
    return 0


def _kept_snapshot(args):
    """The snapshot --save-snapshot would replace, whose runs the new one
    keeps (None: a new file, or --replace)."""
    if args.save_snapshot and Path(args.save_snapshot).exists() and not args.replace:
        return args.save_snapshot
    return None

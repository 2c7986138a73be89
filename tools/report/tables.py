"""The blocks of the tables as markdown: `render` makes every table's, a
table of runs (render_table) with its mean, paper and record rows, the
report's own table of the runs in no table, and a test-suite table's
sentence."""

import math
import statistics

from common.records import is_number
from common.wording import counted
from tools.report.cells import commands_block, format_value, paper_row, row_labels, run_number, train_command, with_sums
from tools.report.columns import (MEASURED_COLUMNS, METRICS, TIME_COLUMNS, TemplateColumn, column_header, metric_label,
                                  parse_column)
from tools.report.comparisons import render_comparisons
from tools.report.inputs import read_records, read_test_suites, select_report


def render(tables, papers, runs, root, source="tables.toml", origins=None, suites=None, records=None):
    """{table id: markdown block} of every table (checked by check_tables)
    with at least one row, plus "other-runs" for the runs that no table
    names (an empty block when every run is in a table, which clears a
    stale one); `source` (the tables' file) names the table in errors, `origins`
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
            if block is None:
                block = "No claim of this table has all its runs recorded yet."
        else:
            block = render_table(table, papers, runs, root, source, origins, records)
            if block is None and _reproducible(table):
                block = (f"No run of this table is recorded yet: `python -m tools.reproduce {table['id']}` "
                         "trains its runs, then prints it.")
        if block is not None:
            blocks[table["id"]] = block
    others = [name for name in runs if name not in named]
    blocks["other-runs"] = ""
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
    columns = [parse_column(spec, f"{source}: table {table['id']!r}") for spec in table["columns"]]
    records = records or {}
    rows = [row for row in table["rows"] if _row_runs(row) <= runs.keys() and row.get("record", "") in {"", *records}]
    if not any(_row_runs(row) or "record" in row for row in rows):
        return None
    metrics = {selection_metric(runs[row["run"]]) for row in rows if "run" in row}
    headers = [*table["labels"], *(column_header(column, metrics) for column in columns)]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        cells = _row_cells(row, columns, papers, runs, table.get("spread", False), origins or {}, records,
                           name_metric=len(metrics) > 1)
        lines.append("| " + " | ".join(cells) + " |")
    names = [name for row in rows for name in ([row["run"]] if "run" in row else row.get("mean", []))]
    files = list(dict.fromkeys(row["record"] for row in rows if "record" in row))
    commands = [train_command(runs[name], root, name) for name in dict.fromkeys(names)]
    commands += list(dict.fromkeys(records[file]["command"] for file in files))
    table_text = "\n".join(lines)
    made = [_record_sentence(file, records[file]) for file in files]
    if made:
        table_text += "\n\n" + "\n".join(made)
    if table.get("commands") == "none":
        return table_text
    return commands_block(commands, table.get("commands") == "details") + "\n\n" + table_text


def _row_runs(row):
    return set(row.get("mean", [])) | ({row["run"]} if "run" in row else set())


def table_runs(table):
    """The names of the runs a table (checked by check_tables) shows: its
    rows' runs, or the runs its comparisons' samples name; none for a
    test-suite table."""
    if "compare" in table:
        return {item for claim in table["compare"] for item in (*claim["a"], *claim["b"]) if isinstance(item, str)}
    return {name for row in table.get("rows", []) for name in _row_runs(row)}


def _row_cells(row, columns, papers, runs, spread, origins, records, name_metric=False):
    if "record" in row:
        report = with_sums(select_report(records[row["record"]], row))
        origin = f"results/{row['record']}"
        measured = [runs[name] for name in row.get("measured", []) if name in runs]
        return row_labels(row) + [_measured_cell(measured) if column in MEASURED_COLUMNS
                                  else _record_cell(column, report, origin) for column in columns]
    if "run" in row:
        record = runs[row["run"]]
        paper = with_sums(paper_row(papers, row["paper"])) if "paper" in row else {}
        origin = origins.get(row["run"], f"run {row['run']!r}")
        return row_labels(row, record) + [_run_cell(column, record, paper, origin, name_metric) for column in columns]
    if "mean" in row:
        records = [runs[name] for name in row["mean"]]
        return row_labels(row) + [_mean_cell(column, records, spread) for column in columns]
    values = with_sums(paper_row(papers, row["paper"]))
    return row_labels(row) + [_metric_cell(column, values.get(column)) if column in METRICS else "" for column in columns]


def _mean_cell(column, records, spread):
    """A mean row's cell: the mean of a numeric column over `records`, and
    its standard deviation when `spread`; times in minutes. The cores when
    all runs had the same; empty for any other column or a run without
    the value."""
    if column == "cores":
        values = {record["cores"] for record in records}
        return _cores(values.pop()) if len(values) == 1 and None not in values else ""
    samples = [run_number(column, record) for record in records]
    if None in samples:
        return ""
    unit = ""
    if column in TIME_COLUMNS:  # minutes, so that the mean and its spread share one unit
        samples, unit = [seconds / 60 for seconds in samples], " min"
    text = format_value(column, statistics.mean(samples))
    if spread:
        text += f" ± {format_value(column, statistics.stdev(samples))}"
    return text + unit


def _measured_cell(records):
    """The mean wall and CPU time of the runs a record row names that are
    there, and their epochs (empty when none is)."""
    if not records:
        return ""
    wall, cpu = (statistics.mean(record[key] for record in records) for key in ("wall_seconds", "cpu_seconds"))
    epochs = sorted({record["epochs"] for record in records if record["epochs"] is not None})
    facts = [counted(epochs[0], "epoch", spec="g") if len(epochs) == 1 else f"{epochs[0]:g}–{epochs[-1]:g} epochs"
             if epochs else None, f"mean of {len(records)} runs" if len(records) > 1 else None]
    facts = [fact for fact in facts if fact]
    return f"{_duration(wall)} / {_duration(cpu)}" + (f" ({'; '.join(facts)})" if facts else "")


def _metric_cell(column, value):
    return "" if value is None else format_value(column, value)


def _run_cell(column, record, paper, origin, name_metric=False):
    if isinstance(column, TemplateColumn):
        return column.cell(record["fit"], origin) if column.source == "fit" else ""
    if column in METRICS or column == "dev_rsum":
        return _metric_cell(column, run_number(column, record))
    if column.startswith("paper:"):
        return _metric_cell(column[len("paper:"):], paper.get(column[len("paper:"):]))
    if column == "dev_history":
        return ", ".join(f"{value:.1f}" for value in record["dev_history"])
    if column == "best_dev_at":
        return _best_dev_at(record, name_metric)
    if column in TIME_COLUMNS:
        seconds = record[TIME_COLUMNS[column]]
        return "" if seconds is None else _duration(seconds)
    if column == "cores":
        return "" if record["cores"] is None else _cores(record["cores"])
    if column == "machine":
        return _machine(record)
    if column == "load":
        return "" if record["load_average"] is None else _load(record["load_average"])
    if column in ("epochs", "pieces"):
        return "" if record[column] is None else f"{record[column]:g}"
    if column == "peak_memory":
        size = record["peak_memory_bytes"]
        return "" if size is None else f"{size / 2**30:.1f} GiB"
    raise AssertionError(column)


def selection_metric(record):
    """The dev metric that chose a run's checkpoint (rsum, the default of
    train.selection_metric, for a run recorded before results.json named it)."""
    return record["selection_metric"] or "rsum"


def _best_dev_at(record, name_metric):
    """Which validation's checkpoint a run kept, of how many: "2 of 3", and
    its metric when `name_metric` ("2 of 3 by i2t mAP"). "10 of 10 (still
    rising)": the kept one was the last, the run stopped while still
    improving, undertrained at its budget. The history is of dev rsum; a
    checkpoint chosen by another metric is the validation of the kept
    checkpoint's dev rsum (each such one, if several)."""
    history = record["dev_history"]
    if not history:
        return ""
    metric = selection_metric(record)
    if metric == "rsum":
        kept = [history.index(max(history)) + 1]
    else:
        # float32 in the logs; two dev rsums differ by 0.004 at least (25,000 captions)
        kept = [i + 1 for i, rsum in enumerate(history) if math.isclose(rsum, record["dev"]["rsum"], abs_tol=1e-3)]
    if not kept:
        return ""
    named = f" by {metric_label(metric)}" if name_metric and metric != "rsum" else ""
    rising = " (still rising)" if kept == [len(history)] and len(history) > 1 else ""
    return f"{' or '.join(map(str, kept))} of {len(history)}{named}{rising}"


def _duration(seconds):
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.2f} h"


def _cores(cores):
    return f"{cores:g}"


def _machine(record):
    """A run's or a test suite's CPU and its kernels' instruction set ("AMD
    EPYC, kernels avx512"); empty for a record made before they were
    recorded."""
    facts = [record.get("cpu"), record.get("isa") and f"kernels {record['isa']}"]
    return ", ".join(fact for fact in facts if fact)


def _load(load_average):
    start, end = load_average
    return f"{start:.1f} → {end:.1f}"


def _record_cell(column, report, origin):
    if isinstance(column, TemplateColumn):
        return column.cell(report, origin) if column.source == "value" else ""
    if column in METRICS:
        value = report.get(column)
        return _metric_cell(column, value) if is_number(value) else ""
    return ""


def _record_sentence(file, record):
    """When and where a record was made, one line (its file alone when it
    recorded neither): the CPU with the instruction set its reports ran on
    (their `isa`) when they name one."""
    isas = sorted({report["isa"] for report in record["reports"] if isinstance(report.get("isa"), str)})
    facts = [record["date"][:16].replace("T", " ") + " UTC" if record["date"] else None,
             counted(record["cores"], "core", spec="g") if record["cores"] is not None else None,
             record["cpu"],
             f"kernels {'; '.join(isas)}" if isas else None,
             f"load {_load(record['load_average'])}" if record["load_average"] else None]
    facts = [fact for fact in facts if fact]
    return f"Recorded in `results/{file}`" + (f": {', '.join(facts)}." if facts else ".")


# A test-suite table ({ id, test_suite = FILE }) is one sentence made from
# the JSON FILE (relative to the tables file) that `python -m
# tools.time_tests` wrote: how the suite ended and what its time measured.

# The outcomes in the order of the sentence (pytest's summary line order
# varies); any other a plugin counts comes after them. Warnings are not
# outcomes of tests.
OUTCOMES = ("passed", "failed", "errors", "skipped", "deselected", "xfailed", "xpassed")


def suite_sentence(record):
    """One sentence: the command, its outcome counts (or how it failed),
    wall and CPU time, cores (with the CPU and its kernels' instruction
    set when recorded), load at its start and end, its date and the
    versions it ran on."""
    counts = record["counts"]
    names = [*(name for name in OUTCOMES if name in counts), *(name for name in counts if name not in OUTCOMES)]
    outcome = ", ".join(f"{counts[name]} {'error' if name == 'errors' and counts[name] == 1 else name}"
                        for name in names if counts[name] and name != "warnings")
    outcome = outcome or "no tests ran"
    if record["exit_status"] != 0:
        outcome = f"failed (exit status {record['exit_status']}): {outcome}"
    cores = counted(record["cores"], "core", spec="g")
    if machine := _machine(record):
        cores += f" ({machine})"
    versions = f"Python {record['python']}" + (f", TensorFlow {record['tensorflow']}" if record["tensorflow"] else "")
    return (f"`{record['command']}`: {outcome} in {_duration(record['wall_seconds'])} wall "
            f"({_duration(record['cpu_seconds'])} CPU) on {cores}, "
            f"load {_load(record['load_average'])}, {record['date'][:10]} ({versions}).")

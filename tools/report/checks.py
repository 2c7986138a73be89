"""The checks of papers.toml (check_papers) and tables.toml
(check_tables), as read: a malformed entry is an InputError naming the
file, the table and the key at fault."""

import re
import shlex
import string

from common.errors import InputError
from common.records import excerpt, is_command, is_number
from tools.report.columns import METRICS, parse_column


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
        parse_column(spec, where)
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise InputError(f"{where}: the key 'rows' must be a list of rows ({{ run = ... }}), got {excerpt(rows)}")
    if table.get("commands", "details") not in ("details", "none"):
        raise InputError(f"{where}: the key 'commands' can only be \"details\" (fold the commands away) or "
                         f"\"none\" (print none: another page prints them), got {excerpt(table['commands'])}")
    if not isinstance(table.get("spread", False), bool):
        raise InputError(f"{where}: the key 'spread' must be true or false, got {excerpt(table['spread'])}")
    for number, row in enumerate(rows, start=1):
        _check_row(row, f"{where}: row {number}", len(labels), papers, papers_source)


def _check_row(row, where, n_labels, papers, papers_source):
    unknown = sorted(set(row) - {"run", "mean", "paper", "record", "select", "measured", "labels", "command"})
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r}; a row has run (and command), mean, record (and select, "
                         "measured) or paper, and labels")
    if "measured" in row:
        if "record" not in row:
            raise InputError(f"{where}: 'measured' names the runs a record's estimate is measured by; the row names "
                             "no record")
        measured = row["measured"]
        if not isinstance(measured, list) or not measured or not all(isinstance(name, str) and name for name in measured):
            raise InputError(f"{where}: the key 'measured' must be a list of runs' names, got {excerpt(measured)}")
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


COMPARISON_KEYS = {"claim", "a", "b", "metric", "paper", "indicative"}
MIN_SEEDS = 3  # samples (seeds) per side of a comparison that decides


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
        indicative = comparison.get("indicative", False)
        if not isinstance(indicative, bool):
            raise InputError(f"{at}: the key 'indicative' must be true or false, got {excerpt(indicative)}")
        least = 1 if indicative else MIN_SEEDS
        for side in ("a", "b"):
            items = comparison.get(side)
            if not isinstance(items, list) or len(items) < least or not all(map(_is_sample, items)):
                raise InputError(f"{at}: the key {side!r} must be a list of at least {least} runs' names or "
                                 f"{{ record = FILE, select = {{...}} }} reports (one per seed), got {excerpt(items)}"
                                 + ("" if indicative else "; a claim of fewer seeds is `indicative = true`, "
                                    "shown without a verdict"))
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

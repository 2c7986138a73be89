"""The README's results tables and recall@K plot, generated from training runs.

    python -m tools.report runs/                                  # the tables, as markdown, to stdout
    python -m tools.report runs/ --plot docs/recall_at_k.png --update README.md --save-snapshot results/runs.json
    python -m tools.report --snapshot results/runs.json --update README.md

Reads every model directory under RUNS (any depth) that holds a
`config.json` and a `results.json` written by train.py, and the dev rsum of
every validation from its `logs/dev/` event files. Which runs make which
table, their labels and the papers' rows beside them are set in
`results/tables.toml`; the papers' numbers are in `results/papers.toml`,
copied from the papers' tables. Each table comes with the command of each
of its rows (the command line train.py recorded, its `--model-dir` written
as RUNS/<run>); a table's rows whose run is missing are left out, and runs
in no table get a table of their own at the end.

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
them (see results/tables.toml).

`--update FILE` rewrites each table's block between the lines
`<!-- report:ID -->` and `<!-- /report:ID -->` of FILE. `--save-snapshot`
keeps what was read from the runs in one small JSON file, from which
`--snapshot` regenerates the same output without the runs (the README's
tables are checked against it by the tests).
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
from common.files import check_output_file, read_text, write_json_atomically

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
# chose: a FitColumn, named in tables.toml).
RUN_COLUMNS = {
    "dev_rsum": "dev rsum",
    "dev_history": "dev rsum per validation",
    "wall_time": "wall time",
    "peak_memory": "peak memory",
}
RECALL_KS = (1, 5, 10)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="?", help="a directory of model directories written by train.py")
    parser.add_argument("--snapshot", help="read the runs from a snapshot written by --save-snapshot instead")
    parser.add_argument("--save-snapshot", metavar="JSON", help="write what was read from the runs to this file")
    parser.add_argument("--tables", default=str(RESULTS_DIR / "tables.toml"), help="(default: %(default)s)")
    parser.add_argument("--papers", default=str(RESULTS_DIR / "papers.toml"), help="(default: %(default)s)")
    parser.add_argument("--update", metavar="MARKDOWN", help="rewrite the tables' blocks in this file")
    parser.add_argument("--plot", metavar="PNG", help="draw the recall@K curves of the first table's runs")
    return parser.parse_args(argv)


# --- Reading runs ---------------------------------------------------------------------------------


def read_runs(root):
    """{run name: record} of every model directory under `root` with a
    config.json and a results.json; the name is the path below `root`."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: not a directory of training runs")
    runs = {}
    for config_path in sorted(root.rglob("config.json")):
        model_dir = config_path.parent
        if (model_dir / "results.json").is_file():
            runs[model_dir.relative_to(root).as_posix()] = read_run(model_dir)
    if not runs:
        raise InputError(f"{root}: no model directory with a config.json and a results.json below it")
    return runs


def read_run(model_dir):
    """The record of one run: what the tables need from its config.json,
    results.json and dev event files."""
    model_dir = Path(model_dir)
    config, results = (_read_json(model_dir / name) for name in ("config.json", "results.json"))
    try:
        record = {
            "model": config["model_name"],
            "preset": config["preset"],
            "command": results.get("command"),
            "wall_seconds": results.get("wall_seconds"),
            "peak_memory_bytes": results.get("peak_memory_bytes"),
            "fit": results.get("fit", {}),
            "dev": results["dev"],
            "test": results["test"],
        }
    except (KeyError, TypeError) as error:
        raise InputError(f"{model_dir}: config.json or results.json lacks {error}; not written by train.py?") from None
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
    import logging

    from tools.plot_training import read_scalars

    logging.getLogger("tensorboard").setLevel(logging.ERROR)  # "No path found after ..." at the end of every file
    steps, values = read_scalars(model_dir, "dev").get("rsum", ([], []))
    return [value for _, value in sorted(zip(steps, values))]


def read_snapshot(path):
    snapshot = _read_json(Path(path))
    if not isinstance(snapshot, dict) or set(snapshot) != {"root", "runs"}:
        raise InputError(f"{path}: not a snapshot written by `python -m tools.report --save-snapshot`")
    return snapshot["root"], snapshot["runs"]


def read_toml(path):
    try:
        with open(path, "rb") as file:
            return tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise InputError(f"{path}: {error}") from None


# --- Tables ---------------------------------------------------------------------------------------


def render(tables, papers, runs, root, source="tables.toml"):
    """{table id: markdown block} of every table with at least one row, plus
    "other-runs" for the runs that no table names; `source` (the tables'
    file) names the table in errors."""
    blocks = {}
    named = set()
    for table in tables:
        for row in table["rows"]:
            named.update(_row_runs(row))
        block = render_table(table, papers, runs, root, source)
        if block is not None:
            blocks[table["id"]] = block
    others = [name for name in runs if name not in named]
    if others:
        table = {
            "id": "other-runs",
            "labels": ["run", "model", "preset"],
            "columns": ["i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10", "rsum", "dev_rsum", "wall_time"],
            "rows": [{"run": name, "labels": [name, "`{model}`", "{preset}"]} for name in others],
        }
        blocks["other-runs"] = render_table(table, papers, runs, root)
    return blocks


def render_table(table, papers, runs, root, source="tables.toml"):
    """One table as markdown: the commands of its runs, then the table; None
    when none of its runs is there."""
    columns = [_column(spec, f"{source}: table {table['id']!r}") for spec in table["columns"]]
    rows = [row for row in table["rows"] if _row_runs(row) <= runs.keys()]
    if not any(_row_runs(row) for row in rows):
        return None
    headers = [*table["labels"], *(_header(column) for column in columns)]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        if len(row["labels"]) != len(table["labels"]):
            raise InputError(f"table {table['id']!r}: row {row['labels']} needs {len(table['labels'])} labels")
        cells = _row_cells(row, columns, papers, runs, spread=table.get("spread", False))
        lines.append("| " + " | ".join(cells) + " |")
    names = [name for row in rows for name in ([row["run"]] if "run" in row else row.get("mean", []))]
    commands = [_command(runs[name], root, name) for name in dict.fromkeys(names)]
    code = "```bash\n" + "\n".join(commands) + "\n```"
    if table.get("commands") == "details":
        code = f"<details><summary>The commands of these {len(commands)} runs</summary>\n\n{code}\n\n</details>"
    return code + "\n\n" + "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class FitColumn:
    """A column of what a run's fit chose: `template` (a format string whose
    fields are the recorded keys `keys`) filled in from its fit."""

    template: str
    header: str
    keys: tuple
    where: str = dataclasses.field(compare=False)  # the column, in errors

    @classmethod
    def parse(cls, spec, where):
        """The column of the spec { fit = TEMPLATE, header = HEADER }; a
        malformed one is an InputError naming `where`."""

        def malformed(problem):
            usage = '{ fit = "... {KEY} ... {KEY:FORMAT} ...", header = "..." }'
            return InputError(f"{where}: {problem}; a fit column is {usage}")

        unknown = sorted(set(spec) - {"fit", "header"})
        if unknown:
            raise malformed(f"unknown setting {', '.join(unknown)}")
        template, header = spec.get("fit"), spec.get("header")
        if not isinstance(template, str):
            raise malformed("fit must be a format string of recorded keys")
        if header is not None and not isinstance(header, str):
            raise malformed("header must be a string")
        try:
            parts = list(string.Formatter().parse(template))
        except ValueError as error:
            raise malformed(f"fit: {error}") from None
        keys, default_header = [], []
        for text, key, format_spec, conversion in parts:
            default_header.append(text)
            if key is None:
                continue
            if not key.isidentifier() or conversion is not None:
                field = "{" + key + ("" if conversion is None else "!" + conversion) + "}"
                raise malformed(f"the field {field} is not {{KEY}} or {{KEY:FORMAT}} of a recorded key")
            if not _is_format_spec(format_spec):
                raise malformed(f"the field {{{key}:{format_spec}}} has no valid format spec")
            keys.append(key)
            default_header.append(key)
        if not keys:
            raise malformed("fit names no recorded key")
        return cls(template, "".join(default_header) if header is None else header, tuple(dict.fromkeys(keys)), where)

    def cell(self, fit):
        """The template filled in from `fit`; empty when it lacks a key."""
        values = {key: fit.get(key) for key in self.keys}
        if None in values.values():
            return ""
        try:
            return self.template.format_map(values)
        except (ValueError, TypeError) as error:
            raise InputError(f"{self.where}: cannot format the fit {values}: {error}") from None


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
    a FitColumn; an unknown or malformed one is an InputError."""
    if isinstance(spec, dict) and "fit" in spec:
        return FitColumn.parse(spec, f"{where}: column {_toml(spec)}")
    if isinstance(spec, str) and (spec in METRICS or spec in RUN_COLUMNS or spec.removeprefix("paper:") in METRICS):
        return spec
    known = ", ".join([*METRICS, *RUN_COLUMNS, "paper:METRIC", '{ fit = "TEMPLATE", header = "HEADER" }'])
    raise InputError(f"{where}: unknown column {_toml(spec)}; known: {known}")


def _toml(value):
    """A column spec, for errors, about as tables.toml writes it."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + " }"
    return repr(value)


def _header(column):
    if isinstance(column, FitColumn):
        return column.header
    if column.startswith("paper:"):
        return "paper " + METRICS[column[len("paper:"):]][0]
    if column in METRICS:
        return METRICS[column][0]
    return RUN_COLUMNS[column]


def _row_runs(row):
    return set(row.get("mean", [])) | ({row["run"]} if "run" in row else set())


def _row_cells(row, columns, papers, runs, spread):
    if "run" in row:
        record = runs[row["run"]]
        paper = _with_sums(_paper_row(papers, row["paper"])) if "paper" in row else {}
        labels = [label.format_map(record) for label in row["labels"]]
        return labels + [_run_cell(column, record, paper) for column in columns]
    if "mean" in row:
        if len(row["mean"]) < 2:
            raise InputError(f"mean row {row['labels']}: needs at least two runs, got {row['mean']}")
        cells = []
        for column in columns:
            samples = [_number(column, runs[name]) for name in row["mean"]]
            if None in samples:
                cells.append("")
            elif spread:
                cells.append(f"{_format(column, statistics.mean(samples))} ± {_format(column, statistics.stdev(samples))}")
            else:
                cells.append(_format(column, statistics.mean(samples)))
        return row["labels"] + cells
    values = _with_sums(_paper_row(papers, row["paper"]))
    return row["labels"] + [_metric_cell(column, values.get(column)) if column in METRICS else "" for column in columns]


def _number(column, record):
    """A run's value of a numeric column (test metrics, dev rsum), else None."""
    if column in METRICS:
        return _with_sums(record["test"]).get(column)
    return record["dev"]["rsum"] if column == "dev_rsum" else None


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


def _run_cell(column, record, paper):
    if isinstance(column, FitColumn):
        return column.cell(record["fit"])
    if column in METRICS or column == "dev_rsum":
        return _metric_cell(column, _number(column, record))
    if column.startswith("paper:"):
        return _metric_cell(column[len("paper:"):], paper.get(column[len("paper:"):]))
    if column == "dev_history":
        return ", ".join(f"{value:.1f}" for value in record["dev_history"])
    if column == "wall_time":
        seconds = record["wall_seconds"]
        return "" if seconds is None else f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.1f} min"
    if column == "peak_memory":
        size = record["peak_memory_bytes"]
        return "" if size is None else f"{size / 2**30:.1f} GiB"
    raise AssertionError(column)


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


# --- Output ---------------------------------------------------------------------------------------


def update_markdown(path, blocks):
    """Replaces each block's text between `<!-- report:ID -->` and
    `<!-- /report:ID -->` in the file at `path`."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: {error}") from None
    for table_id, block in blocks.items():
        name = re.escape(table_id)
        pattern = re.compile(rf"(<!-- report:{name} -->\n)(?:.*?\n)?(<!-- /report:{name} -->)", re.S)
        if not pattern.search(text):
            raise InputError(f"{path}: no <!-- report:{table_id} --> ... <!-- /report:{table_id} --> block for table {table_id!r}")
        text = pattern.sub(lambda match: match.group(1) + block + "\n" + match.group(2), text)

    write_json_atomically(path, text)


def markdown_blocks(text):
    """{table id: block} of the report blocks in markdown text."""
    blocks = re.finditer(r"<!-- report:(\S+) -->\n(?:(.*?)\n)?<!-- /report:\1 -->", text, re.S)
    return {match.group(1): match.group(2) or "" for match in blocks}


def plot_recalls(table, runs, out):
    """R@K of image annotation and image search for the table's runs, one
    line each; returns the plotted series [{"run", "label", "i2t", "t2i"}]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(13, 6), sharey=True)
    series = []
    rows = [row for row in table["rows"] if row.get("run") in runs]
    for i, row in enumerate(rows):
        record = runs[row["run"]]
        label = " ".join(label.format_map(record).replace("`", "") for label in row["labels"])
        curves = {d: [record["test"][f"{d}_r{k}"] for k in RECALL_KS] for d in ("i2t", "t2i")}
        # 20 colours, then the same dashed.
        style = {"color": plt.cm.tab20(i % 20), "linestyle": "-" if i < 20 else "--", "marker": "o"}
        for axis, direction in zip(axes, ("i2t", "t2i")):
            axis.plot(RECALL_KS, curves[direction], label=label, **style)
        series.append({"run": row["run"], "label": label, **curves})
    for axis, title in zip(axes, ("image annotation (i2t)", "image search (t2i)")):
        axis.set_title(title)
        axis.set_xscale("log")
        axis.set_xticks(RECALL_KS, [str(k) for k in RECALL_KS])
        axis.set_xlabel("K")
        axis.grid(True, alpha=0.3)
    axes[0].set_ylabel("R@K (%), Flickr8k 1K test")
    axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    figure.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return series


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    if (args.runs is None) == (args.snapshot is None):
        raise InputError("give either a runs directory or --snapshot")
    for argument, path in (("--save-snapshot", args.save_snapshot), ("--plot", args.plot)):
        if path:
            check_output_file(path, argument)
    tables = read_toml(args.tables).get("table", [])
    papers = read_toml(args.papers)
    if args.snapshot:
        root, runs = read_snapshot(args.snapshot)
    else:
        root, runs = args.runs.rstrip("/"), read_runs(args.runs)
    try:
        blocks = render(tables, papers, runs, root, args.tables)
    except KeyError as error:
        raise InputError(f"{args.tables}: a table or row lacks the key {error}") from None
    if args.save_snapshot:
        write_json_atomically(args.save_snapshot, json.dumps({"root": root, "runs": runs}, indent=1, sort_keys=True) + "\n")
    if args.update:
        update_markdown(args.update, blocks)
    if args.plot and tables:
        for series in plot_recalls(tables[0], runs, args.plot):
            print(json.dumps(series), file=sys.stderr)
    print("\n\n".join(f"<!-- report:{table_id} -->\n{block}\n<!-- /report:{table_id} -->" for table_id, block in blocks.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

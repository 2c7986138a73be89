"""What the tables and the comparisons both print: a run's value of a
numeric column, metrics with their R-sums, a paper's row, a value
formatted for its column, a row's labels and the runs' commands."""

import shlex

from common.errors import InputError
from tools.report.columns import METRICS, RECALL_KS, TIME_COLUMNS


def run_number(column, record):
    """A run's value of a numeric column (test metrics, dev rsum, seconds
    of a time column), else None."""
    if column in METRICS:
        return with_sums(record["test"]).get(column)
    if column == "dev_rsum":
        return record["dev"].get("rsum")
    return record[TIME_COLUMNS[column]] if column in TIME_COLUMNS else None


def paper_row(papers, key):
    paper, _, name = key.partition("/")
    try:
        return papers[paper][name]
    except KeyError:
        raise InputError(f"papers table: no row {key!r}") from None


def with_sums(metrics):
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


def format_value(column, value):
    spec = METRICS[column][1] if column in METRICS else ".1f"
    if spec == "rank":
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
    return format(value, spec)


def row_labels(row, record=None):
    """A row's labels, its run's {model} and {preset} filled in."""
    fields = {"model": record["model"], "preset": record["preset"]} if record else {}
    return [label.format_map(fields) for label in row["labels"]]


def train_command(record, root, name):
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


def commands_block(commands, folded):
    """The commands as a bash block, folded away in <details> when `folded`."""
    code = "```bash\n" + "\n".join(commands) + "\n```"
    if folded:
        summary = "The command of this run" if len(commands) == 1 else f"The commands of these {len(commands)} runs"
        code = f"<details><summary>{summary}</summary>\n\n{code}\n\n</details>"
    return code

"""A table's columns: the test metrics (METRICS), what describes a run
(RUN_COLUMNS), and the columns a template fills in from a run's fit or a
recorded report (TemplateColumn); `parse_column` reads one as tables.toml
writes it."""

import dataclasses
import re
import string

from common.errors import InputError

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
    "best_dev_at": "best dev at",
    "epochs": "epochs",
    "pieces": "pieces",
    "wall_time": "wall time",
    "cpu_time": "CPU time",
    "cores": "cores",
    "machine": "machine",
    "load": "load (start → end)",
    "peak_memory": "peak memory",
}
# A column of a record row that names runs (its `measured` key, e.g. a
# cost estimate's paper-length runs): their mean wall and CPU time and
# their epochs, beside the record's estimate.
MEASURED_COLUMNS = {"measured_time": "measured: wall / CPU (epochs)"}
# The time columns and the results.json key of their seconds: a run's
# wall time, and the CPU time (user + system) of its process.
TIME_COLUMNS = {"wall_time": "wall_seconds", "cpu_time": "cpu_seconds"}
RECALL_KS = (1, 5, 10)


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


def parse_column(spec, where):
    """A table's column: the name of a metric or run column (as written) or
    a TemplateColumn; an unknown or malformed one is an InputError."""
    if isinstance(spec, dict) and ("fit" in spec or "value" in spec):
        return TemplateColumn.parse(spec, f"{where}: column {_toml(spec)}")
    if isinstance(spec, str) and (spec in METRICS or spec in RUN_COLUMNS or spec in MEASURED_COLUMNS
                                  or spec.removeprefix("paper:") in METRICS):
        return spec
    known = ", ".join([*METRICS, *RUN_COLUMNS, *MEASURED_COLUMNS, "paper:METRIC", '{ fit = "TEMPLATE", header = "HEADER" }',
                       '{ value = "TEMPLATE", header = "HEADER" }'])
    raise InputError(f"{where}: unknown column {_toml(spec)}; known: {known}")


def _toml(value):
    """A column spec, for errors, about as tables.toml writes it."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + " }"
    return repr(value)


def column_header(column, selection_metrics=()):
    """A column's header; best_dev_at's names the dev metric that chose the
    checkpoints (`selection_metrics`, of the table's runs) when they share
    one ("best dev rsum at")."""
    if column == "best_dev_at" and len(selection_metrics) == 1:
        return f"best dev {metric_label(*selection_metrics)} at"
    if isinstance(column, TemplateColumn):
        return column.header
    if column.startswith("paper:"):
        return "paper " + METRICS[column[len("paper:"):]][0]
    if column in METRICS:
        return METRICS[column][0]
    return RUN_COLUMNS.get(column) or MEASURED_COLUMNS[column]


def metric_label(metric):
    """A metric's name in a header, with its direction: "rsum", "i2t mAP",
    "i2t R@5"."""
    label = METRICS[metric][0] if metric in METRICS else metric
    direction = metric.partition("_")[0]
    return label if direction == metric or label.startswith(direction) else f"{direction} {label}"

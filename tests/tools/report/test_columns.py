"""A table's columns (tools.report.columns): fit and value columns, whose
templates are filled in from what a run (or a report) recorded, their
default headers, a malformed one as an error naming the tables file, the
table and the column, and that the report knows no model's keys."""

import re
from pathlib import Path

import pytest

from common.errors import InputError
from tests.tools.report.helpers import run_record
from tools import report
from tools.report import columns


def test_fit_columns_fill_in_the_keys_a_run_recorded():
    runs = {
        "ridge": run_record({"eta": 0.003, "dev_score": 261.82, "share": 0.144, "n": 7}),
        "no-share": run_record({"eta": 0.01, "dev_score": 99.0}),  # recorded no "share"
        "ensemble": run_record({"members": "a, b, c"}),
        "nothing": run_record({}),
        "null": run_record({"eta": None, "dev_score": 1.0, "share": 0.5}),  # a key recorded as null is not there
    }
    table = {
        "id": "fits",
        "labels": ["run"],
        "columns": [
            "rsum",
            {"fit": "{eta:g} / {dev_score:.1f}", "header": "η / dev"},
            {"fit": "{share:.1%}"},  # header: the key
            {"fit": "{members}", "header": "members"},
            {"fit": "{{{n:d}}} of {eta}"},  # escaped braces and text around the fields
        ],
        "rows": [
            *({"run": name, "labels": [name]} for name in runs),
            {"mean": ["ridge", "no-share"], "labels": ["mean"]},
        ],
    }
    block = report.render_table(table, {}, runs, "runs")
    assert block.split("\n\n", 1)[1] == """\
| run | rsum | η / dev | share | members | {n} of eta |
|---|---|---|---|---|---|
| ridge | 20.0 | 0.003 / 261.8 | 14.4% |  | {7} of 0.003 |
| no-share | 20.0 | 0.01 / 99.0 |  |  |  |
| ensemble | 20.0 |  |  | a, b, c |  |
| nothing | 20.0 |  |  |  |  |
| null | 20.0 |  | 50.0% |  |  |
| mean | 20.0 |  |  |  |  |"""


def test_the_report_knows_no_models_fit_keys():
    for module in Path(report.__file__).parent.glob("*.py"):
        assert not re.search(r"cca|hglmm|laplacian|members|η", module.read_text(), re.IGNORECASE), module.name


@pytest.mark.parametrize(("column", "problem"), [
    ({"fit": "{eta:g"}, "fit: "),  # then Python's words for it
    ({"fit": "eta}"}, "fit: "),
    ({"fit": "eta"}, "fit names no recorded key"),
    ({"fit": "{} / {0}"}, "the field {} is not {KEY} or {KEY:FORMAT} of a recorded key"),
    ({"fit": "{eta.real}"}, "the field {eta.real} is not"),
    ({"fit": "{eta[0]}"}, "the field {eta[0]} is not"),
    ({"fit": "{eta!r}"}, "the field {eta!r} is not"),
    ({"fit": "{eta:zz}"}, "the field {eta:zz} has no valid format spec"),
    ({"fit": "{eta:{width}}"}, "the field {eta:{width}} has no valid format spec"),
    ({"fit": 3}, "fit must be a format string of recorded keys"),
    ({"fit": "{eta}", "header": 1}, "header must be a string"),
    ({"fit": "{eta}", "heading": "η"}, "unknown setting heading"),
])
def test_a_malformed_fit_column_is_an_error_naming_the_table_and_the_column(column, problem):
    table = {"id": "t", "labels": ["run"], "columns": ["rsum", column], "rows": [{"run": "a", "labels": ["a"]}]}
    with pytest.raises(InputError) as error:
        report.render_table(table, {}, {"a": run_record({"eta": 0.5})}, "runs")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"tables.toml: table 't': column {columns._toml(column)}: {problem}")


def test_fit_column_errors_from_the_command_name_the_tables_file(runs_dir, capsys):
    runs, tables, papers = runs_dir
    common = [str(runs), "--tables", str(tables), "--papers", str(papers)]
    tables.write_text('[[table]]\nid = "bad"\nlabels = ["m"]\ncolumns = ["rsum", { fit = "{cca_eta:g" }]\n'
                      'rows = [{ run = "a", labels = ["a"] }]\n')
    assert report.main(common) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tables}: table 'bad': column {{ fit = '{{cca_eta:g' }}: fit: ") and err.count("\n") == 1
    assert err.endswith('; a fit column is { fit = "... {KEY} ... {KEY:FORMAT} ...", header = "..." }\n')
    # "fit:KEY" is not a column: a fit column is an inline table.
    tables.write_text('[[table]]\nid = "bad"\nlabels = ["m"]\ncolumns = ["fit:cca_eta"]\nrows = [{ run = "a", labels = ["a"] }]\n')
    assert report.main(common) == 2
    assert f"error: {tables}: table 'bad': unknown column 'fit:cca_eta'; known: " in capsys.readouterr().err
    # A format the recorded value cannot take (a string as a number).
    tables.write_text('[[table]]\nid = "bad"\nlabels = ["m"]\ncolumns = [{ fit = "{cca_eta:.1f} {cca_dev_rsum:d}" }]\n'
                      'rows = [{ run = "a", labels = ["a"] }]\n')
    assert report.main(common) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tables}: table 'bad': column {{ fit = '{{cca_eta:.1f}} {{cca_dev_rsum:d}}' }}: cannot format the fit "
                          "{'cca_eta': 0.01, 'cca_dev_rsum': 99.5}: ") and err.count("\n") == 1
    assert err.endswith(f" (the fit of {runs / 'a' / 'results.json'})\n")  # and the run whose value it is


def test_value_columns_may_index_a_list_but_fit_columns_may_not():
    assert report.TemplateColumn.parse({"value": "{ci[0]:.1f}"}, "c").keys == ("ci",)
    with pytest.raises(InputError, match=r"the field \{ci\.real\} is not"):
        report.TemplateColumn.parse({"value": "{ci.real}"}, "c")

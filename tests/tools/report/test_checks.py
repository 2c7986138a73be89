"""The checks of tables.toml and papers.toml (tools.report.checks): a
malformed table, row, label, comparison, record row or test-suite table,
or a malformed paper's row, is one error naming the file, the table and
the key at fault, before any run is read and any output made."""

import shutil
import tomllib

import pytest

from common.errors import InputError
from tests.tools.report.helpers import SUITE_TABLE, TABLE, fails, update_argv
from tools import report


@pytest.mark.parametrize(("text", "problem"), [
    ('[table]\nid = "t"\nlabels = ["m"]\ncolumns = ["rsum"]\nrows = []\n', ": [table] must be [[table]]"),
    ('table = 3\n', ": 'table' must be [[table]] entries, got 3"),
    ('tables = []\n', ": unknown key 'tables'; the file holds only [[table]] entries"),
    ('[[tabel]]\nid = "t"\n', ": unknown key 'tabel'"),
    ('[[table]]\nlabels = ["m"]\n', ": [[table]] number 1: the key 'id' must be a name"),
    ('[[table]]\nid = "two words"\n', ": [[table]] number 1: the key 'id' must be a name"),
    ('[[table]]\nid = "other-runs"\nlabels = ["m"]\ncolumns = []\nrows = []\n', ": table 'other-runs': the id 'other-runs' is the report's own"),
    (TABLE + 'rows = []\n' + TABLE + 'rows = []\n', ": table 't': a second table of this id"),
    (TABLE + 'rows = []\ncaption = "x"\n', ": table 't': unknown key 'caption'"),
    ('[[table]]\nid = "t"\nlabels = "m"\ncolumns = []\nrows = []\n', ": table 't': the key 'labels' must be a list"),
    ('[[table]]\nid = "t"\nlabels = ["m"]\ncolumns = "rsum"\nrows = []\n', ": table 't': the key 'columns' must be a list of columns"),
    ('[[table]]\nid = "t"\nlabels = ["m"]\ncolumns = [3]\nrows = []\n', ": table 't': unknown column 3"),
    ('[[table]]\nid = "t"\nlabels = ["m"]\ncolumns = ["rsum"]\n[table.rows]\nrun = "a"\n', ": table 't': the key 'rows' must be a list of rows"),
    (TABLE + 'rows = ["a"]\n', ": table 't': the key 'rows' must be a list of rows"),
    (TABLE + 'rows = []\ncommands = "folded"\n', ": table 't': the key 'commands' can only be \"details\" (fold the commands away) or \"none\""),
    (TABLE + 'rows = []\nspread = "yes"\n', ": table 't': the key 'spread' must be true or false"),
    (TABLE + 'rows = [{ runs = "a", labels = ["a"] }]\n', ": table 't': row 1: unknown key 'runs'"),
    (TABLE + 'rows = [{ labels = ["a"] }]\n', ": table 't': row 1: names no run, mean, record or paper"),
    (TABLE + 'rows = [{ run = 3, labels = ["a"] }]\n', ": table 't': row 1: the key 'run' must be a run's name"),
    (TABLE + 'rows = [{ run = "a", mean = ["a", "b"], labels = ["a"] }]\n', ": table 't': row 1: has both 'run' and 'mean'"),
    (TABLE + 'rows = [{ mean = "a b", labels = ["a"] }]\n', ": table 't': row 1: the key 'mean' must be a list of at least two"),
    (TABLE + 'rows = [{ mean = ["a", "b"], paper = "p/x", labels = ["a"] }]\n', ": table 't': row 1: a mean row has no paper"),
    (TABLE + 'rows = [{ run = "a", labels = ["a"] }, { paper = "p/y", labels = ["p"] }]\n', ": table 't': row 2: the key 'paper' must name a row PAPER/ROW of "),
    (TABLE + 'rows = [{ paper = "p", labels = ["p"] }]\n', ": table 't': row 1: the key 'paper' must name a row"),
    (TABLE + 'rows = [{ paper = 3, labels = ["p"] }]\n', ": table 't': row 1: the key 'paper' must name a row"),
    (TABLE + 'rows = [{ run = "a" }]\n', ": table 't': row 1: the key 'labels' must be a list of 1 strings"),
    (TABLE + 'rows = [{ run = "a", labels = ["a", "b"] }]\n', ": table 't': row 1: the key 'labels' must be a list of 1 strings"),
    (TABLE + 'rows = [{ run = "a", labels = [1] }]\n', ": table 't': row 1: the key 'labels' must be a list of 1 strings"),
    (TABLE + 'rows = [{ run = "a", labels = ["set {x"] }]\n', ": table 't': row 1: the label 'set {x': "),
    (TABLE + 'rows = [{ run = "a", labels = ["x}"] }]\n', ": table 't': row 1: the label 'x}': "),
    (TABLE + 'rows = [{ run = "a", labels = ["{seed}"] }]\n', ": table 't': row 1: the label '{seed}' has the placeholder {seed}"),
    (TABLE + 'rows = [{ run = "a", labels = ["{}"] }]\n', ": table 't': row 1: the label '{}' has the placeholder {}"),
    (TABLE + 'rows = [{ run = "a", labels = ["{model!r}"] }]\n', "the label '{model!r}' has the placeholder {model!r}"),
    (TABLE + 'rows = [{ run = "a", labels = ["{model:>9}"] }]\n', "the label '{model:>9}' has the placeholder {model:>9}"),
    (TABLE + 'rows = [{ paper = "p/x", labels = ["{model}"] }]\n', ": table 't': row 1: the label '{model}' has the placeholder"),
    (TABLE + 'rows = [{ mean = ["a", "b"], labels = ["{preset}"] }]\n', ": table 't': row 1: the label '{preset}' has the placeholder"),
])
def test_a_malformed_tables_toml_is_an_error_naming_it_and_the_table(workspace, capsys, text, problem):
    workspace["tables"].write_text(text)
    # Before the runs are read (they are gone) and before any output.
    shutil.rmtree(workspace["runs"])
    err = fails(capsys, workspace, [str(workspace["runs"]), *update_argv(workspace), "--save-snapshot", str(workspace["out"] / "s.json")],
                problem)
    assert err.startswith(f"error: {workspace['tables']}: ")
    if "must be a list of 1 strings" in problem or "placeholder" in problem:
        assert "{model} and {preset}" in err or "strings" in err


@pytest.mark.parametrize(("text", "problem"), [
    ('p = "x"\n', ": p must be a table [p] of the paper's rows, got \"x\""),
    ('[p]\nx = 3\n', ": p.x must be a table [p.x] of the row's metrics, got 3"),
    ('[p]\nsource = 3\n', ": p.source must be a string, got 3"),
    ('[p.x]\ni2t_r1 = "30"\n', ": p.x.i2t_r1 must be a number, got \"30\""),
    ('[p.x]\ni2t_R1 = 30\n', ": p.x.i2t_R1: unknown metric; known: i2t_r1, "),
])
def test_a_malformed_papers_toml_is_an_error_naming_it_and_the_key(workspace, capsys, text, problem):
    workspace["papers"].write_text(text)
    err = fails(capsys, workspace, ["--snapshot", str(workspace["snapshot"]), *update_argv(workspace)], problem)
    assert err.startswith(f"error: {workspace['papers']}: ")


def test_a_missing_test_suite_record_or_a_malformed_test_suite_table_is_an_error(suite_workspace, capsys):
    argv = ["--snapshot", str(suite_workspace["snapshot"]), *update_argv(suite_workspace)]
    suite_workspace["suite"].unlink()
    fails(capsys, suite_workspace, argv, f"{suite_workspace['suite']}: ")
    tables = suite_workspace["tables"]
    tables.write_text(TABLE + 'rows = []\n' + SUITE_TABLE + 'labels = ["m"]\n')
    fails(capsys, suite_workspace, argv, f"{tables}: table 'suite': unknown key 'labels'; a test-suite table has only id and test_suite")
    tables.write_text(TABLE + 'rows = []\n' + SUITE_TABLE.replace('"suite.json"', "3"))
    fails(capsys, suite_workspace, argv, f"{tables}: table 'suite': the key 'test_suite' must be the path of a JSON file")


def test_measured_runs_belong_to_a_record_row():
    table = {"id": "t", "labels": ["x"], "columns": ["rsum"], "rows": [{"run": "a", "measured": ["b"], "labels": ["x"]}]}
    with pytest.raises(InputError, match="row 1: 'measured' names the runs a record's estimate is measured by"):
        report.check_tables({"table": [table]}, {}, "tables.toml")


@pytest.mark.parametrize("comparison, problem", [
    ({"claim": "A > B", "a": ["a0", "a1"], "b": ["b0", "b1", "b2"]}, "the key 'a' must be a list of at least 3 runs' names"),
    ({"claim": "", "a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"]}, "the key 'claim' must be the claim's words"),
    ({"claim": "A > B", "a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"], "metric": "r1"}, "the key 'metric' must be one of"),
    ({"claim": "A > B", "a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"], "paper": ["p/x"]}, "the key 'paper' must be two rows"),
    ({"claim": "A > B", "a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"], "seeds": 3}, "unknown key 'seeds'"),
])
def test_a_malformed_comparison_names_the_table_and_the_key(comparison, problem):
    with pytest.raises(InputError) as error:
        report.check_tables({"table": [{"id": "claims", "compare": [comparison]}]}, {"p": {"x": {}}}, "tables.toml")
    assert str(error.value).startswith(f"tables.toml: table 'claims': comparison 1: {problem}")


def test_a_claim_of_one_seed_must_say_it_is_indicative():
    claim = {"claim": "A > B", "a": ["a0"], "b": ["b0"]}
    with pytest.raises(InputError, match="comparison 1: the key 'a' must be a list of at least 3 .* `indicative = true`"):
        report.check_tables({"table": [{"id": "claims", "compare": [claim]}]}, {}, "tables.toml")
    with pytest.raises(InputError, match="comparison 1: the key 'indicative' must be true or false"):
        report.check_tables({"table": [{"id": "claims", "compare": [{**claim, "indicative": "yes"}]}]}, {}, "tables.toml")


@pytest.mark.parametrize("row, problem", [
    ('{ record = "bench/quick.txt", labels = ["a"] }', "the key 'record' must be the path of a recorded JSON file"),
    ('{ record = "a.json", select = [1], labels = ["a"] }', "the key 'select' must be a table of report keys"),
    ('{ run = "a", select = { model = "gru" }, labels = ["a"] }', "'select' chooses among a record's reports"),
    ('{ run = "a", record = "a.json", labels = ["a"] }', "has both 'run' and 'record'"),
    ('{ record = "a.json", paper = "p/x", labels = ["a"] }', "a record row has no paper"),
])
def test_a_malformed_record_row_names_the_table_and_the_row(row, problem):
    data = tomllib.loads(f'[[table]]\nid = "t"\nlabels = ["m"]\ncolumns = ["rsum"]\nrows = [{row}]\n')
    with pytest.raises(InputError) as error:
        report.check_tables(data, {"p": {"x": {}}}, "tables.toml")
    assert str(error.value).startswith(f"tables.toml: table 't': row 1: {problem}")

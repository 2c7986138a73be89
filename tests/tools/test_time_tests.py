"""`python -m tools.time_tests`: the test suite's run, timed and recorded for the report."""

import datetime
import io
import json
from pathlib import Path

import pytest

from common import machine
from tools import report, time_tests

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.parametrize(("lines", "counts"), [
    (["=== 894 passed, 3 deselected in 664.82s (0:11:04) ==="], {"passed": 894, "deselected": 3}),
    (["==== 2 failed, 880 passed, 4 skipped, 3 deselected, 1 xfailed, 1 xpassed, 5 warnings, 1 error in 700.10s (0:11:40) ===="],
     {"failed": 2, "passed": 880, "skipped": 4, "deselected": 3, "xfailed": 1, "xpassed": 1, "warnings": 5, "errors": 1}),
    (["===== 1 failed, 2 errors in 1.00s =====", ""], {"failed": 1, "errors": 2}),
    (["85 passed in 62.77s (0:01:02)\n"], {"passed": 85}),  # -q: no borders
    (["============================ no tests ran in 0.01s ============================="], {}),
    (["!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!", "=========== 1 error in 0.30s ==========="], {"errors": 1}),
    # In colour (--color=yes), as pytest writes it.
    (["\x1b[32m========== \x1b[32m\x1b[1m3 passed\x1b[0m, \x1b[33m1 deselected\x1b[0m\x1b[32m in 0.05s\x1b[0m\x1b[32m ==========\x1b[0m"],
     {"passed": 3, "deselected": 1}),
    # The last summary line is the suite's (a test may print one of its own).
    (["=== 1 passed in 0.10s ===", "tests/x.py .", "=== 2 passed in 0.20s ==="], {"passed": 2}),
    (["ERROR: usage: python -m pytest [options] [file_or_dir] [file_or_dir] [...]", "pytest: error: unrecognized arguments: --x"],
     None),
    (["Took 3 tries in 1.5s"], None),  # not outcomes
])
def test_the_summary_line(lines, counts):
    assert time_tests.parse_summary(lines) == counts


def test_the_arguments_are_pytests_but_out():
    args = time_tests.parse_args(["tests", "-m", "slow", "--out=x.json", "-q", "-k", "not gru"])
    assert (args.out, args.pytest_args) == ("x.json", ["tests", "-m", "slow", "-q", "-k", "not gru"])
    assert time_tests.parse_args(["--out", "y.json"]).out == "y.json"
    assert vars(time_tests.parse_args([])) == {"out": str(ROOT / "results" / "test_suite.json"), "pytest_args": []}
    for argv in (["--out"], ["--out="]):
        with pytest.raises(SystemExit) as exit:
            time_tests.parse_args(argv)
        assert exit.value.code == 2


@pytest.fixture
def suite(tmp_path):
    """A throwaway test directory: one passing, one failing, one skipped test.
    The tests run it with `-n 0`, in one process: else the repository's
    pytest.ini starts two xdist workers, two more Pythons, for each run."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_good.py").write_text("import pytest\n\ndef test_good():\n    pass\n\n"
                                        "def test_skipped():\n    pytest.skip('not today')\n")
    (suite / "test_bad.py").write_text("def test_bad():\n    assert 1 == 2\n")
    return suite


def test_a_failing_suite_is_recorded_with_its_counts_and_status(suite, tmp_path):
    out = tmp_path / "suite.json"
    output = io.StringIO()
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    status, record = time_tests.time_tests([str(suite), "-q", "-n", "0", "-k", "not skipped"], out, output)
    assert status == record["exit_status"] == 1
    assert record["counts"] == {"failed": 1, "passed": 1, "deselected": 1}  # deselected: only in the summary line
    assert "1 failed, 1 passed, 1 deselected in " in output.getvalue()  # pytest's output, passed through
    assert record["command"] == f"python -m pytest {suite} -q -n 0 -k 'not skipped'"
    assert before <= datetime.datetime.fromisoformat(record["date"]) <= datetime.datetime.now(datetime.timezone.utc)
    assert record["wall_seconds"] > 0 and record["cpu_seconds"] > 0 and record["cores"] >= 1
    assert record["cpu"] == machine.cpu_model() and record["isa"] == str(machine.instruction_set())
    assert len(record["load_average"]) == 2 and record["python"].count(".") == 2
    assert json.loads(out.read_text()) == record
    # The checked-in record is one of these (written before records had a version: version 1); the
    # report takes this one and says it failed.
    assert {"version", *json.loads((ROOT / "results" / "test_suite.json").read_text())} == record.keys()
    (tmp_path / "tables.toml").write_text('[[table]]\nid = "suite"\ntest_suite = "suite.json"\n')
    tables = report.check_tables(report.read_toml(tmp_path / "tables.toml"), {}, "tables.toml")
    sentence = report.render(tables, {}, {}, "runs", str(tmp_path / "tables.toml"))["suite"]
    assert sentence.startswith(f"`python -m pytest {suite} -q -n 0 -k 'not skipped'`: failed (exit status 1): "
                               "1 passed, 1 failed, 1 deselected in ")


def test_the_command_exits_with_pytests_status(suite, tmp_path, capsys):
    (suite / "test_bad.py").unlink()
    out = tmp_path / "suite.json"
    assert time_tests.main([str(suite), "-q", "-n", "0", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["counts"] == {"passed": 1, "skipped": 1}
    assert f"recorded in {out}: " in capsys.readouterr().err
    # An --out that cannot be written is refused before the suite runs.
    assert time_tests.main([str(suite / "test_nothing.py"), "--out", str(tmp_path / "no" / "suite.json")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"error: --out {tmp_path / 'no' / 'suite.json'}: the directory {tmp_path / 'no'} does not exist\n"


def test_out_holding_another_commands_record_is_refused_before_the_suite_runs(suite, tmp_path, capsys):
    (suite / "test_bad.py").unlink()
    out = tmp_path / "suite.json"
    assert time_tests.main([str(suite), "-q", "-n", "0", "--out", str(out)]) == 0
    recorded = out.read_text()
    capsys.readouterr()
    # A run of part of the suite does not replace the whole suite's record.
    assert time_tests.main([str(suite / "test_good.py"), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == (
        f"error: --out {out}: holds the record of `python -m pytest {suite} -q -n 0`, which the record of "
        f"`python -m pytest {suite / 'test_good.py'}` would replace; give another file, or remove that one first\n")
    assert out.read_text() == recorded
    # The same command records its newer run in its place (the old record is marked, since two runs within one
    # second can write the same text).
    out.write_text(json.dumps({**json.loads(recorded), "date": "2000-01-01T00:00:00+00:00"}))
    assert time_tests.main([str(suite), "-q", "-n", "0", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["date"] != "2000-01-01T00:00:00+00:00"

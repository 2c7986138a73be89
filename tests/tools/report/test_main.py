"""`python -m tools.report` run as a process (tools/report/__main__.py):
--help prints the usage and the command's documentation, and a bad
argument or a bad input is one `error:` line on stderr and exit status 2."""

import subprocess
import sys

import pytest

from tests.tools.report.helpers import ROOT


def run_report(*argv):
    """The finished process of `python -m tools.report ARGV`, run from the repository."""
    return subprocess.run([sys.executable, "-m", "tools.report", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_help_prints_the_usage_and_the_documentation():
    done = run_report("--help")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("usage: python -m tools.report ")
    assert "The results tables of README.md and docs/ and the recall@K plot, generated from training runs." in done.stdout
    assert "--save-snapshot JSON" in done.stdout and "--replace" in done.stdout


@pytest.mark.parametrize("argv, line", [
    (["--nonsense"], "error: unrecognized arguments: --nonsense"),
    (["--tables"], "error: argument --tables: expected one argument"),
    ([], "error: give a runs directory, --snapshot, or both"),  # the command's own error, its status the process's
])
def test_a_bad_argument_is_one_error_line_and_exit_status_2(argv, line):
    done = run_report(*argv)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", line + "\n")

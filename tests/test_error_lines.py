"""Every command line says what is wrong with its arguments as it says what
is wrong with its input: one line beginning `error: `, and status 2
(`common.errors.ArgumentParser`, as `common.errors.run_command`)."""

import importlib
import re

import pytest

from tests.helpers import REPO

# Every entry point: a module of the repository run as a program.
ENTRY_POINTS = sorted(
    path.relative_to(REPO).with_suffix("").as_posix().replace("/", ".")
    for path in REPO.glob("**/*.py")
    if not path.relative_to(REPO).parts[0].startswith((".", "tests"))
    and re.search(r'^if __name__ == "__main__":', path.read_text(), re.M)
)


def test_the_entry_points_are_found():
    assert {"evaluate", "search.__main__", "tools.bench", "tools.report.__main__", "train"} <= set(ENTRY_POINTS)


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_an_unknown_option_is_one_error_line(name, capsys):
    module = importlib.import_module(name)
    # tools.time_tests passes unknown options on to pytest; its own is --out.
    argv = ["--out"] if name == "tools.time_tests" else ["--no-such-option"]
    with pytest.raises(SystemExit) as exit:
        (module.parse_args if hasattr(module, "parse_args") else module.main)(argv)
    captured = capsys.readouterr()
    assert exit.value.code == 2 and captured.out == ""
    assert re.fullmatch(r"error: [^\n]+\n", captured.err), captured.err

import pytest

from common.errors import InputError
from tools import bench_cli_errors


def test_a_mistake_is_timed_to_its_error_line(tmp_path):
    report = bench_cli_errors.time_mistake("unknown preset", ["train.py", "--model", "gru", "--preset", "quik"], 2,
                                           tmp_path)
    assert report["mistake"] == "unknown preset" and report["command"] == "python train.py --model gru --preset quik"
    assert report["error"] == "error: --preset 'quik': model 'gru' has presets paper, quick"
    assert 0 < report["seconds"] < 300


def test_a_command_without_an_error_line_is_refused(tmp_path):
    with pytest.raises(InputError, match=r"^python evaluate.py --help: ended \(status 0\) without an error line$"):
        bench_cli_errors.time_mistake("help", ["evaluate.py", "--help"], 1, tmp_path)

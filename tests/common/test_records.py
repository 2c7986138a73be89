"""`common.records`: the records of runs and measurements, declared once;
the envelope every benchmark's `--record FILE` writes."""

import datetime
import importlib.metadata
import json
import platform
from pathlib import Path

import pytest

from common import records
from common.errors import InputError


@pytest.mark.parametrize("argv", [
    ["--model", "gru", "--record", "out.json", "--preset", "quick"],
    ["--model", "gru", "--record=out.json", "--preset", "quick"],
    ["--model", "gru", "--rec", "out.json", "--preset", "quick"],  # argparse takes a prefix
    ["--record", "a.json", "--model", "gru", "--record=b.json", "--preset", "quick"],
])
def test_the_command_is_the_one_typed_without_record(argv):
    assert records.command_line("tools.bench", argv) == "python -m tools.bench --model gru --preset quick"


def test_the_command_is_quoted_for_a_shell_and_keeps_what_follows_a_double_dash():
    argv = ["../my clone", "--set", "model.name=it's", "--", "--record", "x"]
    assert records.command_line("tools.bench_vsepp", [*argv, "--record", "r.json"]) == (
        "python -m tools.bench_vsepp '../my clone' --set 'model.name=it'\"'\"'s' -- --record x --record r.json")


@pytest.mark.parametrize("path, written", [
    ("/home/me/zoo/runs/gru-quick", "runs/gru-quick"),  # inside the repository: relative to it
    ("/home/me/zoo/runs/../data/x.npy", "data/x.npy"),
    ("/home/me/glove/glove.6B.50d.txt", "<dir>/glove.6B.50d.txt"),  # outside: its name only
    ("/home/me/zoo-old/runs/a", "<dir>/a"),  # a sibling whose name starts like the repository's
    ("runs/gru-quick", "runs/gru-quick"),  # relative: as it is
    ("../elsewhere/x", "../elsewhere/x"),
])
def test_a_record_names_no_folder_of_the_machine(path, written):
    assert records.portable_path(path, Path("/home/me/zoo")) == written


def test_the_absolute_paths_of_a_command_are_made_portable_wherever_they_stand():
    words = ["--model-dir", "/home/me/zoo/runs/x", "--set", "model.word_vectors=/data/glove.txt",
             "--set", "model.members=runs/a,/home/me/zoo/runs/b,/tmp/c", "--out=/tmp/fig.png", "--set", "train.epochs=2"]
    assert records.portable_arguments(words, Path("/home/me/zoo")) == [
        "--model-dir", "runs/x", "--set", "model.word_vectors=<dir>/glove.txt",
        "--set", "model.members=runs/a,runs/b,<dir>/c", "--out=<dir>/fig.png", "--set", "train.epochs=2"]


def test_a_recorded_command_names_no_folder_of_the_machine():
    inside = str(records.REPOSITORY / "runs" / "gru-quick" / "saved_model")
    assert records.command_line("tools.bench_search", ["--saved-model", inside, "--data", "/tmp/x/f8k"], environ={}) == (
        "python -m tools.bench_search --saved-model runs/gru-quick/saved_model --data '<dir>/f8k'")


def test_the_command_names_the_variables_that_chose_its_kernels():
    environ = {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2", "HOME": "/root"}
    assert records.command_line("tools.bench", ["--model", "gru"], environ=environ) == (
        "ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 python -m tools.bench --model gru")
    assert records.command_line("tools.bench", ["--model", "gru"], environ={}) == "python -m tools.bench --model gru"


def test_the_record_holds_the_reports_in_the_envelope(tmp_path):
    path = tmp_path / "record.json"
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    recording = records.Recording(str(path), "python -m tools.bench --model gru")
    assert not path.exists()  # checked, not written, at the start
    recording.write([{"model": "gru", "train_step_ms": 12.5}])
    record = json.loads(path.read_text())
    assert list(record) == ["version", "command", "date", "cores", "cpu", "load_average", "python", "tensorflow", "reports"]
    assert record["version"] == records.VERSION
    assert record["command"] == "python -m tools.bench --model gru"
    date = datetime.datetime.fromisoformat(record["date"])
    assert date.utcoffset() == datetime.timedelta(0) and date.microsecond == 0
    assert before <= date <= datetime.datetime.now(datetime.timezone.utc)
    assert isinstance(record["cores"], int) and record["cores"] >= 1
    assert record["cpu"] is None or (isinstance(record["cpu"], str) and record["cpu"])
    assert len(record["load_average"]) == 2
    for load in record["load_average"]:
        assert isinstance(load, (int, float)) and load >= 0 and round(load, 2) == load
    assert record["python"] == platform.python_version()
    assert record["tensorflow"] == importlib.metadata.version("tensorflow")
    assert record["reports"] == [{"model": "gru", "train_step_ms": 12.5}]
    assert record == recording.record(record["reports"]).to_dict() | {"load_average": record["load_average"]}
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]  # no temporary or probe file left


def test_without_a_path_nothing_is_checked_or_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    records.Recording(None, "python -m tools.bench").write([{"model": "gru"}])
    assert list(tmp_path.iterdir()) == []


def test_a_path_that_cannot_be_written_is_refused_at_the_start(tmp_path):
    missing = tmp_path / "no" / "record.json"
    with pytest.raises(InputError) as error:
        records.Recording(str(missing), "python -m tools.bench")
    assert str(error.value) == f"--record {missing}: the directory {missing.parent} does not exist"
    with pytest.raises(InputError) as error:
        records.Recording(str(tmp_path), "python -m tools.bench")
    assert str(error.value) == f"--record {tmp_path}: is a directory; give a file name"


RESULTS = {"dev": {"rsum": 100.0}, "test": {"i2t_r1": 10.0, "rsum": 80.0}, "command": "python train.py --model gru",
           "wall_seconds": 90.0, "load_average": [0.5, 1.5], "pieces": 1}


def test_results_written_then_read_are_the_same_record(tmp_path):
    results = records.RunResults(**RESULTS, checkpoint="best/ckpt-3")
    written = json.loads(results.to_json())
    assert written["version"] == records.VERSION and "fit" not in written and "epochs" not in written  # no value: no key
    assert records.RunResults.read(written, "results.json") == results


def test_a_file_without_a_version_is_version_1_and_a_newer_one_is_refused():
    assert records.RunResults.read(RESULTS, "results.json").version == 1  # written before records had a version
    assert records.Measurement.read({"command": "x", "reports": [{}]}, "r.json").version == 1
    with pytest.raises(InputError) as error:
        records.RunResults.read({**RESULTS, "version": records.VERSION + 1}, "results.json")
    assert str(error.value) == (f"results.json: version {records.VERSION + 1}, newer than this code reads "
                                f"(up to {records.VERSION}); update the code")
    with pytest.raises(InputError, match=r"^results.json: the key 'version' must be a whole number, got \"1\"$"):
        records.RunResults.read({**RESULTS, "version": "1"}, "results.json")


@pytest.mark.parametrize("record, values, error", [
    (records.RunResults, {"test": {}}, "r.json: lacks the key 'dev' (an object of metrics whose values are numbers)"),
    (records.RunResults, {"dev": {}, "test": {"rsum": [1]}}, "r.json: the key 'test.rsum' must be a number, got [1]"),
    (records.RunResults, [], "r.json: not a JSON object; not written by train.py?"),
    (records.Measurement, {"command": "x", "reports": []},
     "r.json: the key 'reports' must be a list of the reports (JSON objects) the command printed, got []"),
    (records.TestSuiteRun, {"command": "x"}, "r.json: lacks the key 'date' (an ISO date and time (YYYY-MM-DDTHH:MM:SS...))"),
])
def test_a_missing_or_mistyped_key_is_one_line_naming_the_file_and_the_key(record, values, error):
    with pytest.raises(InputError) as raised:
        record.read(values, "r.json")
    assert str(raised.value) == error


def test_a_null_is_an_absent_key_and_unknown_keys_are_ignored():
    results = records.RunResults.read({**RESULTS, "fit": None, "cores": None, "later": 1}, "results.json")
    assert results.fit == {} and results.cores is None and not hasattr(results, "later")

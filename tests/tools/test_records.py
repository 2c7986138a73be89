"""`tools.records`: the envelope every benchmark's `--record FILE` writes."""

import datetime
import importlib.metadata
import json
import platform

import pytest

from common.errors import InputError
from tools import bench, bench_fisher_vectors, bench_order_similarity, bench_vsepp, records


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


def test_the_record_holds_the_reports_in_the_envelope(tmp_path):
    path = tmp_path / "record.json"
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    recording = records.Recording(str(path), "python -m tools.bench --model gru")
    assert not path.exists()  # checked, not written, at the start
    recording.write([{"model": "gru", "train_step_ms": 12.5}])
    record = json.loads(path.read_text())
    assert list(record) == ["command", "date", "cores", "cpu", "load_average", "python", "tensorflow", "reports"]
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
    assert record == recording.record(record["reports"]) | {"load_average": record["load_average"]}
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


def test_the_cpu_is_the_model_name_of_cpuinfo_else_the_platforms(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n"
                       "flags\t\t: fpu avx2\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n")
    assert records.cpu_model(cpuinfo) == "Intel(R) Xeon(R) CPU @ 2.20GHz"
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd\nCPU part\t: 0xd0c\n")  # aarch64: no model name
    monkeypatch.setattr(platform, "processor", lambda: "aarch64")
    assert records.cpu_model(cpuinfo) == "aarch64"
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert records.cpu_model(tmp_path / "missing") is None


# --- every benchmark command records ------------------------------------------------------------

def _must_not_run(*args, **kwargs):
    pytest.fail("the benchmark ran despite a --record that cannot be written")


# The commands as (main, arguments, (module, the function doing the work)).
COMMANDS = {
    "bench": (bench.main, ["--model", "gru", "--steps", "1", "--warmup", "0", "--skip-eval"], (bench, "measure")),
    "bench --hardware": (bench.main, ["--hardware"], (bench.hardware, "machine_lines")),
    "bench --encode": (bench.main, ["--encode", "saved_model"], (bench, "encoding_throughput")),
    "bench --data-checks": (bench.main, ["--data-checks"], (bench, "data_check_timings")),
    "bench_fisher_vectors": (bench_fisher_vectors.main, [], (bench_fisher_vectors, "fv_em_timings")),
    "bench_order_similarity": (bench_order_similarity.main, ["--images", "2"],
                               (bench_order_similarity, "order_similarity_evaluation")),
    "bench_vsepp": (bench_vsepp.main, ["clone", "--steps", "1", "--warmup", "0"], (bench_vsepp, "compare_with_vsepp")),
}


@pytest.mark.parametrize("where", ["missing directory", "directory"])
@pytest.mark.parametrize(("main", "argv", "work"), COMMANDS.values(), ids=COMMANDS.keys())
def test_every_benchmark_refuses_a_record_path_it_cannot_write_before_any_work(main, argv, work, where, tmp_path,
                                                                            monkeypatch, capsys):
    monkeypatch.setattr(*work, _must_not_run)
    path = tmp_path / "no" / "record.json" if where == "missing directory" else tmp_path
    message = {"missing directory": f"the directory {tmp_path / 'no'} does not exist",
               "directory": "is a directory; give a file name"}[where]
    assert main([*argv, "--record", str(path)]) == 2  # and the work, stubbed to fail, never began
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: --record {path}: {message}\n"  # one line: not even the hardware lines

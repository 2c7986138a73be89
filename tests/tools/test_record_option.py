"""Every benchmark's `--record FILE` (`common.records`): a path that cannot
be written is refused before any work."""

import pytest

from tools import bench, bench_cli_errors, bench_fisher_vectors, bench_order_similarity, bench_vsepp


# --- every benchmark command records ------------------------------------------------------------

def _must_not_run(*args, **kwargs):
    pytest.fail("the benchmark ran despite a --record that cannot be written")


# The commands as (main, arguments, (module, the function doing the work)).
COMMANDS = {
    "bench": (bench.main, ["--model", "gru", "--steps", "1", "--warmup", "0", "--skip-eval"], (bench, "measure")),
    "bench --hardware": (bench.main, ["--hardware"], (bench.hardware, "machine_lines")),
    "bench --encode": (bench.main, ["--encode", "saved_model"], (bench, "encoding_throughput")),
    "bench --data-checks": (bench.main, ["--data-checks"], (bench, "data_check_timings")),
    "bench_cli_errors": (bench_cli_errors.main, [], (bench_cli_errors, "time_mistake")),
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


@pytest.mark.parametrize(("held", "holds"), [
    ('{"command": "python -m tools.bench --model rcn"}', "the record of `python -m tools.bench --model rcn`"),
    ("my notes", "no record of a command"),
])
@pytest.mark.parametrize(("main", "argv", "work"), COMMANDS.values(), ids=COMMANDS.keys())
def test_every_benchmark_refuses_to_replace_a_file_but_its_own_commands_record(main, argv, work, held, holds, tmp_path,
                                                                              monkeypatch, capsys):
    monkeypatch.setattr(*work, _must_not_run)
    path = tmp_path / "record.json"
    path.write_text(held)
    assert main([*argv, "--record", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: --record {path}: holds {holds}, which the record of `python -m tools.")
    assert err.endswith("` would replace; give another file, or remove that one first\n") and err.count("\n") == 1
    assert path.read_text() == held

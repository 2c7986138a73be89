import json

import pytest

from common.errors import InputError
from tools import bench_cca


def test_bench_times_the_accumulation_and_each_solve(tmp_path, capsys):
    argv = ["--rows", "300", "--text-dim", "40", "--image-dim", "12", "--eta", "1e-3", "0.1"]
    assert bench_cca.main([*argv, "--record", str(tmp_path / "cca.json")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["rows"], report["text_dim"], report["image_dim"], report["etas"]) == (300, 40, 12, [1e-3, 0.1])
    assert len(report["solve_seconds"]) == 2 and report["accumulate_seconds"] >= 0
    assert abs(report["seconds"] - report["accumulate_seconds"] - sum(report["solve_seconds"])) <= 0.2
    # The views share a signal (correlated), and more ridge shrinks the correlation.
    assert 1 > report["top_correlations"][0] > report["top_correlations"][1] > 0.5
    assert report["peak_rss_mb"] > 0 and report["estimated_peak_mb"] > 0
    record = json.loads((tmp_path / "cca.json").read_text())
    assert record["reports"] == [report]
    assert record["command"] == "python -m tools.bench_cca " + " ".join(argv)


def test_a_size_beyond_the_available_memory_is_refused_before_any_work():
    with pytest.raises(InputError, match=r"--text-dim 36000 --image-dim 4096: the CCA needs about \d+\.\d GiB, more than the 1\.0 GiB available"):
        bench_cca.cca_timing(30_000, 36_000, 4096, [1e-2], available=2**30)


def test_bad_arguments_are_refused(capsys):
    for argv in (["--rows", "1", "--text-dim", "4"], ["--rows", "9", "--text-dim", "4", "--eta", "-1"]):
        with pytest.raises(SystemExit):
            bench_cca.parse_args(argv)
    assert "--eta: ridges must be non-negative" in capsys.readouterr().err


def test_available_memory_is_read_from_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24576000 kB\nMemAvailable:   16384000 kB\n")
    assert bench_cca.available_memory(meminfo) == 16384000 * 1024
    assert bench_cca.available_memory(tmp_path / "missing") is None

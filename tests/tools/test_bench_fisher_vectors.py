import json

from tools import bench_fisher_vectors


def test_fv_em_benchmark_compares_our_em_with_scikit_learns_on_the_glove_vocabulary():
    timings = bench_fisher_vectors.fv_em_timings(components=8, iterations=10)
    report = next(timings)  # the first data set only: the caption tokens' take minutes
    timings.close()
    assert (report["mixture"], report["data"], report["rows"], report["dim"]) == (
        "gaussian+hybrid", "glove_vocabulary", 7965, 50)
    assert (report["components"], report["iterations"]) == (8, 10)
    # The same start and the same Gaussian EM: the same likelihood as scikit-learn's.
    assert abs(report["ours_gaussian_log_likelihood_per_sample"]
               - report["sklearn_gaussian_log_likelihood_per_sample"]) < 0.01
    assert report["ours_hybrid_seconds"] > 0 and report["ours_hybrid_seconds_per_iteration"] > 0


def test_fv_em_benchmark_has_two_options():
    assert bench_fisher_vectors.parse_args(["--large"]).large
    assert not bench_fisher_vectors.parse_args([]).large
    assert bench_fisher_vectors.parse_args(["--record", "fv.json"]).record == "fv.json"


def test_fv_em_benchmark_records_the_lines_it_prints(tmp_path, monkeypatch, capsys):
    # Two data sets' reports, made up: the real ones take minutes (the caption tokens').
    made_up = [{"mixture": "gaussian+hybrid", "data": name, "ours_hybrid_seconds": 1.5} for name in ("a", "b")]
    monkeypatch.setattr(bench_fisher_vectors, "fv_em_timings", lambda large: iter(made_up))
    assert bench_fisher_vectors.main(["--record", str(tmp_path / "fv.json")]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    record = json.loads((tmp_path / "fv.json").read_text())
    assert printed == made_up and record["reports"] == printed
    assert record["command"] == "python -m tools.bench_fisher_vectors"

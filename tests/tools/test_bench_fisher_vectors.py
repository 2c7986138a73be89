import json

import numpy as np
import pytest

from data import word_vectors
from data.embedded import EMBEDDED_GLOVE_50D
from tools import bench_fisher_vectors


def test_fv_em_benchmark_compares_our_em_with_scikit_learns_on_the_glove_vocabulary():
    timings = bench_fisher_vectors.fv_em_timings(components=8, iterations=3)
    report = next(timings)  # the first data set only: the caption tokens' take minutes
    timings.close()
    assert (report["mixture"], report["data"], report["rows"], report["dim"]) == (
        "gaussian+hybrid", "glove_vocabulary", 7965, 50)
    assert (report["components"], report["iterations"]) == (8, 3)
    # The same start and the same Gaussian EM: the same likelihood as scikit-learn's.
    assert abs(report["ours_gaussian_log_likelihood_per_sample"]
               - report["sklearn_gaussian_log_likelihood_per_sample"]) < 0.01
    assert report["ours_hybrid_seconds"] > 0 and report["ours_hybrid_seconds_per_iteration"] > 0


def test_synthetic_word_vectors_are_unit_float32_and_seeded():
    x = bench_fisher_vectors.synthetic_word_vectors(3000, 20, seed=4, chunk=700)
    assert x.dtype == np.float32 and x.shape == (3000, 20)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1, rtol=1e-6)
    np.testing.assert_array_equal(x, bench_fisher_vectors.synthetic_word_vectors(3000, 20, seed=4, chunk=700))


def test_hglmm_fit_benchmark_reports_every_iteration():
    report = bench_fisher_vectors.hglmm_fit(rows=2000, dim=12, components=4, iterations=3, workers=2)
    assert (report["benchmark"], report["rows"], report["dim"], report["components"], report["workers"]) == (
        "hglmm-fit", 2000, 12, 4, 2)
    assert len(report["iteration_seconds"]) == 3 and report["seconds"] >= sum(report["iteration_seconds"]) - 0.3
    assert 0 <= report["laplacian_fraction"] <= 1 and np.isfinite(report["log_likelihood_per_sample"])
    assert report["peak_rss_mb"] > 0


def test_word_table_benchmark_builds_encodes_and_measures():
    report = bench_fisher_vectors.word_table(words=9_000, dim=8, ica_sample=300, captions=100)
    # The GloVe file's 7,965 words, less those the vocabulary drops
    # (punctuation, "'s"), then the made-up ones; <pad> and <unk>.
    assert 9_000 - 50 < report["vocabulary"] <= 9_002
    assert (report["ica_sample"], report["captions"], report["components"]) == (300, 100, 30)
    assert report["vectors_mb"] == round(9_000 * 8 * 4 / 2**20, 1) == 0.3
    # Each record: the word, a space, 8 float32s.
    words_bytes = sum(len(w.encode()) + 1 for w in word_vectors.load_word_vectors(EMBEDDED_GLOVE_50D).index_to_key)
    words_bytes += sum(len(f"w{i}") + 1 for i in range(7965, 9_000))
    assert report["file_mb"] == round((len("9000 8\n") + words_bytes + 9_000 * 32) / 2**20, 1)
    stages = ["write_file", "open_file", "vocabulary", "model", "ica_and_table", "hglmm_one_iteration", "encoding"]
    assert list(report["seconds"]) == list(report["peak_rss_mb_after"]) == stages
    peaks = list(report["peak_rss_mb_after"].values())
    assert peaks == sorted(peaks) and peaks[0] > 0 and report["peak_rss_mb"] >= peaks[-1]


def test_encoding_benchmark_times_each_component_block():
    reports = list(bench_fisher_vectors.encoding_rates(components=5, dim=8, batch=4, length=6, batches=2,
                                                       blocks=(1, 2, 5)))
    assert [r["component_block"] for r in reports] == [1, 2, 5]
    assert all(r["captions_per_second"] > 0 and r["cpu_per_wall_second"] > 0 for r in reports)


def test_fv_benchmark_options():
    assert bench_fisher_vectors.parse_args(["--large"]).large
    args = bench_fisher_vectors.parse_args([])
    assert (args.benchmark, args.large, args.workers, args.ica_sample) == ("em", False, None, 20_000)
    args = bench_fisher_vectors.parse_args(["--benchmark", "hglmm-fit", "--workers", "1"])
    assert (args.benchmark, args.workers) == ("hglmm-fit", 1)
    assert bench_fisher_vectors.parse_args(["--record", "fv.json"]).record == "fv.json"
    with pytest.raises(SystemExit):
        bench_fisher_vectors.parse_args(["--benchmark", "cca"])


@pytest.mark.parametrize("benchmark", ["em", "encoding"])
def test_fv_benchmark_records_the_lines_it_prints(tmp_path, monkeypatch, capsys, benchmark):
    # Two reports, made up: the real ones take minutes.
    made_up = [{"benchmark": benchmark, "data": name, "seconds": 1.5} for name in ("a", "b")]
    monkeypatch.setattr(bench_fisher_vectors, "fv_em_timings", lambda large: iter(made_up))
    monkeypatch.setattr(bench_fisher_vectors, "encoding_rates", lambda: iter(made_up))
    assert bench_fisher_vectors.main(["--benchmark", benchmark, "--record", str(tmp_path / "fv.json")]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    record = json.loads((tmp_path / "fv.json").read_text())
    assert printed == made_up and record["reports"] == printed
    assert record["command"] == f"python -m tools.bench_fisher_vectors --benchmark {benchmark}"

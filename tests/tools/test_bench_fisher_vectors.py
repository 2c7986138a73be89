from tools import bench_fisher_vectors


def test_fv_em_benchmark_compares_our_em_with_scikit_learns_on_the_glove_vocabulary():
    timings = bench_fisher_vectors.fv_em_timings(components=8, iterations=10)
    report = next(timings)  # the first data set only: the caption tokens' take minutes
    timings.close()
    assert (report["data"], report["rows"], report["dim"]) == ("glove_vocabulary", 7965, 50)
    assert (report["components"], report["iterations"]) == (8, 10)
    # The same start and the same Gaussian EM: the same likelihood as scikit-learn's.
    assert abs(report["ours_gaussian_log_likelihood_per_sample"]
               - report["sklearn_gaussian_log_likelihood_per_sample"]) < 0.01
    assert report["ours_hybrid_seconds"] > 0 and report["ours_hybrid_seconds_per_iteration"] > 0


def test_fv_em_benchmark_has_one_option():
    assert bench_fisher_vectors.parse_args(["--large"]).large
    assert not bench_fisher_vectors.parse_args([]).large

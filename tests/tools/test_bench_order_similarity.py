import json

from tools import bench_order_similarity


def test_bench_times_an_order_similarity_evaluation(capsys):
    assert bench_order_similarity.main(["--images", "40", "--dim", "16"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["images"], report["captions"], report["dim"]) == (40, 200, 16) and report["peak_rss_mb"] > 0
    assert set(report) == {"images", "captions", "dim", "seconds", "peak_rss_mb", "rsum_of_random_embeddings"}

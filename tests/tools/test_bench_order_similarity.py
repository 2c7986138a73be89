import json

from tools import bench_order_similarity


def test_bench_times_an_order_similarity_evaluation(tmp_path, capsys):
    assert bench_order_similarity.main(["--images", "40", "--record", str(tmp_path / "order.json"), "--dim", "16"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["images"], report["captions"], report["dim"]) == (40, 200, 16) and report["peak_rss_mb"] > 0
    assert set(report) == {"similarity", "images", "captions", "dim", "seconds", "peak_rss_mb",
                           "rsum_of_random_embeddings"}
    assert report["similarity"] == "order_violation"
    record = json.loads((tmp_path / "order.json").read_text())
    assert record["reports"] == [report]
    assert record["command"] == "python -m tools.bench_order_similarity --images 40 --dim 16"

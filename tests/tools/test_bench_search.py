"""`tools.bench_search` at a tiny size: its report, its record, and its
refusals. With `ef_search` at least the number of items the graph search
keeps every item as a candidate, so its recall must be 1."""

import json

import pytest

from tests.search.hand_exports import ENCODING, HandExport, HandTwoStageExport, save
from tools import bench_search

TINY = ["--items", "300", "--dim", "8", "--latent", "4", "--queries", "12", "--k", "5", "--ef-search", "8,300"]


def test_a_tiny_benchmark_reports_recall_and_speed(tmp_path, capsys):
    assert bench_search.main([*TINY, "--record", str(tmp_path / "search.json")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["items"], report["dim"], report["latent"], report["queries"], report["k"]) == (300, 8, 4, 12, 5)
    assert report["index"].startswith("IndexHNSWFlat (M 32, efConstruction 80, faiss-cpu ")
    assert [row["ef_search"] for row in report["approximate"]] == [8, 300]
    assert report["approximate"][1]["recall_at_k"] == 1.0
    assert report["recommended_ef_search"] in (8, 300)
    assert report["exact_queries_per_s"] > 0 and all(row["queries_per_s"] > 0 for row in report["approximate"])
    shown = next(row for row in report["approximate"] if row["ef_search"] == report["shown_ef_search"])
    assert shown["ef_search"] == report["recommended_ef_search"]  # a setting met the recall target
    assert (report["shown_recall_at_k"], report["shown_queries_per_s"], report["shown_speedup_vs_exact"]) == (
        shown["recall_at_k"], shown["queries_per_s"], shown["speedup_vs_exact"])
    assert report["peak_rss_mb"] > 0
    record = json.loads((tmp_path / "search.json").read_text())
    assert record["reports"] == [report]
    assert record["command"] == f"python -m tools.bench_search {' '.join(TINY)}"
    assert list(tmp_path.iterdir()) == [tmp_path / "search.json"]  # the synthetic index is removed


def test_the_encoding_size_comes_from_the_saved_model(tmp_path, capsys):
    saved_model = save(HandExport("cosine"), tmp_path / "export")
    assert bench_search.main([*TINY, "--saved-model", str(saved_model)]) == 0
    assert json.loads(capsys.readouterr().out)["dim"] == ENCODING


def test_a_two_stage_export_adds_timed_two_stage_queries(tmp_path, capsys):
    saved_model = save(HandTwoStageExport(HandExport("cosine"), HandExport("pairwise"), 4), tmp_path / "export")
    assert bench_search.main([*TINY, "--saved-model", str(saved_model), "--two-stage-queries", "3"]) == 0
    two_stage = json.loads(capsys.readouterr().out)["two_stage"]
    assert (two_stage["rerank_k"], two_stage["queries"], two_stage["rerank_encoding_shape"]) == (4, 3, [ENCODING])
    seconds = two_stage["seconds_per_query"]
    assert 0 < seconds["median"] <= seconds["p90"] <= seconds["max"]
    assert two_stage["meets_target"] == (seconds["max"] <= 1.0)
    assert bench_search.main([*TINY, "--saved-model", str(saved_model), "--two-stage-queries", "2",
                              "--rerank-k", "7"]) == 0
    assert json.loads(capsys.readouterr().out)["two_stage"]["rerank_k"] == 7


def test_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench_search.main(["--ef-search", "8,zero"])
    assert "--ef-search 8,zero: expected an integer; got 'zero'" in capsys.readouterr().err
    assert bench_search.main([*TINY, "--workdir", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == f"error: --workdir {tmp_path / 'nowhere'}: not a folder"
    assert bench_search.main([*TINY, "--rerank-k", "5"]) == 2
    assert capsys.readouterr().err.strip() == "error: --rerank-k needs --saved-model of a two-stage export"

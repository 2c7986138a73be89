"""Comparison tables (tools.report.comparisons): claims "A is better than
B" over seeds of runs or of recorded reports, their means and sample
standard deviations, the decision rule (better is lower for a rank),
indicative claims of one seed without a verdict, and claims whose runs
are missing left out."""

import json

import pytest

from tests.tools.report.helpers import run_record
from tools import report


def _seed_runs(rsums):
    return {name: {**run_record({}), "test": {"rsum": rsum}, "command": f"python train.py --model m --model-dir x/{name}"}
            for name, rsum in rsums.items()}


@pytest.mark.parametrize("a_rsums, b_rsums, verdict, difference", [
    ((108.0, 110.0, 112.0), (100.0, 101.0, 102.0), "A ahead: reproduced", "+9.0"),  # s.d.s 2 and 1: 9 > 2
    ((108.0, 110.0, 112.0), (109.0, 110.0, 111.0), "tie: not resolved", "+0.0"),
    ((104.0, 110.0, 116.0), (114.0, 116.0, 118.0), "tie: not resolved", "-6.0"),  # A's s.d. is 6: |−6| is not more
    ((108.0, 110.0, 112.0), (120.0, 121.0, 122.0), "B ahead: reversed", "-11.0"),
])
def test_a_comparison_applies_the_rule_to_the_seeds_mean_and_sd(a_rsums, b_rsums, verdict, difference):
    a, b = dict(zip(("a0", "a1", "a2"), a_rsums)), dict(zip(("b0", "b1", "b2"), b_rsums))
    table = {"id": "claims", "compare": [{"claim": "A > B", "a": list(a), "b": list(b), "paper": ["p/x", "p/y"]}]}
    papers = {"p": {"x": {"rsum": 250.0}, "y": {"rsum": 242.6}}}
    report.check_tables({"table": [table]}, papers, "tables.toml")
    block = report.render_comparisons(table, papers, _seed_runs({**a, **b}), "runs")
    row = block.splitlines()[-1].split(" | ")
    assert row[0] == "| A > B" and row[1] == "rsum"
    assert row[4] == difference and row[6] == verdict and row[7] == "+7.4 |"
    assert "python train.py --model m --model-dir runs/a0" in block  # the runs' commands, folded away
    assert block.startswith("<details><summary>The commands of these 6 runs</summary>")


def test_comparison_means_and_sds_are_the_sample_statistics():
    a, b = [70.0, 72.5, 77.0], [60.0, 61.0, 65.0]
    a_mean, a_sd, b_mean, b_sd, margin, verdict = report.comparison(a, b)
    # By hand: A's mean 73.1667, deviations −3.1667, −0.6667, 3.8333: s.d. √(25.1667 / 2) = 3.5473.
    assert (a_mean, b_mean) == (pytest.approx(73.1667, abs=1e-4), pytest.approx(62.0))
    assert (a_sd, b_sd, margin) == (pytest.approx(3.5473, abs=1e-4), pytest.approx(7 ** 0.5), pytest.approx(3.5473, abs=1e-4))
    assert verdict == 1


def test_an_indicative_comparison_of_one_seed_gives_the_difference_and_no_verdict():
    # A is 12 ahead of B, far beyond any margin: with one seed a side, still no verdict.
    table = {"id": "claims", "compare": [{"claim": "A > B", "a": ["a0"], "b": ["b0"], "indicative": True}]}
    report.check_tables({"table": [table]}, {}, "tables.toml")
    row = report.render_comparisons(table, {}, _seed_runs({"a0": 212.0, "b0": 200.0}), "runs").splitlines()[-1]
    assert row.split(" | ")[2:7] == ["212.0", "200.0", "+12.0", "—", "one seed: indicative: no verdict"]
    assert "ahead" not in row and "tie" not in row


def test_a_comparison_whose_runs_are_missing_is_left_out():
    table = {"id": "claims", "compare": [{"claim": "A > B", "a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"]}]}
    assert report.render_comparisons(table, {}, _seed_runs({"a0": 1.0, "a1": 2.0, "a2": 3.0}), "runs") is None


def test_a_rank_is_better_when_lower():
    # A's mean rank 10, B's 20, both s.d. 1: A is ahead although A − B is negative.
    assert report.comparison([9.0, 10.0, 11.0], [19.0, 20.0, 21.0], lower_is_better=True)[-1] == 1
    assert report.comparison([9.0, 10.0, 11.0], [19.0, 20.0, 21.0])[-1] == -1
    assert {"i2t_medr", "t2i_meanr", "t2t_meanr"} <= report.RANK_METRICS and "rsum" not in report.RANK_METRICS


def test_a_comparison_of_recorded_reports(tmp_path):
    # Three seeds' models, each evaluated under two similarities (evaluate.py --json), compared as samples.
    (tmp_path / "ev").mkdir()
    for seed, (cosine, dot) in enumerate([(30.0, 6.0), (31.0, 7.0), (32.0, 8.0)]):
        for name, r1 in (("cosine", cosine), ("dot", dot)):
            command = f"python evaluate.py --model-dir runs/w{seed} --set model.similarity={name}"
            (tmp_path / "ev" / f"{name}{seed}.json").write_text(json.dumps({"command": command, "reports": [{"i2t_r1": r1}]}))
    claim = {"claim": "cosine > dot", "metric": "i2t_r1", "a": [{"record": f"ev/cosine{s}.json"} for s in range(3)],
             "b": [{"record": f"ev/dot{s}.json"} for s in range(3)]}
    (tmp_path / "tables.toml").write_text("")
    tables = report.check_tables({"table": [{"id": "sim", "compare": [claim]}]}, {}, str(tmp_path / "tables.toml"))
    block = report.render(tables, {}, {}, "runs", str(tmp_path / "tables.toml"))["sim"]
    assert block.splitlines()[-1] == "| cosine > dot | i2t R@1 | 31.0 ± 1.0 | 7.0 ± 1.0 | +24.0 | 1.0 | A ahead: reproduced |  |"
    assert "python evaluate.py --model-dir runs/w2 --set model.similarity=dot" in block

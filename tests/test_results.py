"""The recorded runs (results/runs.json) meet the bars the docs state for them.

The bars are the project's calibration on these features (a prototype's
numbers, written down before the runs); the docs say they hold, and this
checks that they do for the runs the tables show.
"""

from pathlib import Path

import pytest

from tools import report
from tools.report import cells

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def test_metrics():
    _, runs = report.read_snapshot(ROOT / "results" / "runs.json")
    return {name: cells.with_sums(record["test"]) for name, record in runs.items()}


def test_fisher_vector_bars_of_docs_fisher_vectors(test_metrics):
    rsum = {model: test_metrics[f"fv-{model}-quick"]["rsum"] for model in ("mean", "gmm", "lmm", "hglmm", "gmm-hglmm")}
    assert abs(test_metrics["fv-mean-noica-quick"]["rsum"] - 157.5) <= 4
    gmm = test_metrics["fv-gmm-quick"]
    assert gmm["rsum"] >= 255 and gmm["i2t_r1"] >= 23 and gmm["t2i_r1"] >= 16
    assert rsum["hglmm"] >= 255 and rsum["hglmm"] >= rsum["gmm"] - 3
    assert rsum["lmm"] >= rsum["mean"] + 60
    assert all(rsum[model] >= rsum["mean"] + 80 for model in ("gmm", "lmm", "hglmm", "gmm-hglmm"))
    assert rsum["gmm-hglmm"] >= max(rsum["gmm"], rsum["hglmm"])


def test_word2visualvec_bars_of_docs_w2vv(test_metrics):
    bow, word2vec, multiscale = (test_metrics[f"{name}-quick"] for name in ("w2vv-bow", "w2vv-word2vec", "w2vv"))
    assert bow["i2t_rsum"] >= 150 and bow["i2t_medr"] <= 5
    assert 75 <= word2vec["i2t_rsum"] <= 105
    assert multiscale["i2t_rsum"] >= 150 and multiscale["i2t_r1"] > test_metrics["gru-quick"]["i2t_r1"]


def test_ensemble_bars_of_docs_ensemble(test_metrics):
    # The target: a dev-selected ensemble of quick members at 290 or
    # more, on every seed; and the dev grid gives gru a weight of 0 on two
    # seeds and 0.1 on the third, as docs/ensemble.md says.
    _, runs = report.read_snapshot(ROOT / "results" / "runs.json")
    seeds = ["ens-all-quick", "ens-all-quick-seed1", "ens-all-quick-seed2"]
    assert all(test_metrics[name]["rsum"] >= 290 for name in seeds)
    assert sorted(runs[name]["fit"]["weights"][1] for name in seeds) == [0, 0, 0.1]

"""Helpers of the report's tests (tools/report/): the checked-in snapshot,
runs' metrics, model directories and records made by hand, a recorded
benchmark, the tables.toml and test-suite texts, and `fails`, which runs
the command on bad input and checks that it fails in one line naming what
is wrong, leaving every output as it was."""

import json
from pathlib import Path

from data.image_features import ImageFeatures
from models import registry
from models.experiments import RunConfig
from tools import report

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOT = ROOT / "results" / "runs.json"


def sample_metrics(r1, rsum):
    """Metrics of R@K = K * r1 in both directions, medr 3 and 4, and `rsum`."""
    recalls = {f"{d}_r{k}": r1 * k for d in ("i2t", "t2i") for k in (1, 5, 10)}
    return {**recalls, "i2t_medr": 3.0, "t2i_medr": 4.0, "rsum": rsum}


def config_json(model):
    """The config.json train.py writes for a quick run of `model` on the embedded features."""
    return RunConfig(registry.get(model).experiment("quick"), ImageFeatures("fc", 1280)).to_json()


def write_run(model_dir, model, test_r1, command, wall_seconds=90.0):
    """A train.py run of `model` in `model_dir`: its config.json and its
    results.json, with test R@1 `test_r1` and a fit."""
    model_dir.mkdir(parents=True)
    (model_dir / "config.json").write_text(config_json(model))
    (model_dir / "results.json").write_text(json.dumps({
        "dev": sample_metrics(test_r1 - 1, 100.0), "test": sample_metrics(test_r1, 8 * test_r1), "command": command,
        "wall_seconds": wall_seconds, "peak_memory_bytes": 3 * 2**30, "fit": {"cca_eta": 0.01, "cca_dev_rsum": 99.5},
    }))


def run_record(fit):
    """A run's record as read_runs returns it, with this fit."""
    return {"model": "m", "preset": "quick", "command": None, "wall_seconds": None, "cpu_seconds": None, "cores": None,
            "cpu": None, "isa": None, "load_average": None, "peak_memory_bytes": None, "fit": fit,
            "dev": sample_metrics(1.0, 10.0), "test": sample_metrics(2.0, 20.0), "dev_history": [],
            "selection_metric": None}


def _state(directory):
    """Every file below `directory`: its bytes and modification time."""
    return {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in sorted(directory.rglob("*")) if path.is_file()}


def fails(capsys, workspace, argv, *fragments):
    """Runs the command with `argv` (and the workspace's tables and papers
    unless given), which must fail with one line naming what is wrong (each
    of `fragments`), leaving the output directory as it was; returns the line."""
    files = ["--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]
    before = _state(workspace["out"])
    capsys.readouterr()
    assert report.main([*argv, *files[2 * ("--tables" in argv):]]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
    for fragment in fragments:
        assert fragment in captured.err
    assert _state(workspace["out"]) == before
    return captured.err


def update_argv(workspace):
    """The arguments that update the workspace's markdown file."""
    return ["--update", str(workspace["markdown"])]


def changed_snapshot(workspace, change):
    """The workspace's snapshot, changed by `change(snapshot)` (which may
    return a replacement)."""
    snapshot = json.loads(workspace["snapshot"].read_text())
    snapshot = change(snapshot) or snapshot
    workspace["snapshot"].write_text(json.dumps(snapshot))
    return ["--snapshot", str(workspace["snapshot"])]


# A table's keys but its rows.
TABLE = '[[table]]\nid = "t"\nlabels = ["m"]\ncolumns = ["rsum"]\n'

# What `python -m tools.time_tests` records of a test suite's run.
SUITE = {"command": "python -m pytest", "date": "2026-11-24T09:30:00+00:00", "exit_status": 0,
         "counts": {"deselected": 3, "passed": 894, "warnings": 2}, "wall_seconds": 664.82, "cpu_seconds": 1140.0,
         "cores": 2, "load_average": [0.71, 2.08], "python": "3.11.7", "tensorflow": "2.21.0"}

# A test-suite table of that record, in suite.json beside tables.toml.
SUITE_TABLE = '\n[[table]]\nid = "suite"\ntest_suite = "suite.json"\n'


def bench_record(tmp_path):
    """A benchmark's record of two reports in `tmp_path`/bench/quick.json, and
    a tables.toml beside it of one table of its reports; returns its path."""
    (tmp_path / "bench").mkdir()
    record = {"command": "python -m tools.bench --model gru --model rcn --preset quick", "date": "2026-11-24T07:01:02+00:00",
              "cores": 2, "cpu": "Some CPU", "load_average": [0.1, 1.25],
              "reports": [{"model": "gru", "preset": "quick", "train_pairs_per_s": 448.04, "eval_seconds": 5.8},
                          {"model": "rcn", "preset": "quick", "train_pairs_per_s": 164.5, "ci": [0.11, 0.2],
                           "i2t_r1": 12.34}]}
    (tmp_path / "bench" / "quick.json").write_text(json.dumps(record))
    (tmp_path / "tables.toml").write_text('''
[[table]]
id = "speed"
labels = ["model"]
columns = ["i2t_r1", { value = "{train_pairs_per_s:.0f}", header = "pairs/s" }, { value = "({ci[0]:.2f}, {ci[1]:.2f})", header = "CI" }]
rows = [
  { record = "bench/quick.json", select = { model = "gru" }, labels = ["`gru`"] },
  { record = "bench/quick.json", select = { model = "rcn" }, labels = ["`rcn`"] },
]
''')
    return tmp_path / "tables.toml"

"""What the report reads (tools.report.inputs): a trained run's record
(its command and dev rsum history), the folders that are no train.py
runs, old snapshots without the optional keys, the metric that chose a
run's checkpoint, and a malformed results.json, config.json, snapshot,
test-suite record or recorded report as one error naming the file and
the key."""

import json
import re
import shlex
import shutil

import pytest

from common.errors import InputError
from tests.tools.report.helpers import SUITE, TABLE, bench_record, changed_snapshot, fails, update_argv, write_run
from tools import report
from tools.report import cells


def test_a_trained_runs_command_dev_history_and_plot(trained, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(trained, runs / "tiny", ignore=shutil.ignore_patterns("saved_model", "checkpoints", "best", "train"))
    record = report.read_runs(runs)["tiny"]
    results = json.loads((trained / "results.json").read_text())
    assert record["command"] == results["command"] and record["wall_seconds"] == results["wall_seconds"]
    # Every validation (each epoch's end and every 7 steps), in step order;
    # the best of them is the results' dev rsum.
    assert len(record["dev_history"]) > 2 and max(record["dev_history"]) == pytest.approx(results["dev"]["rsum"], abs=1e-4)
    words = shlex.split(results["command"])
    words[words.index("--model-dir") + 1] = "runs/tiny"
    assert cells.train_command(record, "runs", "tiny") == shlex.join(words)

    table = {"rows": [{"run": "tiny", "labels": ["`{model}`", "{preset}"]}]}
    series, image = report.plot_recalls(table, {"tiny": record}, "png")
    assert image.startswith(b"\x89PNG") and len(image) > 10_000
    assert series == [{"run": "tiny", "label": "gru quick", "i2t": [results["test"][f"i2t_r{k}"] for k in (1, 5, 10)],
                       "t2i": [results["test"][f"t2i_r{k}"] for k in (1, 5, 10)]}]


def test_folders_that_are_not_train_py_runs_are_skipped(workspace, capsys):
    runs = workspace["runs"]
    (runs / "eval").mkdir()  # another tool's results.json, no config.json
    (runs / "eval" / "results.json").write_text("[1, 2]")
    for name, config in [("tool", '{"setting": 1}'), ("list", "[]"), ("text", "not json")]:  # another tool's config.json
        (runs / "a" / name).mkdir()
        (runs / "a" / name / "config.json").write_text(config)
        (runs / "a" / name / "results.json").write_text('[{"score": 1}]')
    (runs / "odd" / "config.json").mkdir(parents=True)  # a directory named config.json
    (runs / "odd" / "results.json").write_text("{}")
    assert report.main([str(runs), "--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]) == 0
    printed = capsys.readouterr().out
    assert sorted(report.read_runs(runs)) == ["a", "b", "nested/c"]
    assert "| nested/c | `fv-gmm` |" in printed and not re.search(r"eval|tool|list|text|odd", printed)


@pytest.mark.parametrize(("file", "content", "problem"), [
    ("results.json", "[1, 2]", "results.json: not a JSON object"),
    ("results.json", '{"test": {}}', "results.json: lacks the key 'dev'"),
    ("results.json", '{"dev": {}, "test": [1]}', "results.json: the key 'test' must be an object of metrics whose values are numbers, got [1]"),
    ("results.json", '{"dev": {}, "test": {"i2t_r1": "12.5"}}', "results.json: the key 'test.i2t_r1' must be a number, got \"12.5\""),
    ("results.json", '{"dev": {}, "test": {}, "command": "train.py --set \\"x"}', "results.json: the key 'command' must be a command line"),
    ("results.json", '{"dev": {}, "test": {}, "wall_seconds": "90"}', "results.json: the key 'wall_seconds' must be a number, got \"90\""),
    ("results.json", '{"dev": {}, "test": {}, "peak_memory_bytes": true}', "results.json: the key 'peak_memory_bytes' must be a number"),
    ("results.json", '{"dev": {}, "test": {}, "cpu_seconds": "61"}', "results.json: the key 'cpu_seconds' must be a number, got \"61\""),
    ("results.json", '{"dev": {}, "test": {}, "cores": [2]}', "results.json: the key 'cores' must be a number, got [2]"),
    ("results.json", '{"dev": {}, "test": {}, "load_average": [1.0]}',
     "results.json: the key 'load_average' must be a list of two numbers (the 1-minute load average at the start and at the end), got [1.0]"),
    ("results.json", '{"dev": {}, "test": {}, "load_average": [1.0, "2"]}', "results.json: the key 'load_average' must be a list of two numbers"),
    ("results.json", '{"dev": {}, "test": {}, "fit": [0.1]}', "results.json: the key 'fit' must be an object"),
    # config.json is read as train.py reads it back (`models.experiments.RunConfig`).
    ("config.json", '{"model_name": "gru"}', "config.json: unreadable model config (needs model_name and preset)"),
    ("config.json", '{"model_name": "gru", "preset": 1}', "config.json: preset must be a string; got 1"),
    ("config.json", '{"model_name": "gru", "preset": "quick", "train": {"epochs": 0}}', "config.json: no image_dim"),
])
def test_a_runs_malformed_results_or_config_is_an_error_naming_that_file(workspace, capsys, file, content, problem):
    (workspace["runs"] / "nested" / "c" / file).write_text(content)
    err = fails(capsys, workspace, [str(workspace["runs"]), *update_argv(workspace)], problem)
    assert err.startswith(f"error: {workspace['runs'] / 'nested' / 'c' / file}: ")


@pytest.mark.parametrize(("change", "problem"), [
    (lambda s: s.update(root=3), ": the key 'root' must be a string, got 3"),
    (lambda s: s.update(runs=[]), ": the key 'runs' must be an object of runs"),
    (lambda s: s.update(runs={}), ": the key 'runs' must be an object of runs"),
    (lambda s: s["runs"].update(a=[1]), ": run 'a': must be an object (a run's record), got [1]"),
    (lambda s: s["runs"]["a"].pop("dev") and None, ": run 'a': lacks the key 'dev'"),
    (lambda s: s["runs"]["a"].pop("model") and None, ": run 'a': lacks the key 'model'"),
    (lambda s: s["runs"]["b"].update(model=["gru"]), ": run 'b': the key 'model' must be a string"),
    (lambda s: s["runs"]["b"]["test"].update(rsum="96"), ": run 'b': the key 'test.rsum' must be a number, got \"96\""),
    (lambda s: s["runs"]["a"].update(dev_history=["1.0"]), ": run 'a': the key 'dev_history' must be a list of numbers"),
    (lambda s: s["runs"]["a"].update(command=5), ": run 'a': the key 'command' must be a command line"),
    (lambda s: s["runs"]["a"].update(load_average=3.5), ": run 'a': the key 'load_average' must be a list of two numbers"),
    (lambda s: s["runs"]["b"].update(cpu_seconds=True), ": run 'b': the key 'cpu_seconds' must be a number, got true"),
])
def test_a_malformed_snapshot_is_an_error_naming_it_and_the_run(workspace, capsys, change, problem):
    argv = changed_snapshot(workspace, change)
    err = fails(capsys, workspace, [*argv, *update_argv(workspace)], problem)
    assert err.startswith(f"error: {workspace['snapshot']}: ")


def test_an_old_snapshot_without_the_optional_keys_still_reports(workspace, capsys):
    def old(snapshot):
        for record in snapshot["runs"].values():
            for key in ("command", "wall_seconds", "peak_memory_bytes", "fit", "dev_history"):
                del record[key]
    argv = changed_snapshot(workspace, old)
    assert report.main([*argv, "--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]) == 0
    assert "| `gru` | 0 | 10.0 | 4 | 80.0 | 250.5 | 100.0 |  |" in capsys.readouterr().out
    # A null is an absent key, in a snapshot as in a results.json.
    argv = changed_snapshot(workspace, lambda s: s["runs"]["a"].update(fit=None, dev_history=None))
    workspace["tables"].write_text(TABLE.replace('["rsum"]', '["rsum", "dev_history", { fit = "{cca_eta}" }]') +
                                   'rows = [{ run = "a", labels = ["a"] }]\n')
    assert report.main([*argv, "--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]) == 0
    assert "| m | rsum | dev rsum per validation | cca_eta |\n|---|---|---|---|\n| a | 80.0 |  |  |\n" in capsys.readouterr().out
    results = workspace["runs"] / "a" / "results.json"
    results.write_text(json.dumps({**json.loads(results.read_text()), "fit": None}))
    assert report.main([str(workspace["runs"]), "--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]) == 0
    assert "| a | 80.0 |  |  |\n" in capsys.readouterr().out


@pytest.mark.parametrize(("change", "problem"), [
    (lambda s: s.pop("counts"), "suite.json: lacks the key 'counts' (an object of pytest's outcome counts"),
    (lambda s: s.update(counts={"passed": "894"}), "suite.json: the key 'counts' must be an object of pytest's outcome counts"),
    (lambda s: s.update(wall_seconds="664"), "suite.json: the key 'wall_seconds' must be a number, got \"664\""),
    (lambda s: s.update(load_average=[0.7]), "suite.json: the key 'load_average' must be a list of two numbers"),
    (lambda s: s.update(exit_status=True), "suite.json: the key 'exit_status' must be a whole number, got true"),
    (lambda s: s.update(date="yesterday"), "suite.json: the key 'date' must be an ISO date"),
    (lambda s: s.update(tensorflow=2), "suite.json: the key 'tensorflow' must be a string, got 2"),
])
def test_a_malformed_test_suite_record_is_an_error_naming_it_and_the_key(suite_workspace, capsys, change, problem):
    record = dict(SUITE)
    change(record)
    suite_workspace["suite"].write_text(json.dumps(record))
    err = fails(capsys, suite_workspace, ["--snapshot", str(suite_workspace["snapshot"]), *update_argv(suite_workspace)], problem)
    assert err.startswith(f"error: {suite_workspace['suite']}: ")


@pytest.mark.parametrize("train, recorded, metric", [
    ({"selection_metric": "i2t_map"}, {}, "i2t_map"),  # results.json before it named the metric: the config's
    ({}, {}, "rsum"),  # nor the config: train.selection_metric's default
    ({"selection_metric": "i2t_map"}, {"selection_metric": "t2i_r1"}, "t2i_r1"),
])
def test_a_runs_selection_metric_is_its_results_else_its_configs(tmp_path, train, recorded, metric):
    write_run(tmp_path / "r", "w2vv", 10.0, None)
    for name, values in (("config.json", {"train": train}), ("results.json", recorded)):
        path = tmp_path / "r" / name
        path.write_text(json.dumps({**json.loads(path.read_text()), **values}))
    assert report.read_runs(tmp_path)["r"]["selection_metric"] == metric


@pytest.mark.parametrize("change, problem", [
    (lambda record: record.pop("command"), "lacks the key 'command'"),
    (lambda record: record.update(reports={}), "the key 'reports' must be a list of the reports"),
    (lambda record: record["reports"][1].update(model="gru"), "2 reports match where the tables need the report with {\"model\": \"gru\"}"),
    (lambda record: record["reports"].pop(), "0 reports match where the tables need the report with {\"model\": \"rcn\"}"),
])
def test_a_damaged_record_is_an_error_naming_its_file(tmp_path, change, problem):
    source = bench_record(tmp_path)
    path = tmp_path / "bench" / "quick.json"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))
    tables = report.check_tables(report.read_toml(source), {}, str(source))
    with pytest.raises(InputError) as error:
        report.read_records(tables, str(source))
    assert str(error.value).startswith(f"{path}: {problem}")

"""The tables' blocks (tools.report.tables): rows of runs, means, papers
and recorded reports with their commands, what a run used of the machine
and the means of its times, which validation's checkpoint a run kept,
labels with literal braces, and a test-suite table's sentence."""

import json
import shutil

import pytest

from tests.tools.report.helpers import SUITE, TABLE, bench_record, fails, run_record, sample_metrics, update_argv
from tools import report
from tools.report import tables as report_tables


def test_tables_rows_commands_means_and_papers(runs_dir):
    runs, tables, papers = runs_dir
    records = report.read_runs(runs)
    assert sorted(records) == ["a", "b", "nested/c"]
    blocks = report.render(report.read_toml(tables)["table"], report.read_toml(papers), records, "runs")
    assert blocks["one"] == """```bash
python train.py --model gru --preset quick --model-dir runs/a
python train.py --model gru --preset quick --set train.seed=1 --model-dir=runs/b
```

| model | seed | i2t R@1 | medr | rsum | paper rsum | dev rsum | wall time |
|---|---|---|---|---|---|---|---|
| `gru` | 0 | 10.0 | 4 | 80.0 | 250.5 | 100.0 | 1.5 min |
| `gru` (quick) | 1 | 12.0 | 4 | 96.0 |  | 100.0 | 30 s |
| mean |  | 11.0 | 4 | 88.0 |  | 100.0 | 1.0 min |
| paper |  | 30.0 | 7.5 | 250.5 |  |  |  |"""
    # The missing run's row is left out; means with their standard deviation.
    assert blocks["two"].endswith("| model | i2t R@1 | η / dev rsum | peak memory |\n|---|---|---|---|\n| a and b | 11.0 ± 1.4 |  |  |")
    # A run in no table gets a table of its own, with the fit's choices.
    assert "| nested/c | `fv-gmm` | quick | 20.0 |" in blocks["other-runs"]
    assert "--model-dir" not in blocks["other-runs"]  # a command without one is printed as recorded


def _machine(wall, cpu, cores, load, model=None, isa=None):
    """A run's record that says how it used the machine, and which."""
    return {**run_record({}), "wall_seconds": wall, "cpu_seconds": cpu, "cores": cores, "load_average": load,
            "cpu": model, "isa": isa}


@pytest.mark.parametrize(("spread", "means"), [
    (True, ["| a, b | 12.1 ± 3.0 min | 18.5 ± 2.1 min | 2 |  |  |",  # sd of 10.0 and 14.2 min: 4.2 / √2
            "| a, c | 5.4 ± 6.5 min | 9.2 ± 11.1 min |  |  |  |"]),  # 10 and 0.75 min; 17 and 1.33 min; 2 and 4 cores
    (False, ["| a, b | 12.1 min | 18.5 min | 2 |  |  |", "| a, c | 5.4 min | 9.2 min |  |  |  |"]),
])
def test_how_a_run_used_the_machine_and_the_mean_of_its_times(spread, means):
    runs = {
        "a": _machine(600.0, 1020.0, 2, [1.1, 3.94], "AMD EPYC", "avx512"),
        "b": _machine(852.0, 1200.0, 2, [0.5, 2], "Intel Xeon and AMD EPYC", "avx2 and avx512"),  # resumed elsewhere
        "c": _machine(45.0, 80.0, 4, [0, 1.26], "Apple M2"),  # no instruction set known
        "old": run_record({}),  # before train.py recorded CPU time, cores, load and the machine
    }
    table = {"id": "t", "labels": ["run"], "columns": ["wall_time", "cpu_time", "cores", "load", "machine"],
             "spread": spread,
             "rows": [*({"run": name, "labels": [name]} for name in runs),
                      {"mean": ["a", "b"], "labels": ["a, b"]}, {"mean": ["a", "c"], "labels": ["a, c"]},
                      {"mean": ["a", "old"], "labels": ["a, old"]}]}
    assert report.render_table(table, {}, runs, "runs").split("\n\n", 1)[1] == "\n".join([
        "| run | wall time | CPU time | cores | load (start → end) | machine |",
        "|---|---|---|---|---|---|",
        "| a | 10.0 min | 17.0 min | 2 | 1.1 → 3.9 | AMD EPYC, kernels avx512 |",
        "| b | 14.2 min | 20.0 min | 2 | 0.5 → 2.0 | Intel Xeon and AMD EPYC, kernels avx2 and avx512 |",
        "| c | 45 s | 1.3 min | 4 | 0.0 → 1.3 | Apple M2 |",
        "| old |  |  |  |  |  |",
        *means,
        "| a, old |  |  |  |  |  |",  # a mean of a run without the values is not a mean of the others
    ])


def test_labels_take_literal_braces_and_run_names_with_braces(workspace, capsys):
    runs = workspace["runs"]
    shutil.copytree(runs / "b", runs / "x{y}")
    workspace["tables"].write_text(TABLE + 'rows = [{ run = "a", labels = ["{{a}} `{model}` {preset}"] }, '
                                           '{ paper = "p/x", labels = ["{{paper}}"] }]\n')
    assert report.main([str(runs), "--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]) == 0
    printed = capsys.readouterr().out
    assert "| m | rsum |\n|---|---|\n| {a} `gru` quick | 80.0 |\n| {paper} | 250.5 |\n" in printed
    assert "| x{y} | `gru` | quick | 12.0 |" in printed  # a run in no table, its name as it is


def test_a_table_of_commands_none_prints_no_command(runs_dir):
    runs_root, _, papers = runs_dir
    table = {"id": "t", "labels": ["run"], "columns": ["rsum"], "commands": "none", "rows": [{"run": "a", "labels": ["a"]}]}
    block = report.render([table], report.read_toml(papers), report.read_runs(runs_root), "runs")["t"]
    assert block.startswith("| run | rsum |\n|---|---|\n| a | ")
    assert "python" not in block


@pytest.mark.parametrize(("change", "sentence"), [
    ({}, "`python -m pytest`: 894 passed, 3 deselected in 11.1 min wall (19.0 min CPU) on 2 cores, load 0.7 → 2.1, "
         "2026-11-24 (Python 3.11.7, TensorFlow 2.21.0)."),
    ({"exit_status": 1, "counts": {"skipped": 4, "errors": 1, "failed": 2, "passed": 890, "deselected": 3, "xfailed": 1},
      "wall_seconds": 41.2, "cores": 1, "tensorflow": None},
     "`python -m pytest`: failed (exit status 1): 890 passed, 2 failed, 1 error, 4 skipped, 3 deselected, 1 xfailed "
     "in 41 s wall (19.0 min CPU) on 1 core, load 0.7 → 2.1, 2026-11-24 (Python 3.11.7)."),
    ({"exit_status": 5, "counts": {}, "command": "python -m pytest -k nothing", "wall_seconds": 3.0, "cpu_seconds": 2.5},
     "`python -m pytest -k nothing`: failed (exit status 5): no tests ran in 3 s wall (2 s CPU) on 2 cores, "
     "load 0.7 → 2.1, 2026-11-24 (Python 3.11.7, TensorFlow 2.21.0)."),
    ({"cpu": "AMD EPYC", "isa": "avx512"},
     "`python -m pytest`: 894 passed, 3 deselected in 11.1 min wall (19.0 min CPU) on 2 cores (AMD EPYC, kernels "
     "avx512), load 0.7 → 2.1, 2026-11-24 (Python 3.11.7, TensorFlow 2.21.0)."),
    ({"cpu": None, "isa": "avx2 (ONEDNN_MAX_CPU_ISA=AVX2 on an avx512 CPU)"},
     "`python -m pytest`: 894 passed, 3 deselected in 11.1 min wall (19.0 min CPU) on 2 cores (kernels avx2 "
     "(ONEDNN_MAX_CPU_ISA=AVX2 on an avx512 CPU)), load 0.7 → 2.1, 2026-11-24 (Python 3.11.7, TensorFlow 2.21.0)."),
])
def test_the_test_suites_sentence(change, sentence):
    assert report.suite_sentence({**SUITE, **change}) == sentence


def test_a_test_suite_table_is_its_sentence_in_its_block(suite_workspace, capsys):
    argv = ["--snapshot", str(suite_workspace["snapshot"]), "--tables", str(suite_workspace["tables"]),
            "--papers", str(suite_workspace["papers"])]
    assert report.main([*argv, *update_argv(suite_workspace)]) == 0
    assert report.markdown_blocks(suite_workspace["markdown"].read_text())["suite"] == report.suite_sentence(SUITE)
    assert "<!-- report:suite -->\n`python -m pytest`: 894 passed" in capsys.readouterr().out
    # Without its block the update is refused, as for any table.
    suite_workspace["markdown"].write_text(suite_workspace["markdown"].read_text().split("The suite:")[0])
    fails(capsys, suite_workspace, [*argv[:2], *update_argv(suite_workspace)], "no <!-- report:suite -->")


@pytest.mark.parametrize("history, cell", [
    ([10.0, 12.0, 11.0], "2 of 3"),
    ([10.0, 12.0, 13.5], "3 of 3 (still rising)"),  # the last validation was the best: undertrained
    ([7.0], "1 of 1"),
    ([], ""),  # a run that recorded no validation history
])
def test_best_dev_at_says_which_validation_was_the_best(history, cell):
    record = {**run_record({}), "dev_history": history}
    assert report_tables._run_cell("best_dev_at", record, {}, "run 'a'") == cell


@pytest.mark.parametrize("history, dev_rsum, name_metric, cell", [
    # Chosen by i2t mAP: the validation whose dev rsum is the kept checkpoint's, not the best rsum.
    ([10.0, 12.0, 11.0], 10.0, False, "1 of 3"),
    ([10.0, 12.0, 11.0], 11.0, True, "3 of 3 by i2t mAP (still rising)"),
    ([10.0, 12.0, 12.0], 12.0, True, "2 or 3 of 3 by i2t mAP"),  # two validations of that rsum
    ([10.000011, 12.0], 10.0, False, "1 of 2"),  # float32 in the logs
    ([10.0, 12.0], 11.0, False, ""),  # none of that rsum: not told
])
def test_best_dev_at_counts_the_validation_the_selection_metric_kept(history, dev_rsum, name_metric, cell):
    record = {**run_record({}), "dev_history": history, "dev": sample_metrics(1.0, dev_rsum), "selection_metric": "i2t_map"}
    assert report_tables._run_cell("best_dev_at", record, {}, "run 'a'", name_metric) == cell


@pytest.mark.parametrize("metrics, header, cells", [
    (["rsum", None], "best dev rsum at", ["2 of 2 (still rising)", "2 of 2 (still rising)"]),  # None: rsum, the default
    (["i2t_map", "i2t_map"], "best dev i2t mAP at", ["1 of 2", "1 of 2"]),
    (["rsum", "i2t_map"], "best dev at", ["2 of 2 (still rising)", "1 of 2 by i2t mAP"]),
])
def test_the_best_dev_header_names_the_selection_metric_its_runs_share(metrics, header, cells):
    runs = {name: {**run_record({}), "dev_history": [10.0, 12.0], "selection_metric": metric}
            for name, metric in zip("ab", metrics)}
    table = {"id": "t", "labels": ["run"], "columns": ["best_dev_at"], "rows": [{"run": n, "labels": [n]} for n in runs]}
    assert report.render_table(table, {}, runs, "runs").split("\n\n", 1)[1] == "\n".join([
        f"| run | {header} |", "|---|---|", f"| a | {cells[0]} |", f"| b | {cells[1]} |"])


def test_a_record_row_shows_the_measured_time_of_the_runs_it_names(tmp_path):
    # An estimate of 0.6 h beside two finished runs of 100 and 80 min wall (60 and 40 CPU), of 30 and 24 epochs.
    (tmp_path / "cost.json").write_text(json.dumps({"command": "python -m tools.bench --cost", "date": None,
                                                     "cpu": "AMD EPYC", "reports": [{"run_hours": 0.6, "isa": "avx2"}]}))
    table = {"id": "cost", "labels": ["model"], "columns": [{"value": "{run_hours} h", "header": "estimate"}, "measured_time"],
             "rows": [{"record": "cost.json", "measured": ["r0", "r1", "r2"], "labels": ["gru"]}]}
    tables = report.check_tables({"table": [table]}, {}, str(tmp_path / "tables.toml"))
    runs = {name: {**run_record({}), "wall_seconds": wall, "cpu_seconds": cpu, "epochs": epochs}
            for name, wall, cpu, epochs in (("r0", 6000.0, 3600.0, 30), ("r1", 4800.0, 2400.0, 24))}
    block = report.render(tables, {}, runs, "runs", str(tmp_path / "tables.toml"))["cost"]
    assert "| gru | 0.6 h | 90.0 min / 50.0 min (24–30 epochs; mean of 2 runs) |" in block
    assert "AMD EPYC, kernels avx2" in block  # the CPU, and the instruction set its reports ran on
    none_yet = report.render(tables, {}, {}, "runs", str(tmp_path / "tables.toml"))["cost"]
    assert "| gru | 0.6 h |  |" in none_yet


def test_record_rows_read_the_selected_report_of_a_recorded_file(tmp_path):
    source = bench_record(tmp_path)
    tables = report.check_tables(report.read_toml(source), {}, str(source))
    block = report.render(tables, {}, {}, "runs", str(source))["speed"]
    assert block == """```bash
python -m tools.bench --model gru --model rcn --preset quick
```

| model | i2t R@1 | pairs/s | CI |
|---|---|---|---|
| `gru` |  | 448 |  |
| `rcn` | 12.3 | 164 | (0.11, 0.20) |

Recorded in `results/bench/quick.json`: 2026-11-24 07:01 UTC, 2 cores, Some CPU, load 0.1 → 1.2."""


def test_the_other_runs_block_is_emptied_once_a_table_names_every_run(workspace, capsys):
    common = ["--tables", str(workspace["tables"]), "--papers", str(workspace["papers"]),
              "--update", str(workspace["markdown"])]
    argv = ["--snapshot", str(workspace["snapshot"]), *common]
    assert report.main(argv) == 0
    assert "| nested/c |" in report.markdown_blocks(workspace["markdown"].read_text())["other-runs"]
    # Its row leaving because its run was not read is a loss, refused.
    shutil.rmtree(workspace["runs"] / "nested")
    assert report.main([str(workspace["runs"]), *common]) == 2
    assert f"{workspace['markdown']} 'other-runs' 1 → 0" in capsys.readouterr().err
    tables = workspace["tables"]
    tables.write_text(tables.read_text() + '\n[[table]]\nid = "c"\nlabels = ["m"]\ncolumns = ["rsum"]\n'
                                           'rows = [{ run = "nested/c", labels = ["c"] }]\n')
    markdown = workspace["markdown"]
    markdown.write_text(markdown.read_text() + "<!-- report:c -->\n<!-- /report:c -->\n")
    assert report.main(argv) == 0
    assert report.markdown_blocks(markdown.read_text())["other-runs"] == ""
    capsys.readouterr()

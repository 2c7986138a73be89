"""`python -m tools.report`: the results tables of README.md and docs/ from the runs."""

import json
import re
import shlex
import shutil
import tomllib
from pathlib import Path

import pytest

from common.errors import InputError
from tools import report
from tools.report import cells, cli, columns
from tools.report import tables as report_tables

ROOT = Path(__file__).resolve().parent.parent.parent
README = ROOT / "README.md"
# The markdown files whose tables the report writes: README.md and every page of docs/.
MARKDOWN = [README, *sorted((ROOT / "docs").glob("*.md"))]
SNAPSHOT = ROOT / "results" / "runs.json"


def test_the_readmes_tables_are_the_reports_output_from_the_checked_in_runs(tmp_path, capsys):
    root, runs = report.read_snapshot(SNAPSHOT)
    tables_path = report.RESULTS_DIR / "tables.toml"
    tables = report.read_toml(tables_path)["table"]
    # The test suite's sentences come from results/test_suite.json, beside tables.toml.
    blocks = report.render(tables, report.read_toml(report.RESULTS_DIR / "papers.toml"), runs, root, str(tables_path))
    assert {"test-suite", "test-suite-testing"} <= blocks.keys()
    command = "python -m tools.report --snapshot results/runs.json --update README.md docs/*.md"
    assert command in cli.__doc__
    # Each table's block is in exactly one of the files, once, and is the report's output.
    found = {}
    for path in MARKDOWN:
        for table_id, block in report.markdown_blocks(path.read_text()).items():
            assert table_id not in found, f"the {table_id} table is in {found[table_id][0]} and in {path.relative_to(ROOT)}"
            found[table_id] = (path.relative_to(ROOT), block)
    # And the table of a user's own runs, empty here (docs/results.md).
    assert set(found) == {*blocks, "other-runs"} and set(blocks) == {table["id"] for table in tables}
    assert found["other-runs"] == (Path("docs/results.md"), "")
    for table_id, block in blocks.items():
        assert found[table_id][1] == block, f"{found[table_id][0]}'s {table_id} table is not the report's; run {command}"
    # The command itself leaves every file unchanged.
    copies = []
    for path in MARKDOWN:
        copy = tmp_path / path.relative_to(ROOT)
        copy.parent.mkdir(exist_ok=True)
        shutil.copy(path, copy)
        copies.append(copy)
    assert report.main(["--snapshot", str(SNAPSHOT), "--update", *map(str, copies)]) == 0
    for path, copy in zip(MARKDOWN, copies):
        assert copy.read_text() == path.read_text(), path
    capsys.readouterr()


def _shipped_copy(tmp_path):
    """A copy of README.md, docs/ and results/ in `tmp_path`."""
    shutil.copy(README, tmp_path / "README.md")
    for folder in ("docs", "results"):
        shutil.copytree(ROOT / folder, tmp_path / folder)


def _quick_start_run(runs, name):
    """A run of the quick start's command in runs/NAME, its numbers not the
    shipped gru-quick's."""
    _, shipped = report.read_snapshot(SNAPSHOT)
    record = {key: value for key, value in shipped["gru-quick"].items() if key not in ("model", "preset", "dev_history")}
    record["test"] = {**record["test"], "rsum": 199.3}
    (runs / name).mkdir(parents=True)
    (runs / name / "config.json").write_text(json.dumps({"model_name": "gru", "preset": "quick"}))
    (runs / name / "results.json").write_text(json.dumps(record))


def _documented_report_command():
    """The arguments of docs/results.md's command that adds runs/ to the
    record, its globs expanded (in the current directory)."""
    (command,) = re.findall(r"^python -m tools\.report runs/ .*$", (ROOT / "docs" / "results.md").read_text(), re.M)
    return [str(path) for word in shlex.split(command)[3:]
            for path in (sorted(Path().glob(word)) if "*" in word else [word])]


def _shipped_files():
    """{path: bytes} of README.md, docs/ and results/ in the current directory."""
    paths = [Path("README.md"), *Path("docs").iterdir(), *Path("results").rglob("*")]
    return {path: path.read_bytes() for path in paths if path.is_file()}


def test_the_documented_command_after_the_quick_start_refuses_to_replace_the_shipped_run(tmp_path, monkeypatch, capsys):
    _shipped_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    _quick_start_run(tmp_path / "runs", "gru-quick")  # the quick start's --model-dir
    before = _shipped_files()
    assert report.main(_documented_report_command()) == 2
    assert capsys.readouterr().err == ("error: runs/gru-quick/results.json: would replace results/runs.json: run "
                                       "'gru-quick', another run of that name (test rsum 201.2 → 199.3); give --replace "
                                       "to replace recorded runs, or train into a folder of another name\n")
    assert _shipped_files() == before


def test_the_documented_command_adds_a_run_of_a_new_name_and_keeps_every_shipped_row(tmp_path, monkeypatch, capsys):
    _shipped_copy(tmp_path)
    monkeypatch.chdir(tmp_path)
    _quick_start_run(tmp_path / "runs", "gru-quick-mine")
    before = _shipped_files()
    assert report.main(_documented_report_command()) == 0, capsys.readouterr().err
    _, shipped = report.read_snapshot(SNAPSHOT)
    _, recorded = report.read_snapshot("results/runs.json")
    assert recorded == {**shipped, "gru-quick-mine": recorded["gru-quick-mine"]}
    assert recorded["gru-quick-mine"]["test"]["rsum"] == 199.3
    changed = {path for path, data in before.items() if path.read_bytes() != data}
    assert changed <= {Path("results/runs.json"), Path("docs/results.md"), Path("docs/recall_at_k.png")}
    # Every shipped block as it was; the user's run in the table of their runs.
    blocks = report.markdown_blocks(Path("docs/results.md").read_text())
    assert {**blocks, "other-runs": ""} == report.markdown_blocks(before[Path("docs/results.md")].decode())
    assert "| gru-quick-mine | `gru` | quick |" in blocks["other-runs"]
    capsys.readouterr()


def test_every_paper_row_and_every_table_row_resolves():
    papers = report.read_toml(report.RESULTS_DIR / "papers.toml")
    root, runs = report.read_snapshot(SNAPSHOT)
    for table in report.read_toml(report.RESULTS_DIR / "tables.toml")["table"]:
        # A run not recorded yet comes with the command that makes it (tools.reproduce).
        made = {row["run"] for row in table.get("rows", []) if "command" in row}
        for row in table.get("rows", []):  # a test-suite table has none
            assert len(row["labels"]) == len(table["labels"]), (table["id"], row)
            assert report_tables._row_runs(row) <= runs.keys() | made, (table["id"], row)
            if "paper" in row:
                assert cells.paper_row(papers, row["paper"])
    # The papers' rsums, computed from their recalls, are the ones they print.
    assert cells.with_sums(papers["francis2018"]["rcn005"])["rsum"] == pytest.approx(355.5)
    assert cells.with_sums(papers["ma2015"]["vgg_ens"])["rsum"] == pytest.approx(275.2)
    assert cells.with_sums(papers["dong2018"]["multiscale"]) == {**papers["dong2018"]["multiscale"], "i2t_rsum": pytest.approx(180.9)}


def _metrics(r1, rsum):
    recalls = {f"{d}_r{k}": r1 * k for d in ("i2t", "t2i") for k in (1, 5, 10)}
    return {**recalls, "i2t_medr": 3.0, "t2i_medr": 4.0, "rsum": rsum}


def _write_run(model_dir, model, test_r1, command, wall_seconds=90.0):
    model_dir.mkdir(parents=True)
    (model_dir / "config.json").write_text(json.dumps({"model_name": model, "preset": "quick", "model": {}, "train": {}}))
    (model_dir / "results.json").write_text(json.dumps({
        "dev": _metrics(test_r1 - 1, 100.0), "test": _metrics(test_r1, 8 * test_r1), "command": command,
        "wall_seconds": wall_seconds, "peak_memory_bytes": 3 * 2**30, "fit": {"cca_eta": 0.01, "cca_dev_rsum": 99.5},
    }))


@pytest.fixture
def runs_dir(tmp_path):
    runs = tmp_path / "runs"
    _write_run(runs / "a", "gru", 10.0, "python train.py --model gru --preset quick --model-dir /somewhere/else")
    _write_run(runs / "b", "gru", 12.0, "python train.py --model gru --preset quick --set train.seed=1 --model-dir=x", 30.0)
    _write_run(runs / "nested" / "c", "fv-gmm", 20.0, "python train.py --model fv-gmm --preset quick")
    (runs / "unfinished").mkdir()  # no results.json yet: not a row
    (runs / "unfinished" / "config.json").write_text("{}")
    tables = tmp_path / "tables.toml"
    tables.write_text('''
[[table]]
id = "one"
labels = ["model", "seed"]
columns = ["i2t_r1", "t2i_medr", "rsum", "paper:rsum", "dev_rsum", "wall_time"]
rows = [
  { run = "a", labels = ["`{model}`", "0"], paper = "p/x" },
  { run = "b", labels = ["`{model}` ({preset})", "1"] },
  { mean = ["a", "b"], labels = ["mean", ""] },
  { paper = "p/x", labels = ["paper", ""] },
]

[[table]]
id = "two"
spread = true
labels = ["model"]
columns = ["i2t_r1", { fit = "{cca_eta:g} / {cca_dev_rsum:.1f}", header = "η / dev rsum" }, "peak_memory"]
rows = [{ mean = ["a", "b"], labels = ["a and b"] }, { run = "missing", labels = ["not there"] }]
''')
    papers = tmp_path / "papers.toml"
    papers.write_text("[p.x]\ni2t_r1 = 30.0\ni2t_r5 = 50\ni2t_r10 = 60\nt2i_r1 = 20\nt2i_r5 = 40\nt2i_r10 = 50.5\nt2i_medr = 7.5\n")
    return runs, tables, papers


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


def test_update_snapshot_and_errors(runs_dir, tmp_path, capsys):
    runs, tables, papers = runs_dir
    markdown = tmp_path / "doc.md"
    markdown.write_text("intro\n<!-- report:one -->\nold\ntable\n<!-- /report:one -->\nmiddle\n<!-- report:two -->\n<!-- /report:two -->\n"
                        "<!-- report:other-runs -->\n<!-- /report:other-runs -->\nend\n")
    snapshot = tmp_path / "snapshot.json"
    common = ["--tables", str(tables), "--papers", str(papers)]
    assert report.main([str(runs), *common, "--update", str(markdown), "--save-snapshot", str(snapshot)]) == 0
    printed = capsys.readouterr().out
    updated = markdown.read_text()
    assert updated.startswith("intro\n<!-- report:one -->\n```bash\n") and updated.endswith("-->\nend\n") and "old" not in updated
    assert report.markdown_blocks(updated) == report.markdown_blocks(printed)
    # The snapshot regenerates the same file without the runs.
    shutil.rmtree(runs)
    assert report.main(["--snapshot", str(snapshot), *common, "--update", str(markdown)]) == 0
    assert markdown.read_text() == updated and capsys.readouterr().out == printed

    markdown.write_text("no blocks\n")
    assert report.main(["--snapshot", str(snapshot), *common, "--update", str(markdown)]) == 2
    assert f"error: {markdown}: no <!-- report:one -->" in capsys.readouterr().err
    assert markdown.read_text() == "no blocks\n"
    assert report.main([str(tmp_path / "nothing"), *common]) == 2
    assert "not a directory of training runs" in capsys.readouterr().err
    tables.write_text('[[table]]\nid = "bad"\nlabels = ["m"]\ncolumns = ["r@1"]\nrows = [{ run = "a", labels = ["a"] }]\n')
    assert report.main(["--snapshot", str(snapshot), *common]) == 2
    assert "table 'bad': unknown column 'r@1'" in capsys.readouterr().err
    tables.write_text('[[table]]\nid = "bad"\ncolumns = ["rsum"]\nrows = [{ run = "a", labels = ["a"] }]\n')
    assert report.main(["--snapshot", str(snapshot), *common]) == 2
    assert f"error: {tables}: table 'bad': lacks the key 'labels'" in capsys.readouterr().err
    tables.write_text('[[table]]\nid = "bad"\nlabels = ["m"]\ncolumns = ["rsum"]\nrows = [{ mean = ["a"], labels = ["a"] }]\n')
    assert report.main(["--snapshot", str(snapshot), *common]) == 2
    assert f"error: {tables}: table 'bad': row 1: the key 'mean' must be a list of at least two runs' names" in capsys.readouterr().err


def test_runs_join_a_snapshot_and_replace_its_runs_of_the_same_name_only_with_replace(runs_dir, tmp_path, capsys):
    runs, tables, papers = runs_dir
    common = ["--tables", str(tables), "--papers", str(papers)]
    snapshot = tmp_path / "snapshot.json"
    assert report.main([str(runs), *common, "--save-snapshot", str(snapshot)]) == 0
    shutil.rmtree(runs / "nested")
    shutil.rmtree(runs / "a")
    _write_run(runs / "a", "gru", 11.0, "python train.py --model gru --preset quick")  # a new run a
    merged = tmp_path / "merged.json"
    argv = [str(runs), "--snapshot", str(snapshot), *common, "--save-snapshot", str(merged)]
    capsys.readouterr()
    assert report.main(argv) == 2
    assert capsys.readouterr().err == (f"error: {runs / 'a' / 'results.json'}: would replace {snapshot}: run 'a', another "
                                       "run of that name (test rsum 80.0 → 88.0); give --replace to replace recorded runs, "
                                       "or train into a folder of another name\n")
    assert not merged.exists()
    assert report.main([*argv, "--replace"]) == 0
    capsys.readouterr()
    recorded = json.loads(merged.read_text())
    assert recorded["root"] == str(runs) and sorted(recorded["runs"]) == ["a", "b", "nested/c"]
    assert recorded["runs"]["a"]["test"]["i2t_r1"] == 11.0 and recorded["runs"]["nested/c"]["test"]["i2t_r1"] == 20.0
    # Printing alone loses nothing: the run under RUNS is shown in place of the recorded one.
    assert report.main([str(runs), "--snapshot", str(snapshot), *common]) == 0
    assert "| `gru` | 0 | 11.0 |" in capsys.readouterr().out
    assert report.main([*common]) == 2
    assert "give a runs directory, --snapshot, or both" in capsys.readouterr().err


def test_save_snapshot_over_a_snapshot_keeps_its_runs_unless_replace(runs_dir, tmp_path, capsys):
    runs, tables, papers = runs_dir
    common = ["--tables", str(tables), "--papers", str(papers)]
    snapshot = tmp_path / "snapshot.json"
    assert report.main([str(runs), *common, "--save-snapshot", str(snapshot)]) == 0
    shutil.rmtree(runs)
    _write_run(runs / "mine", "gru", 14.0, "python train.py --model gru --preset quick --model-dir runs/mine")
    capsys.readouterr()
    assert report.main([str(runs), *common, "--save-snapshot", str(snapshot)]) == 0
    assert capsys.readouterr().err == f"written (4 runs): {snapshot}\n"
    assert sorted(json.loads(snapshot.read_text())["runs"]) == ["a", "b", "mine", "nested/c"]
    assert report.main([str(runs), *common, "--save-snapshot", str(snapshot), "--replace"]) == 0
    assert sorted(json.loads(snapshot.read_text())["runs"]) == ["mine"]
    capsys.readouterr()


def test_update_refuses_to_drop_table_rows_and_plot_to_redraw_from_unknown_runs(runs_dir, tmp_path, capsys):
    runs, tables, papers = runs_dir
    common = ["--tables", str(tables), "--papers", str(papers)]
    markdown, plot = tmp_path / "doc.md", tmp_path / "recall.png"
    markdown.write_text("<!-- report:one -->\n<!-- /report:one -->\n<!-- report:two -->\n<!-- /report:two -->\n"
                        "<!-- report:other-runs -->\n<!-- /report:other-runs -->\n")
    assert report.main([str(runs), *common, "--update", str(markdown), "--plot", str(plot)]) == 0
    before = markdown.read_text(), plot.read_bytes()
    shutil.rmtree(runs / "b")
    capsys.readouterr()
    assert report.main([str(runs), *common, "--update", str(markdown)]) == 2
    # Table one would lose run b and the mean of a and b (table two, left without rows, keeps its block).
    assert capsys.readouterr().err == (f"error: --update: tables would lose rows ({markdown} 'one' 4 → 2): their runs are "
                                       "not among those read; add --snapshot with the recorded runs, or give --replace\n")
    assert report.main([str(runs), *common, "--plot", str(plot)]) == 2
    assert capsys.readouterr().err == (f"error: --plot {plot}: exists, and the runs it draws are not known here; draw it "
                                       "from the recorded runs too (--snapshot, or --save-snapshot over them) or give "
                                       "--replace\n")
    assert (markdown.read_text(), plot.read_bytes()) == before
    assert report.main([str(runs), *common, "--update", str(markdown), "--plot", str(plot), "--replace"]) == 0
    assert "| `gru` (quick) |" not in markdown.read_text() and plot.read_bytes() != before[1]
    capsys.readouterr()


def _record(fit):
    """A run's record as read_runs returns it, with this fit."""
    return {"model": "m", "preset": "quick", "command": None, "wall_seconds": None, "cpu_seconds": None, "cores": None,
            "load_average": None, "peak_memory_bytes": None, "fit": fit, "dev": _metrics(1.0, 10.0),
            "test": _metrics(2.0, 20.0), "dev_history": [], "selection_metric": None}


def test_fit_columns_fill_in_the_keys_a_run_recorded():
    runs = {
        "ridge": _record({"eta": 0.003, "dev_score": 261.82, "share": 0.144, "n": 7}),
        "no-share": _record({"eta": 0.01, "dev_score": 99.0}),  # recorded no "share"
        "ensemble": _record({"members": "a, b, c"}),
        "nothing": _record({}),
        "null": _record({"eta": None, "dev_score": 1.0, "share": 0.5}),  # a key recorded as null is not there
    }
    table = {
        "id": "fits",
        "labels": ["run"],
        "columns": [
            "rsum",
            {"fit": "{eta:g} / {dev_score:.1f}", "header": "η / dev"},
            {"fit": "{share:.1%}"},  # header: the key
            {"fit": "{members}", "header": "members"},
            {"fit": "{{{n:d}}} of {eta}"},  # escaped braces and text around the fields
        ],
        "rows": [
            *({"run": name, "labels": [name]} for name in runs),
            {"mean": ["ridge", "no-share"], "labels": ["mean"]},
        ],
    }
    block = report.render_table(table, {}, runs, "runs")
    assert block.split("\n\n", 1)[1] == """\
| run | rsum | η / dev | share | members | {n} of eta |
|---|---|---|---|---|---|
| ridge | 20.0 | 0.003 / 261.8 | 14.4% |  | {7} of 0.003 |
| no-share | 20.0 | 0.01 / 99.0 |  |  |  |
| ensemble | 20.0 |  |  | a, b, c |  |
| nothing | 20.0 |  |  |  |  |
| null | 20.0 |  | 50.0% |  |  |
| mean | 20.0 |  |  |  |  |"""


def _machine(wall, cpu, cores, load):
    """A run's record that says how it used the machine."""
    return {**_record({}), "wall_seconds": wall, "cpu_seconds": cpu, "cores": cores, "load_average": load}


@pytest.mark.parametrize(("spread", "means"), [
    (True, ["| a, b | 12.1 ± 3.0 min | 18.5 ± 2.1 min | 2 |  |",  # sd of 10.0 and 14.2 min: 4.2 / √2
            "| a, c | 5.4 ± 6.5 min | 9.2 ± 11.1 min |  |  |"]),  # 10 and 0.75 min; 17 and 1.33 min; 2 and 4 cores
    (False, ["| a, b | 12.1 min | 18.5 min | 2 |  |", "| a, c | 5.4 min | 9.2 min |  |  |"]),
])
def test_how_a_run_used_the_machine_and_the_mean_of_its_times(spread, means):
    runs = {
        "a": _machine(600.0, 1020.0, 2, [1.1, 3.94]),
        "b": _machine(852.0, 1200.0, 2, [0.5, 2]),
        "c": _machine(45.0, 80.0, 4, [0, 1.26]),
        "old": _record({}),  # before train.py recorded CPU time, cores and load
    }
    table = {"id": "t", "labels": ["run"], "columns": ["wall_time", "cpu_time", "cores", "load"], "spread": spread,
             "rows": [*({"run": name, "labels": [name]} for name in runs),
                      {"mean": ["a", "b"], "labels": ["a, b"]}, {"mean": ["a", "c"], "labels": ["a, c"]},
                      {"mean": ["a", "old"], "labels": ["a, old"]}]}
    assert report.render_table(table, {}, runs, "runs").split("\n\n", 1)[1] == "\n".join([
        "| run | wall time | CPU time | cores | load (start → end) |",
        "|---|---|---|---|---|",
        "| a | 10.0 min | 17.0 min | 2 | 1.1 → 3.9 |",
        "| b | 14.2 min | 20.0 min | 2 | 0.5 → 2.0 |",
        "| c | 45 s | 1.3 min | 4 | 0.0 → 1.3 |",
        "| old |  |  |  |  |",
        *means,
        "| a, old |  |  |  |  |",  # a mean of a run without the values is not a mean of the others
    ])


def test_a_runs_cpu_time_cores_and_load_from_its_results_and_through_a_snapshot(runs_dir, tmp_path, capsys):
    runs, tables, papers = runs_dir
    results = runs / "a" / "results.json"
    results.write_text(json.dumps({**json.loads(results.read_text()), "cpu_seconds": 150.0, "cores": 2, "load_average": [0.25, 1.5]}))
    tables.write_text(TABLE.replace('["rsum"]', '["wall_time", "cpu_time", "cores", "load"]') +
                      'rows = [{ run = "a", labels = ["a"] }, { run = "b", labels = ["b"] }]\n')
    common = ["--tables", str(tables), "--papers", str(papers)]
    snapshot = tmp_path / "snapshot.json"
    assert report.main([str(runs), *common, "--save-snapshot", str(snapshot)]) == 0
    printed = capsys.readouterr().out
    assert "| a | 1.5 min | 2.5 min | 2 | 0.2 → 1.5 |\n| b | 30 s |  |  |  |\n" in printed  # b: recorded none of them
    assert report.main(["--snapshot", str(snapshot), *common]) == 0
    assert capsys.readouterr().out == printed


def test_the_report_knows_no_models_fit_keys():
    for module in Path(report.__file__).parent.glob("*.py"):
        assert not re.search(r"cca|hglmm|laplacian|members|η", module.read_text(), re.IGNORECASE), module.name


@pytest.mark.parametrize(("column", "problem"), [
    ({"fit": "{eta:g"}, "fit: "),  # then Python's words for it
    ({"fit": "eta}"}, "fit: "),
    ({"fit": "eta"}, "fit names no recorded key"),
    ({"fit": "{} / {0}"}, "the field {} is not {KEY} or {KEY:FORMAT} of a recorded key"),
    ({"fit": "{eta.real}"}, "the field {eta.real} is not"),
    ({"fit": "{eta[0]}"}, "the field {eta[0]} is not"),
    ({"fit": "{eta!r}"}, "the field {eta!r} is not"),
    ({"fit": "{eta:zz}"}, "the field {eta:zz} has no valid format spec"),
    ({"fit": "{eta:{width}}"}, "the field {eta:{width}} has no valid format spec"),
    ({"fit": 3}, "fit must be a format string of recorded keys"),
    ({"fit": "{eta}", "header": 1}, "header must be a string"),
    ({"fit": "{eta}", "heading": "η"}, "unknown setting heading"),
])
def test_a_malformed_fit_column_is_an_error_naming_the_table_and_the_column(column, problem):
    table = {"id": "t", "labels": ["run"], "columns": ["rsum", column], "rows": [{"run": "a", "labels": ["a"]}]}
    with pytest.raises(InputError) as error:
        report.render_table(table, {}, {"a": _record({"eta": 0.5})}, "runs")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"tables.toml: table 't': column {columns._toml(column)}: {problem}")


def test_fit_column_errors_from_the_command_name_the_tables_file(runs_dir, capsys):
    runs, tables, papers = runs_dir
    common = [str(runs), "--tables", str(tables), "--papers", str(papers)]
    tables.write_text('[[table]]\nid = "bad"\nlabels = ["m"]\ncolumns = ["rsum", { fit = "{cca_eta:g" }]\n'
                      'rows = [{ run = "a", labels = ["a"] }]\n')
    assert report.main(common) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tables}: table 'bad': column {{ fit = '{{cca_eta:g' }}: fit: ") and err.count("\n") == 1
    assert err.endswith('; a fit column is { fit = "... {KEY} ... {KEY:FORMAT} ...", header = "..." }\n')
    # "fit:KEY" is not a column: a fit column is an inline table.
    tables.write_text('[[table]]\nid = "bad"\nlabels = ["m"]\ncolumns = ["fit:cca_eta"]\nrows = [{ run = "a", labels = ["a"] }]\n')
    assert report.main(common) == 2
    assert f"error: {tables}: table 'bad': unknown column 'fit:cca_eta'; known: " in capsys.readouterr().err
    # A format the recorded value cannot take (a string as a number).
    tables.write_text('[[table]]\nid = "bad"\nlabels = ["m"]\ncolumns = [{ fit = "{cca_eta:.1f} {cca_dev_rsum:d}" }]\n'
                      'rows = [{ run = "a", labels = ["a"] }]\n')
    assert report.main(common) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tables}: table 'bad': column {{ fit = '{{cca_eta:.1f}} {{cca_dev_rsum:d}}' }}: cannot format the fit "
                          "{'cca_eta': 0.01, 'cca_dev_rsum': 99.5}: ") and err.count("\n") == 1
    assert err.endswith(f" (the fit of {runs / 'a' / 'results.json'})\n")  # and the run whose value it is


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


# --- Bad input: one line naming the file and the key, exit status 2, no output touched ---------------


@pytest.fixture
def workspace(runs_dir, tmp_path):
    """The runs, tables and papers of `runs_dir`, a snapshot of them, and an
    output directory holding a markdown file with the tables' blocks."""
    runs, tables, papers = runs_dir
    out = tmp_path / "out"
    out.mkdir()
    markdown = out / "doc.md"
    markdown.write_text("intro\n<!-- report:one -->\nold one\n<!-- /report:one -->\n<!-- report:two -->\n<!-- /report:two -->\n"
                        "<!-- report:other-runs -->\n<!-- /report:other-runs -->\nend\n")
    snapshot = tmp_path / "snapshot.json"
    assert report.main([str(runs), "--tables", str(tables), "--papers", str(papers), "--save-snapshot", str(snapshot)]) == 0
    return {"runs": runs, "tables": tables, "papers": papers, "snapshot": snapshot, "out": out, "markdown": markdown}


def _state(directory):
    """Every file below `directory`: its bytes and modification time."""
    return {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in sorted(directory.rglob("*")) if path.is_file()}


def _fails(capsys, workspace, argv, *fragments):
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


def _update(workspace):
    return ["--update", str(workspace["markdown"])]


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
    ("config.json", '{"model_name": "gru"}', "config.json: lacks the key 'preset'"),
    ("config.json", '{"model_name": "gru", "preset": 1}', "config.json: the key 'preset' must be a string, got 1"),
])
def test_a_runs_malformed_results_or_config_is_an_error_naming_that_file(workspace, capsys, file, content, problem):
    (workspace["runs"] / "nested" / "c" / file).write_text(content)
    err = _fails(capsys, workspace, [str(workspace["runs"]), *_update(workspace)], problem)
    assert err.startswith(f"error: {workspace['runs'] / 'nested' / 'c' / file}: ")


def _snapshot(workspace, change):
    """The workspace's snapshot, changed by `change(snapshot)` (which may
    return a replacement)."""
    snapshot = json.loads(workspace["snapshot"].read_text())
    snapshot = change(snapshot) or snapshot
    workspace["snapshot"].write_text(json.dumps(snapshot))
    return ["--snapshot", str(workspace["snapshot"])]


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
    argv = _snapshot(workspace, change)
    err = _fails(capsys, workspace, [*argv, *_update(workspace)], problem)
    assert err.startswith(f"error: {workspace['snapshot']}: ")


def test_an_old_snapshot_without_the_optional_keys_still_reports(workspace, capsys):
    def old(snapshot):
        for record in snapshot["runs"].values():
            for key in ("command", "wall_seconds", "peak_memory_bytes", "fit", "dev_history"):
                del record[key]
    argv = _snapshot(workspace, old)
    assert report.main([*argv, "--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]) == 0
    assert "| `gru` | 0 | 10.0 | 4 | 80.0 | 250.5 | 100.0 |  |" in capsys.readouterr().out
    # A null is an absent key, in a snapshot as in a results.json.
    argv = _snapshot(workspace, lambda s: s["runs"]["a"].update(fit=None, dev_history=None))
    workspace["tables"].write_text(TABLE.replace('["rsum"]', '["rsum", "dev_history", { fit = "{cca_eta}" }]') +
                                   'rows = [{ run = "a", labels = ["a"] }]\n')
    assert report.main([*argv, "--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]) == 0
    assert "| m | rsum | dev rsum per validation | cca_eta |\n|---|---|---|---|\n| a | 80.0 |  |  |\n" in capsys.readouterr().out
    results = workspace["runs"] / "a" / "results.json"
    results.write_text(json.dumps({**json.loads(results.read_text()), "fit": None}))
    assert report.main([str(workspace["runs"]), "--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]) == 0
    assert "| a | 80.0 |  |  |\n" in capsys.readouterr().out


TABLE = '[[table]]\nid = "t"\nlabels = ["m"]\ncolumns = ["rsum"]\n'


@pytest.mark.parametrize(("text", "problem"), [
    ('[table]\nid = "t"\nlabels = ["m"]\ncolumns = ["rsum"]\nrows = []\n', ": [table] must be [[table]]"),
    ('table = 3\n', ": 'table' must be [[table]] entries, got 3"),
    ('tables = []\n', ": unknown key 'tables'; the file holds only [[table]] entries"),
    ('[[tabel]]\nid = "t"\n', ": unknown key 'tabel'"),
    ('[[table]]\nlabels = ["m"]\n', ": [[table]] number 1: the key 'id' must be a name"),
    ('[[table]]\nid = "two words"\n', ": [[table]] number 1: the key 'id' must be a name"),
    ('[[table]]\nid = "other-runs"\nlabels = ["m"]\ncolumns = []\nrows = []\n', ": table 'other-runs': the id 'other-runs' is the report's own"),
    (TABLE + 'rows = []\n' + TABLE + 'rows = []\n', ": table 't': a second table of this id"),
    (TABLE + 'rows = []\ncaption = "x"\n', ": table 't': unknown key 'caption'"),
    ('[[table]]\nid = "t"\nlabels = "m"\ncolumns = []\nrows = []\n', ": table 't': the key 'labels' must be a list"),
    ('[[table]]\nid = "t"\nlabels = ["m"]\ncolumns = "rsum"\nrows = []\n', ": table 't': the key 'columns' must be a list of columns"),
    ('[[table]]\nid = "t"\nlabels = ["m"]\ncolumns = [3]\nrows = []\n', ": table 't': unknown column 3"),
    ('[[table]]\nid = "t"\nlabels = ["m"]\ncolumns = ["rsum"]\n[table.rows]\nrun = "a"\n', ": table 't': the key 'rows' must be a list of rows"),
    (TABLE + 'rows = ["a"]\n', ": table 't': the key 'rows' must be a list of rows"),
    (TABLE + 'rows = []\ncommands = "folded"\n', ": table 't': the key 'commands' can only be \"details\" (fold the commands away) or \"none\""),
    (TABLE + 'rows = []\nspread = "yes"\n', ": table 't': the key 'spread' must be true or false"),
    (TABLE + 'rows = [{ runs = "a", labels = ["a"] }]\n', ": table 't': row 1: unknown key 'runs'"),
    (TABLE + 'rows = [{ labels = ["a"] }]\n', ": table 't': row 1: names no run, mean, record or paper"),
    (TABLE + 'rows = [{ run = 3, labels = ["a"] }]\n', ": table 't': row 1: the key 'run' must be a run's name"),
    (TABLE + 'rows = [{ run = "a", mean = ["a", "b"], labels = ["a"] }]\n', ": table 't': row 1: has both 'run' and 'mean'"),
    (TABLE + 'rows = [{ mean = "a b", labels = ["a"] }]\n', ": table 't': row 1: the key 'mean' must be a list of at least two"),
    (TABLE + 'rows = [{ mean = ["a", "b"], paper = "p/x", labels = ["a"] }]\n', ": table 't': row 1: a mean row has no paper"),
    (TABLE + 'rows = [{ run = "a", labels = ["a"] }, { paper = "p/y", labels = ["p"] }]\n', ": table 't': row 2: the key 'paper' must name a row PAPER/ROW of "),
    (TABLE + 'rows = [{ paper = "p", labels = ["p"] }]\n', ": table 't': row 1: the key 'paper' must name a row"),
    (TABLE + 'rows = [{ paper = 3, labels = ["p"] }]\n', ": table 't': row 1: the key 'paper' must name a row"),
    (TABLE + 'rows = [{ run = "a" }]\n', ": table 't': row 1: the key 'labels' must be a list of 1 strings"),
    (TABLE + 'rows = [{ run = "a", labels = ["a", "b"] }]\n', ": table 't': row 1: the key 'labels' must be a list of 1 strings"),
    (TABLE + 'rows = [{ run = "a", labels = [1] }]\n', ": table 't': row 1: the key 'labels' must be a list of 1 strings"),
    (TABLE + 'rows = [{ run = "a", labels = ["set {x"] }]\n', ": table 't': row 1: the label 'set {x': "),
    (TABLE + 'rows = [{ run = "a", labels = ["x}"] }]\n', ": table 't': row 1: the label 'x}': "),
    (TABLE + 'rows = [{ run = "a", labels = ["{seed}"] }]\n', ": table 't': row 1: the label '{seed}' has the placeholder {seed}"),
    (TABLE + 'rows = [{ run = "a", labels = ["{}"] }]\n', ": table 't': row 1: the label '{}' has the placeholder {}"),
    (TABLE + 'rows = [{ run = "a", labels = ["{model!r}"] }]\n', "the label '{model!r}' has the placeholder {model!r}"),
    (TABLE + 'rows = [{ run = "a", labels = ["{model:>9}"] }]\n', "the label '{model:>9}' has the placeholder {model:>9}"),
    (TABLE + 'rows = [{ paper = "p/x", labels = ["{model}"] }]\n', ": table 't': row 1: the label '{model}' has the placeholder"),
    (TABLE + 'rows = [{ mean = ["a", "b"], labels = ["{preset}"] }]\n', ": table 't': row 1: the label '{preset}' has the placeholder"),
])
def test_a_malformed_tables_toml_is_an_error_naming_it_and_the_table(workspace, capsys, text, problem):
    workspace["tables"].write_text(text)
    # Before the runs are read (they are gone) and before any output.
    shutil.rmtree(workspace["runs"])
    err = _fails(capsys, workspace, [str(workspace["runs"]), *_update(workspace), "--save-snapshot", str(workspace["out"] / "s.json")],
                 problem)
    assert err.startswith(f"error: {workspace['tables']}: ")
    if "must be a list of 1 strings" in problem or "placeholder" in problem:
        assert "{model} and {preset}" in err or "strings" in err


@pytest.mark.parametrize(("text", "problem"), [
    ('p = "x"\n', ": p must be a table [p] of the paper's rows, got \"x\""),
    ('[p]\nx = 3\n', ": p.x must be a table [p.x] of the row's metrics, got 3"),
    ('[p]\nsource = 3\n', ": p.source must be a string, got 3"),
    ('[p.x]\ni2t_r1 = "30"\n', ": p.x.i2t_r1 must be a number, got \"30\""),
    ('[p.x]\ni2t_R1 = 30\n', ": p.x.i2t_R1: unknown metric; known: i2t_r1, "),
])
def test_a_malformed_papers_toml_is_an_error_naming_it_and_the_key(workspace, capsys, text, problem):
    workspace["papers"].write_text(text)
    err = _fails(capsys, workspace, ["--snapshot", str(workspace["snapshot"]), *_update(workspace)], problem)
    assert err.startswith(f"error: {workspace['papers']}: ")


def test_labels_take_literal_braces_and_run_names_with_braces(workspace, capsys):
    runs = workspace["runs"]
    shutil.copytree(runs / "b", runs / "x{y}")
    workspace["tables"].write_text(TABLE + 'rows = [{ run = "a", labels = ["{{a}} `{model}` {preset}"] }, '
                                           '{ paper = "p/x", labels = ["{{paper}}"] }]\n')
    assert report.main([str(runs), "--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]) == 0
    printed = capsys.readouterr().out
    assert "| m | rsum |\n|---|---|\n| {a} `gru` quick | 80.0 |\n| {paper} | 250.5 |\n" in printed
    assert "| x{y} | `gru` | quick | 12.0 |" in printed  # a run in no table, its name as it is


def test_a_recall_missing_for_the_plot_is_an_error_naming_the_run(workspace, capsys):
    plot = workspace["out"] / "recall.png"
    results = workspace["runs"] / "a" / "results.json"
    record = json.loads(results.read_text())
    del record["test"]["t2i_r5"]
    results.write_text(json.dumps(record))
    argv = [str(workspace["runs"]), *_update(workspace), "--plot", str(plot)]
    assert _fails(capsys, workspace, argv).startswith(f"error: {results}: lacks the key 'test.t2i_r5', which the recall@K plot")
    # The same from a snapshot: the snapshot and the run.
    argv = _snapshot(workspace, lambda s: s["runs"]["b"]["test"].update(i2t_r10=None))
    err = _fails(capsys, workspace, [*argv, *_update(workspace), "--plot", str(plot)])
    assert err.startswith(f"error: {workspace['snapshot']}: run 'b': lacks the key 'test.i2t_r10'")
    assert not plot.exists()
    # Without --plot the missing recall is an empty cell.
    assert report.main([*argv, "--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]) == 0
    assert "| `gru` (quick) | 1 | 12.0 | 4 | 96.0 |" in capsys.readouterr().out


def test_every_output_is_checked_before_any_is_written(workspace, capsys):
    out, snapshot = workspace["out"], ["--snapshot", str(workspace["snapshot"])]
    update = _update(workspace)
    _fails(capsys, workspace, [*snapshot, *update, "--plot", str(out / "recall.bmp")],
                 "--plot ", "recall.bmp: the extension '.bmp' names no format matplotlib writes; end the name in one of ", ".pdf")
    _fails(capsys, workspace, [*snapshot, *update, "--plot", str(out / "recall")], "recall: no extension names no format")
    _fails(capsys, workspace, [*snapshot, *update, "--plot", str(out / "no" / "recall.png")],
           f"--plot {out / 'no' / 'recall.png'}: the directory {out / 'no'} does not exist")
    _fails(capsys, workspace, [*snapshot, *update, "--save-snapshot", str(out / "no" / "s.json")],
           f"--save-snapshot {out / 'no' / 's.json'}: the directory {out / 'no'} does not exist")
    _fails(capsys, workspace, [*snapshot, *update, "--save-snapshot", str(out)], f"--save-snapshot {out}: is a directory")
    _fails(capsys, workspace, [*snapshot, *update, "--plot", str(workspace["markdown"])], "--plot", "is also the file of --update")
    _fails(capsys, workspace, [*snapshot, "--save-snapshot", str(workspace["tables"])], "--save-snapshot", "is also the file of --tables")
    _fails(capsys, workspace, [*snapshot, "--update", str(out / "missing.md")], f"{out / 'missing.md'}: file not found")
    # A block missing for a table, or for the runs in no table.
    workspace["markdown"].write_text("<!-- report:one -->\n<!-- /report:one -->\n<!-- report:two -->\n<!-- /report:two -->\n")
    _fails(capsys, workspace, [*snapshot, *update, "--plot", str(out / "recall.png")],
           f"{workspace['markdown']}: no <!-- report:other-runs --> ... <!-- /report:other-runs --> block for table 'other-runs'")
    workspace["markdown"].write_text("<!-- report:one -->\n<!-- /report:one -->\n")
    shutil.rmtree(workspace["runs"])  # before the runs are read
    _fails(capsys, workspace, [str(workspace["runs"]), *update], f"{workspace['markdown']}: no <!-- report:two -->")
    # The first table's runs are not there to plot.
    workspace["tables"].write_text(TABLE + 'rows = [{ run = "gone", labels = ["g"] }]\n')
    _fails(capsys, workspace, [*snapshot, "--plot", str(out / "recall.png")], "none of the runs of the first table")
    workspace["tables"].write_text("")
    _fails(capsys, workspace, [*snapshot, "--plot", str(out / "recall.png")], "has no table of runs; the plot draws the runs of its first")


def test_all_outputs_are_written_together(workspace, capsys, monkeypatch):
    out, update = workspace["out"], _update(workspace)
    argv = ["--snapshot", str(workspace["snapshot"]), "--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]
    assert report.main([*argv, *update, "--plot", str(out / "recall.pdf"), "--save-snapshot", str(out / "s.json")]) == 0
    assert (out / "recall.pdf").read_bytes().startswith(b"%PDF") and "old one" not in workspace["markdown"].read_text()
    assert json.loads((out / "s.json").read_text()) == json.loads(workspace["snapshot"].read_text())
    *plotted, written = capsys.readouterr().err.splitlines()
    assert [json.loads(line)["run"] for line in plotted] == ["a", "b"]
    assert written == f"written (3 runs): {out / 's.json'}, {workspace['markdown']}, {out / 'recall.pdf'}"
    assert sorted(path.name for path in out.iterdir()) == ["doc.md", "recall.pdf", "s.json"]  # no temporary files left
    # A write failing after the checks (the disk, say) names what was written before it.
    real = cli.atomic_write

    def failing(path, write):
        if str(path).endswith(".pdf"):
            raise InputError(f"{path}: cannot be written (No space left on device); any previous version is unchanged")
        real(path, write)

    monkeypatch.setattr(cli, "atomic_write", failing)
    assert report.main([*argv, *update, "--plot", str(out / "recall.pdf"), "--save-snapshot", str(out / "s.json")]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {out / 'recall.pdf'}: cannot be written (No space left on device); any previous version is unchanged; "
                   f"already written: {out / 's.json'}, {workspace['markdown']}\n")


@pytest.mark.parametrize("runs, summary", [(["a"], "The command of this run"), (["a", "b"], "The commands of these 2 runs")])
def test_folded_commands_say_how_many_runs(runs_dir, runs, summary):
    runs_root, _, papers = runs_dir
    table = {"id": "t", "labels": ["run"], "columns": ["rsum"], "commands": "details",
             "rows": [{"run": name, "labels": [name]} for name in runs]}
    block = report.render([table], report.read_toml(papers), report.read_runs(runs_root), "runs")["t"]
    assert block.startswith(f"<details><summary>{summary}</summary>\n\n```bash\n")


def test_a_table_of_commands_none_prints_no_command(runs_dir):
    runs_root, _, papers = runs_dir
    table = {"id": "t", "labels": ["run"], "columns": ["rsum"], "commands": "none", "rows": [{"run": "a", "labels": ["a"]}]}
    block = report.render([table], report.read_toml(papers), report.read_runs(runs_root), "runs")["t"]
    assert block.startswith("| run | rsum |\n|---|---|\n| a | ")
    assert "python" not in block


def test_update_writes_each_block_in_whichever_file_holds_it(workspace, capsys):
    out = workspace["out"]
    front, page = out / "front.md", out / "page.md"
    front.write_text("front\n<!-- report:one -->\nold one\n<!-- /report:one -->\n")
    page.write_text("page\n<!-- report:two -->\nold two\n<!-- /report:two -->\n<!-- report:other-runs -->\n<!-- /report:other-runs -->\n")
    argv = ["--snapshot", str(workspace["snapshot"]), "--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]
    assert report.main([*argv, "--update", str(front), str(page)]) == 0
    printed = report.markdown_blocks(capsys.readouterr().out)
    assert report.markdown_blocks(front.read_text()) == {"one": printed["one"]}
    assert report.markdown_blocks(page.read_text()) == {"two": printed["two"], "other-runs": printed["other-runs"]}
    assert front.read_text().startswith("front\n") and page.read_text().startswith("page\n")


def test_blocks_over_several_files_are_checked_before_anything_is_written(workspace, capsys):
    out, markdown = workspace["out"], workspace["markdown"]
    snapshot = ["--snapshot", str(workspace["snapshot"])]
    other = out / "other.md"
    # A table with a block in two files, or twice in one.
    other.write_text("<!-- report:two -->\n<!-- /report:two -->\n")
    _fails(capsys, workspace, [*snapshot, "--update", str(markdown), str(other)],
           f"{markdown}, {other}: 2 blocks <!-- report:two -->")
    other.write_text("<!-- report:one -->\n<!-- /report:one -->\n<!-- report:one -->\n<!-- /report:one -->\n")
    _fails(capsys, workspace, [*snapshot, "--update", str(other)], f"{other}: 2 blocks <!-- report:one -->")
    # A block of no table of tables.toml names the file and the id.
    other.write_text("<!-- report:three -->\nx\n<!-- /report:three -->\n")
    _fails(capsys, workspace, [*snapshot, "--update", str(markdown), str(other)],
           f"{other}: the block <!-- report:three --> is of no table of the tables file")
    # A table in none of the files names the id (and the files looked in).
    markdown.write_text("<!-- report:one -->\n<!-- /report:one -->\n")
    other.write_text("<!-- report:other-runs -->\n<!-- /report:other-runs -->\n")
    _fails(capsys, workspace, [*snapshot, "--update", str(markdown), str(other)],
           f"{markdown}, {other}: no <!-- report:two --> ... <!-- /report:two --> block for table 'two'")
    # A block that does not close; a file given twice.
    other.write_text("<!-- report:two -->\n<!-- report:other-runs -->\n<!-- /report:other-runs -->\n")
    _fails(capsys, workspace, [*snapshot, "--update", str(markdown), str(other)],
           f"{other}: <!-- report:two --> has no <!-- /report:two --> line after it")
    _fails(capsys, workspace, [*snapshot, "--update", str(markdown), str(markdown)], f"--update {markdown}: is given twice")


# --- The test suite's time ---------------------------------------------------------------------------

SUITE = {"command": "python -m pytest", "date": "2026-11-24T09:30:00+00:00", "exit_status": 0,
         "counts": {"deselected": 3, "passed": 894, "warnings": 2}, "wall_seconds": 664.82, "cpu_seconds": 1140.0,
         "cores": 2, "load_average": [0.71, 2.08], "python": "3.11.7", "tensorflow": "2.21.0"}


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
])
def test_the_test_suites_sentence(change, sentence):
    assert report.suite_sentence({**SUITE, **change}) == sentence


SUITE_TABLE = '\n[[table]]\nid = "suite"\ntest_suite = "suite.json"\n'


@pytest.fixture
def suite_workspace(workspace):
    """The workspace with a test-suite table, its JSON beside tables.toml
    and its block in the markdown file."""
    workspace["tables"].write_text(workspace["tables"].read_text() + SUITE_TABLE)
    workspace["suite"] = workspace["tables"].parent / "suite.json"
    workspace["suite"].write_text(json.dumps(SUITE))
    workspace["markdown"].write_text(workspace["markdown"].read_text() + "The suite:\n<!-- report:suite -->\n<!-- /report:suite -->\n")
    return workspace


def test_a_test_suite_table_is_its_sentence_in_its_block(suite_workspace, capsys):
    argv = ["--snapshot", str(suite_workspace["snapshot"]), "--tables", str(suite_workspace["tables"]),
            "--papers", str(suite_workspace["papers"])]
    assert report.main([*argv, *_update(suite_workspace)]) == 0
    assert report.markdown_blocks(suite_workspace["markdown"].read_text())["suite"] == report.suite_sentence(SUITE)
    assert "<!-- report:suite -->\n`python -m pytest`: 894 passed" in capsys.readouterr().out
    # Without its block the update is refused, as for any table.
    suite_workspace["markdown"].write_text(suite_workspace["markdown"].read_text().split("The suite:")[0])
    _fails(capsys, suite_workspace, [*argv[:2], *_update(suite_workspace)], "no <!-- report:suite -->")


def test_a_runs_directory_alone_prints_only_the_tables_that_show_its_runs(suite_workspace, capsys):
    tables, runs, markdown = suite_workspace["tables"], suite_workspace["runs"], suite_workspace["markdown"]
    text = tables.read_text()
    tables.write_text(text + _bench_record(tables.parent).read_text())  # and a table of recorded reports only
    markdown.write_text(markdown.read_text() + "<!-- report:speed -->\n<!-- /report:speed -->\n")
    argv = ["--tables", str(tables), "--papers", str(suite_workspace["papers"])]
    assert report.main([str(runs), *argv]) == 0
    assert list(report.markdown_blocks(capsys.readouterr().out)) == ["one", "two", "other-runs"]
    # The snapshot of the same runs, or an update, prints every block it makes.
    assert report.main(["--snapshot", str(suite_workspace["snapshot"]), *argv]) == 0
    assert list(report.markdown_blocks(capsys.readouterr().out)) == ["one", "two", "suite", "speed", "other-runs"]
    shutil.rmtree(runs / "a")
    shutil.rmtree(runs / "b")
    assert report.main([str(runs), *argv]) == 0
    assert list(report.markdown_blocks(capsys.readouterr().out)) == ["other-runs"]
    assert report.main([str(runs), *argv, "--update", str(markdown)]) == 0
    assert list(report.markdown_blocks(capsys.readouterr().out)) == ["suite", "speed", "other-runs"]


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
    err = _fails(capsys, suite_workspace, ["--snapshot", str(suite_workspace["snapshot"]), *_update(suite_workspace)], problem)
    assert err.startswith(f"error: {suite_workspace['suite']}: ")


def test_a_missing_test_suite_record_or_a_malformed_test_suite_table_is_an_error(suite_workspace, capsys):
    argv = ["--snapshot", str(suite_workspace["snapshot"]), *_update(suite_workspace)]
    suite_workspace["suite"].unlink()
    _fails(capsys, suite_workspace, argv, f"{suite_workspace['suite']}: ")
    tables = suite_workspace["tables"]
    tables.write_text(TABLE + 'rows = []\n' + SUITE_TABLE + 'labels = ["m"]\n')
    _fails(capsys, suite_workspace, argv, f"{tables}: table 'suite': unknown key 'labels'; a test-suite table has only id and test_suite")
    tables.write_text(TABLE + 'rows = []\n' + SUITE_TABLE.replace('"suite.json"', "3"))
    _fails(capsys, suite_workspace, argv, f"{tables}: table 'suite': the key 'test_suite' must be the path of a JSON file")


@pytest.mark.parametrize("history, cell", [
    ([10.0, 12.0, 11.0], "2 of 3"),
    ([10.0, 12.0, 13.5], "3 of 3 (still rising)"),  # the last validation was the best: undertrained
    ([7.0], "1 of 1"),
    ([], ""),  # a run that recorded no validation history
])
def test_best_dev_at_says_which_validation_was_the_best(history, cell):
    record = {**_record({}), "dev_history": history}
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
    record = {**_record({}), "dev_history": history, "dev": _metrics(1.0, dev_rsum), "selection_metric": "i2t_map"}
    assert report_tables._run_cell("best_dev_at", record, {}, "run 'a'", name_metric) == cell


@pytest.mark.parametrize("train, recorded, metric", [
    ({"selection_metric": "i2t_map"}, {}, "i2t_map"),  # results.json before it named the metric: the config's
    ({}, {}, "rsum"),  # nor the config: train.selection_metric's default
    ({"selection_metric": "i2t_map"}, {"selection_metric": "t2i_r1"}, "t2i_r1"),
])
def test_a_runs_selection_metric_is_its_results_else_its_configs(tmp_path, train, recorded, metric):
    _write_run(tmp_path / "r", "w2vv", 10.0, None)
    for name, values in (("config.json", {"train": train}), ("results.json", recorded)):
        path = tmp_path / "r" / name
        path.write_text(json.dumps({**json.loads(path.read_text()), **values}))
    assert report.read_runs(tmp_path)["r"]["selection_metric"] == metric


@pytest.mark.parametrize("metrics, header, cells", [
    (["rsum", None], "best dev rsum at", ["2 of 2 (still rising)", "2 of 2 (still rising)"]),  # None: rsum, the default
    (["i2t_map", "i2t_map"], "best dev i2t mAP at", ["1 of 2", "1 of 2"]),
    (["rsum", "i2t_map"], "best dev at", ["2 of 2 (still rising)", "1 of 2 by i2t mAP"]),
])
def test_the_best_dev_header_names_the_selection_metric_its_runs_share(metrics, header, cells):
    runs = {name: {**_record({}), "dev_history": [10.0, 12.0], "selection_metric": metric}
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
    runs = {name: {**_record({}), "wall_seconds": wall, "cpu_seconds": cpu, "epochs": epochs}
            for name, wall, cpu, epochs in (("r0", 6000.0, 3600.0, 30), ("r1", 4800.0, 2400.0, 24))}
    block = report.render(tables, {}, runs, "runs", str(tmp_path / "tables.toml"))["cost"]
    assert "| gru | 0.6 h | 90.0 min / 50.0 min (24–30 epochs; mean of 2 runs) |" in block
    assert "AMD EPYC, kernels avx2" in block  # the CPU, and the instruction set its reports ran on
    none_yet = report.render(tables, {}, {}, "runs", str(tmp_path / "tables.toml"))["cost"]
    assert "| gru | 0.6 h |  |" in none_yet


def test_measured_runs_belong_to_a_record_row():
    table = {"id": "t", "labels": ["x"], "columns": ["rsum"], "rows": [{"run": "a", "measured": ["b"], "labels": ["x"]}]}
    with pytest.raises(InputError, match="row 1: 'measured' names the runs a record's estimate is measured by"):
        report.check_tables({"table": [table]}, {}, "tables.toml")


# --- Comparisons over seeds -----------------------------------------------------------------------


def _seed_runs(rsums):
    return {name: {**_record({}), "test": {"rsum": rsum}, "command": f"python train.py --model m --model-dir x/{name}"}
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


@pytest.mark.parametrize("comparison, problem", [
    ({"claim": "A > B", "a": ["a0", "a1"], "b": ["b0", "b1", "b2"]}, "the key 'a' must be a list of at least 3 runs' names"),
    ({"claim": "", "a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"]}, "the key 'claim' must be the claim's words"),
    ({"claim": "A > B", "a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"], "metric": "r1"}, "the key 'metric' must be one of"),
    ({"claim": "A > B", "a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"], "paper": ["p/x"]}, "the key 'paper' must be two rows"),
    ({"claim": "A > B", "a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"], "seeds": 3}, "unknown key 'seeds'"),
])
def test_a_malformed_comparison_names_the_table_and_the_key(comparison, problem):
    with pytest.raises(InputError) as error:
        report.check_tables({"table": [{"id": "claims", "compare": [comparison]}]}, {"p": {"x": {}}}, "tables.toml")
    assert str(error.value).startswith(f"tables.toml: table 'claims': comparison 1: {problem}")


def test_an_indicative_comparison_of_one_seed_gives_the_difference_and_no_verdict():
    # A is 12 ahead of B, far beyond any margin: with one seed a side, still no verdict.
    table = {"id": "claims", "compare": [{"claim": "A > B", "a": ["a0"], "b": ["b0"], "indicative": True}]}
    report.check_tables({"table": [table]}, {}, "tables.toml")
    row = report.render_comparisons(table, {}, _seed_runs({"a0": 212.0, "b0": 200.0}), "runs").splitlines()[-1]
    assert row.split(" | ")[2:7] == ["212.0", "200.0", "+12.0", "—", "one seed: indicative: no verdict"]
    assert "ahead" not in row and "tie" not in row


def test_a_claim_of_one_seed_must_say_it_is_indicative():
    claim = {"claim": "A > B", "a": ["a0"], "b": ["b0"]}
    with pytest.raises(InputError, match="comparison 1: the key 'a' must be a list of at least 3 .* `indicative = true`"):
        report.check_tables({"table": [{"id": "claims", "compare": [claim]}]}, {}, "tables.toml")
    with pytest.raises(InputError, match="comparison 1: the key 'indicative' must be true or false"):
        report.check_tables({"table": [{"id": "claims", "compare": [{**claim, "indicative": "yes"}]}]}, {}, "tables.toml")


def test_a_comparison_whose_runs_are_missing_is_left_out():
    table = {"id": "claims", "compare": [{"claim": "A > B", "a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"]}]}
    assert report.render_comparisons(table, {}, _seed_runs({"a0": 1.0, "a1": 2.0, "a2": 3.0}), "runs") is None


# --- Recorded reports -----------------------------------------------------------------------------


def _bench_record(tmp_path):
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


def test_record_rows_read_the_selected_report_of_a_recorded_file(tmp_path):
    source = _bench_record(tmp_path)
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


@pytest.mark.parametrize("change, problem", [
    (lambda record: record.pop("command"), "lacks the key 'command'"),
    (lambda record: record.update(reports={}), "the key 'reports' must be a list of the reports"),
    (lambda record: record["reports"][1].update(model="gru"), "2 reports match where the tables need the report with {\"model\": \"gru\"}"),
    (lambda record: record["reports"].pop(), "0 reports match where the tables need the report with {\"model\": \"rcn\"}"),
])
def test_a_damaged_record_is_an_error_naming_its_file(tmp_path, change, problem):
    source = _bench_record(tmp_path)
    path = tmp_path / "bench" / "quick.json"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))
    tables = report.check_tables(report.read_toml(source), {}, str(source))
    with pytest.raises(InputError) as error:
        report.read_records(tables, str(source))
    assert str(error.value).startswith(f"{path}: {problem}")


@pytest.mark.parametrize("row, problem", [
    ('{ record = "bench/quick.txt", labels = ["a"] }', "the key 'record' must be the path of a recorded JSON file"),
    ('{ record = "a.json", select = [1], labels = ["a"] }', "the key 'select' must be a table of report keys"),
    ('{ run = "a", select = { model = "gru" }, labels = ["a"] }', "'select' chooses among a record's reports"),
    ('{ run = "a", record = "a.json", labels = ["a"] }', "has both 'run' and 'record'"),
    ('{ record = "a.json", paper = "p/x", labels = ["a"] }', "a record row has no paper"),
])
def test_a_malformed_record_row_names_the_table_and_the_row(row, problem):
    data = tomllib.loads(f'[[table]]\nid = "t"\nlabels = ["m"]\ncolumns = ["rsum"]\nrows = [{row}]\n')
    with pytest.raises(InputError) as error:
        report.check_tables(data, {"p": {"x": {}}}, "tables.toml")
    assert str(error.value).startswith(f"tables.toml: table 't': row 1: {problem}")


def test_value_columns_may_index_a_list_but_fit_columns_may_not():
    assert report.TemplateColumn.parse({"value": "{ci[0]:.1f}"}, "c").keys == ("ci",)
    with pytest.raises(InputError, match=r"the field \{ci\.real\} is not"):
        report.TemplateColumn.parse({"value": "{ci.real}"}, "c")


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

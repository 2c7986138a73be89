"""`python -m tools.report` end to end (tools.report.cli): the tables of
README.md and docs/ are its output from the checked-in runs, the
documented command after the quick start, --update with --save-snapshot
and --snapshot, runs joining the recorded ones (replacing them only with
--replace), every output checked before any is written and all of them
written together, and what a runs directory alone prints."""

import json
import re
import shlex
import shutil
from pathlib import Path

from common.errors import InputError
from tests.tools.report.helpers import (ROOT, SNAPSHOT, TABLE, bench_record, config_json, fails, update_argv,
                                        write_run)
from tools import report
from tools.report import cli

README = ROOT / "README.md"
# The markdown files whose tables the report writes: README.md and every page of docs/.
MARKDOWN = [README, *sorted((ROOT / "docs").glob("*.md"))]


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
    assert set(found) == set(blocks) == {*(table["id"] for table in tables), "other-runs"}
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
    (runs / name / "config.json").write_text(config_json("gru"))
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
    write_run(runs / "a", "gru", 11.0, "python train.py --model gru --preset quick")  # a new run a
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
    write_run(runs / "mine", "gru", 14.0, "python train.py --model gru --preset quick --model-dir runs/mine")
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


def test_every_output_is_checked_before_any_is_written(workspace, capsys):
    out, snapshot = workspace["out"], ["--snapshot", str(workspace["snapshot"])]
    update = update_argv(workspace)
    fails(capsys, workspace, [*snapshot, *update, "--plot", str(out / "recall.bmp")],
          "--plot ", "recall.bmp: the extension '.bmp' names no format matplotlib writes; end the name in one of ", ".pdf")
    fails(capsys, workspace, [*snapshot, *update, "--plot", str(out / "recall")], "recall: no extension names no format")
    fails(capsys, workspace, [*snapshot, *update, "--plot", str(out / "no" / "recall.png")],
          f"--plot {out / 'no' / 'recall.png'}: the directory {out / 'no'} does not exist")
    fails(capsys, workspace, [*snapshot, *update, "--save-snapshot", str(out / "no" / "s.json")],
          f"--save-snapshot {out / 'no' / 's.json'}: the directory {out / 'no'} does not exist")
    fails(capsys, workspace, [*snapshot, *update, "--save-snapshot", str(out)], f"--save-snapshot {out}: is a directory")
    fails(capsys, workspace, [*snapshot, *update, "--plot", str(workspace["markdown"])], "--plot", "is also the file of --update")
    fails(capsys, workspace, [*snapshot, "--save-snapshot", str(workspace["tables"])], "--save-snapshot", "is also the file of --tables")
    fails(capsys, workspace, [*snapshot, "--update", str(out / "missing.md")], f"{out / 'missing.md'}: file not found")
    # A block missing for a table, or for the runs in no table.
    workspace["markdown"].write_text("<!-- report:one -->\n<!-- /report:one -->\n<!-- report:two -->\n<!-- /report:two -->\n")
    fails(capsys, workspace, [*snapshot, *update, "--plot", str(out / "recall.png")],
          f"{workspace['markdown']}: no <!-- report:other-runs --> ... <!-- /report:other-runs --> block for table 'other-runs'")
    workspace["markdown"].write_text("<!-- report:one -->\n<!-- /report:one -->\n")
    shutil.rmtree(workspace["runs"])  # before the runs are read
    fails(capsys, workspace, [str(workspace["runs"]), *update], f"{workspace['markdown']}: no <!-- report:two -->")
    # The first table's runs are not there to plot.
    workspace["tables"].write_text(TABLE + 'rows = [{ run = "gone", labels = ["g"] }]\n')
    fails(capsys, workspace, [*snapshot, "--plot", str(out / "recall.png")], "none of the runs of the first table")
    workspace["tables"].write_text("")
    fails(capsys, workspace, [*snapshot, "--plot", str(out / "recall.png")], "has no table of runs; the plot draws the runs of its first")


def test_all_outputs_are_written_together(workspace, capsys, monkeypatch):
    out, update = workspace["out"], update_argv(workspace)
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


def test_a_runs_directory_alone_prints_only_the_tables_that_show_its_runs(suite_workspace, capsys):
    tables, runs, markdown = suite_workspace["tables"], suite_workspace["runs"], suite_workspace["markdown"]
    text = tables.read_text()
    tables.write_text(text + bench_record(tables.parent).read_text())  # and a table of recorded reports only
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

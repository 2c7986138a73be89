"""`python -m tools.report`: the README's results tables from the runs."""

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from tools import report

ROOT = Path(__file__).resolve().parent.parent.parent
README = ROOT / "README.md"
SNAPSHOT = ROOT / "results" / "runs.json"


def test_the_readmes_tables_are_the_reports_output_from_the_checked_in_runs(tmp_path, capsys):
    root, runs = report.read_snapshot(SNAPSHOT)
    tables = report.read_toml(report.RESULTS_DIR / "tables.toml")["table"]
    blocks = report.render(tables, report.read_toml(report.RESULTS_DIR / "papers.toml"), runs, root)
    readme_blocks = report.markdown_blocks(README.read_text())
    assert set(readme_blocks) == set(blocks) == {table["id"] for table in tables}
    for table_id, block in blocks.items():
        assert readme_blocks[table_id] == block, f"README.md's {table_id} table is not the report's; run {report.__doc__.split(chr(10))[3].strip()}"
    # The command itself leaves the README unchanged.
    copy = tmp_path / "README.md"
    shutil.copy(README, copy)
    assert report.main(["--snapshot", str(SNAPSHOT), "--update", str(copy)]) == 0
    assert copy.read_text() == README.read_text()
    capsys.readouterr()


def test_every_paper_row_and_every_table_row_resolves():
    papers = report.read_toml(report.RESULTS_DIR / "papers.toml")
    root, runs = report.read_snapshot(SNAPSHOT)
    for table in report.read_toml(report.RESULTS_DIR / "tables.toml")["table"]:
        for row in table["rows"]:
            assert len(row["labels"]) == len(table["labels"]), (table["id"], row)
            assert report._row_runs(row) <= runs.keys(), (table["id"], row)
            if "paper" in row:
                assert report._paper_row(papers, row["paper"])
    # The papers' rsums, computed from their recalls, are the ones they print.
    assert report._with_sums(papers["francis2018"]["rcn005"])["rsum"] == pytest.approx(355.5)
    assert report._with_sums(papers["ma2015"]["vgg_ens"])["rsum"] == pytest.approx(275.2)
    assert report._with_sums(papers["dong2018"]["multiscale"]) == {**papers["dong2018"]["multiscale"], "i2t_rsum": pytest.approx(180.9)}


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
| mean |  | 11.0 | 4 | 88.0 |  | 100.0 |  |
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
    assert f"error: {tables}: a table or row lacks the key 'labels'" in capsys.readouterr().err
    tables.write_text('[[table]]\nid = "bad"\nlabels = ["m"]\ncolumns = ["rsum"]\nrows = [{ mean = ["a"], labels = ["a"] }]\n')
    assert report.main(["--snapshot", str(snapshot), *common]) == 2
    assert "mean row ['a']: needs at least two runs" in capsys.readouterr().err


def _record(fit):
    """A run's record as read_runs returns it, with this fit."""
    return {"model": "m", "preset": "quick", "command": None, "wall_seconds": None, "peak_memory_bytes": None,
            "fit": fit, "dev": _metrics(1.0, 10.0), "test": _metrics(2.0, 20.0), "dev_history": []}


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


def test_the_report_knows_no_models_fit_keys():
    source = Path(report.__file__).read_text()
    assert not re.search(r"cca|hglmm|laplacian|members|η", source, re.IGNORECASE)


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
    with pytest.raises(report.InputError) as error:
        report.render_table(table, {}, {"a": _record({"eta": 0.5})}, "runs")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"tables.toml: table 't': column {report._toml(column)}: {problem}")


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
    assert report._command(record, "runs", "tiny") == shlex.join(words)

    table = {"rows": [{"run": "tiny", "labels": ["`{model}`", "{preset}"]}]}
    series = report.plot_recalls(table, {"tiny": record}, tmp_path / "plot" / "recall.png")
    assert (tmp_path / "plot" / "recall.png").stat().st_size > 10_000
    assert series == [{"run": "tiny", "label": "gru quick", "i2t": [results["test"][f"i2t_r{k}"] for k in (1, 5, 10)],
                       "t2i": [results["test"][f"t2i_r{k}"] for k in (1, 5, 10)]}]

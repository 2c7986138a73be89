"""Fixtures of the report's tests: `runs_dir`, three train.py runs (and an
unfinished one) with a tables.toml of two tables and a papers.toml;
`workspace`, the same with a snapshot of them and an output directory
holding a markdown file of the tables' blocks; `suite_workspace`, the
workspace with a test-suite table too. (`trained`, a trained run, is
tests/conftest.py's.)"""

import json

import pytest

from tests.tools.report.helpers import SUITE, SUITE_TABLE, write_run
from tools import report


@pytest.fixture
def runs_dir(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs / "a", "gru", 10.0, "python train.py --model gru --preset quick --model-dir /somewhere/else")
    write_run(runs / "b", "gru", 12.0, "python train.py --model gru --preset quick --set train.seed=1 --model-dir=x", 30.0)
    write_run(runs / "nested" / "c", "fv-gmm", 20.0, "python train.py --model fv-gmm --preset quick")
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


@pytest.fixture
def suite_workspace(workspace):
    """The workspace with a test-suite table, its JSON beside tables.toml
    and its block in the markdown file."""
    workspace["tables"].write_text(workspace["tables"].read_text() + SUITE_TABLE)
    workspace["suite"] = workspace["tables"].parent / "suite.json"
    workspace["suite"].write_text(json.dumps(SUITE))
    workspace["markdown"].write_text(workspace["markdown"].read_text() + "The suite:\n<!-- report:suite -->\n<!-- /report:suite -->\n")
    return workspace

"""What the tables and the comparisons both print (tools.report.cells): the
papers' rows, with their R-sums computed from the recalls, and the runs'
commands, folded away under a summary that counts them."""

import pytest

from tests.tools.report.helpers import SNAPSHOT
from tools import report
from tools.report import cells
from tools.report import tables as report_tables


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


@pytest.mark.parametrize("runs, summary", [(["a"], "The command of this run"), (["a", "b"], "The commands of these 2 runs")])
def test_folded_commands_say_how_many_runs(runs_dir, runs, summary):
    runs_root, _, papers = runs_dir
    table = {"id": "t", "labels": ["run"], "columns": ["rsum"], "commands": "details",
             "rows": [{"run": name, "labels": [name]} for name in runs]}
    block = report.render([table], report.read_toml(papers), report.read_runs(runs_root), "runs")["t"]
    assert block.startswith(f"<details><summary>{summary}</summary>\n\n```bash\n")

"""The results tables of README.md and docs/ and the recall@K plot, made
from training runs: `python -m tools.report` (`cli`, whose docstring is
the user's documentation). One module a job: `inputs` reads the runs, a
snapshot, the TOML files, the recorded reports and the test suite's
records; `checks` checks tables.toml and papers.toml; `columns` declares
the columns (METRICS, RUN_COLUMNS, TemplateColumn); `tables` renders the
blocks, with `cells` (what tables and comparisons both print) and
`comparisons` (the claims and their rule); `markdown` finds and replaces
the blocks in markdown files; `plot` draws the recall@K plot.

Imported here: what tools.reproduce and the tests use."""

from tools.report.checks import check_papers, check_tables
from tools.report.cli import main
from tools.report.columns import TemplateColumn
from tools.report.comparisons import RANK_METRICS, comparison, render_comparisons
from tools.report.inputs import RESULTS_DIR, read_records, read_runs, read_runs_and_snapshots, read_snapshot, read_toml
from tools.report.markdown import markdown_blocks
from tools.report.plot import plot_recalls
from tools.report.tables import render, render_table, suite_sentence

__all__ = ["RANK_METRICS", "RESULTS_DIR", "TemplateColumn", "check_papers", "check_tables", "comparison", "main",
           "markdown_blocks", "plot_recalls", "read_records", "read_runs", "read_runs_and_snapshots", "read_snapshot",
           "read_toml", "render", "render_comparisons", "render_table", "suite_sentence"]

"""Comparison tables: claims "A is better than B" over seeds, each decided
by a stated rule (below), as markdown."""

import statistics

from common.errors import InputError
from common.records import is_number
from tools.report.cells import commands_block, format_value, paper_row, run_number, train_command, with_sums
from tools.report.columns import METRICS
from tools.report.inputs import select_report

# A comparison table ({ id, compare = [...] }) tests claims "A is better
# than B" over seeds: each side's mean ± standard deviation of a test metric
# over its samples (at least MIN_SEEDS: runs, or recorded reports such as
# `evaluate.py --json` of each seed's model), and the decision rule: A is
# ahead when it is better than B's mean by more than the larger of the two
# standard deviations, B is ahead by the same rule the other way, else a
# tie. Better is higher, and lower for a rank (RANK_METRICS).
#
# A claim marked `indicative = true` may rest on fewer seeds (one run a
# side, where a run costs hours): its means and difference are shown, the
# rule is not applied, and it says "indicative: no verdict".

INDICATIVE = "indicative: no verdict"

VERDICTS = {1: "A ahead: reproduced", 0: "tie: not resolved", -1: "B ahead: reversed"}
RANK_METRICS = {metric for metric, (_, spec) in METRICS.items() if spec == "rank" or metric.endswith("meanr")}


def comparison(a_values, b_values, lower_is_better=False):
    """(A's mean, A's s.d., B's mean, B's s.d., the rule's margin, the
    verdict: 1 when A is ahead, -1 when B is, 0 for a tie)."""
    a_mean, b_mean = statistics.mean(a_values), statistics.mean(b_values)
    a_sd, b_sd = statistics.stdev(a_values), statistics.stdev(b_values)
    margin = max(a_sd, b_sd)
    better = (b_mean - a_mean) if lower_is_better else (a_mean - b_mean)
    verdict = 1 if better > margin else -1 if better < -margin else 0
    return a_mean, a_sd, b_mean, b_sd, margin, verdict


def render_comparisons(table, papers, runs, root, records=None):
    """A comparison table as markdown (the commands of its runs and
    records, folded away by default, then one row per claim); None when
    none of its comparisons has all its samples."""
    records = records or {}

    def present(item):
        return item in runs if isinstance(item, str) else item["record"] in records

    claims = [c for c in table["compare"] if all(map(present, (*c["a"], *c["b"])))]
    if not claims:
        return None
    headers = ["claim (A better than B)", "metric", "A: mean ± s.d.", "B: mean ± s.d.", "A − B",
               "rule: better by >", "here", "paper: A − B"]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for claim in claims:
        metric = claim.get("metric", "rsum")
        a_values, b_values = ([_sample(item, metric, runs, records) for item in claim[side]] for side in ("a", "b"))
        if None in a_values or None in b_values:
            raise InputError(f"table {table['id']!r}: claim {claim['claim']!r}: a sample lacks the test metric {metric!r}")
        if claim.get("indicative", False):
            a_mean, b_mean = statistics.mean(a_values), statistics.mean(b_values)
            rule, here = "—", f"{_seeds(a_values, b_values)}: {INDICATIVE}"
            a_cell, b_cell = (_mean_cell(metric, values) for values in (a_values, b_values))
        else:
            a_mean, a_sd, b_mean, b_sd, margin, verdict = comparison(a_values, b_values, metric in RANK_METRICS)
            rule, here = format_value(metric, margin), VERDICTS[verdict]
            a_cell, b_cell = (f"{format_value(metric, mean)} ± {format_value(metric, sd)}"
                              for mean, sd in ((a_mean, a_sd), (b_mean, b_sd)))
        paper = ""
        if "paper" in claim:
            a_paper, b_paper = (with_sums(paper_row(papers, key)).get(metric) for key in claim["paper"])
            paper = "" if None in (a_paper, b_paper) else f"{a_paper - b_paper:+.1f}"
        cells = [claim["claim"], METRICS[metric][0], a_cell, b_cell, f"{a_mean - b_mean:+.1f}", rule, here, paper]
        lines.append("| " + " | ".join(cells) + " |")
    items = [item for claim in claims for item in (*claim["a"], *claim["b"])]
    commands = [train_command(runs[item], root, item) if isinstance(item, str) else records[item["record"]]["command"]
                for item in items]
    commands = list(dict.fromkeys(commands))
    return commands_block(commands, table.get("commands", "details") == "details") + "\n\n" + "\n".join(lines)


def _mean_cell(metric, values):
    """A side's cell without the rule: its one value, or its mean ± s.d."""
    if len(values) == 1:
        return format_value(metric, values[0])
    return f"{format_value(metric, statistics.mean(values))} ± {format_value(metric, statistics.stdev(values))}"


def _seeds(a_values, b_values):
    """"one seed", or the seeds of each side ("3 seeds", "1/3 seeds")."""
    counts = sorted({len(a_values), len(b_values)})
    return "one seed" if counts == [1] else "/".join(map(str, counts)) + " seeds"


def _sample(item, metric, runs, records):
    """A comparison sample's value of a test metric (None without it)."""
    if isinstance(item, str):
        return run_number(metric, runs[item])
    value = with_sums(select_report(records[item["record"]], item)).get(metric)
    return value if is_number(value) else None

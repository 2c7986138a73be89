"""The recall@K plot (--plot): R@1, R@5 and R@10 of a table's runs in
both directions, drawn in memory."""

from common.errors import InputError
from common.records import is_number
from tools.report.cells import row_labels
from tools.report.columns import RECALL_KS


def plot_recalls(table, runs, fmt="png", origins=None):
    """R@K of image annotation and image search for the table's runs, one
    line each, drawn in memory: (the plotted series [{"run", "label",
    "i2t", "t2i"}], the figure's bytes in the format `fmt`). A run without
    one of the recalls is an InputError naming where it was read
    (`origins`: {run name: its results.json, or the snapshot and the run})."""
    rows = [row for row in table["rows"] if row.get("run") in runs]
    series = []
    for row in rows:
        record = runs[row["run"]]
        curves = {}
        for direction in ("i2t", "t2i"):
            for k in RECALL_KS:
                if not is_number(record["test"].get(f"{direction}_r{k}")):
                    where = (origins or {}).get(row["run"], f"run {row['run']!r}")
                    raise InputError(f"{where}: lacks the key 'test.{direction}_r{k}', which the recall@K plot (--plot) draws")
            curves[direction] = [record["test"][f"{direction}_r{k}"] for k in RECALL_KS]
        label = " ".join(row_labels(row, record)).replace("`", "")
        series.append({"run": row["run"], "label": label, **curves})

    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(13, 6), sharey=True)
    try:
        for i, line in enumerate(series):
            # 20 colours, then the same dashed.
            style = {"color": plt.cm.tab20(i % 20), "linestyle": "-" if i < 20 else "--", "marker": "o"}
            for axis, direction in zip(axes, ("i2t", "t2i")):
                axis.plot(RECALL_KS, line[direction], label=line["label"], **style)
        for axis, title in zip(axes, ("image annotation (i2t)", "image search (t2i)")):
            axis.set_title(title)
            axis.set_xscale("log")
            axis.set_xticks(RECALL_KS, [str(k) for k in RECALL_KS])
            axis.set_xlabel("K")
            axis.grid(True, alpha=0.3)
        axes[0].set_ylabel("R@K (%), Flickr8k 1K test")
        axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
        figure.tight_layout()
        image = io.BytesIO()
        try:
            figure.savefig(image, format=fmt, dpi=100)
        except (RuntimeError, OSError, ValueError) as error:  # e.g. .pgf without a LaTeX to run
            raise InputError(f"--plot: matplotlib cannot write the figure as .{fmt} ({error_line(error)})") from None
    finally:
        plt.close(figure)
    return series, image.getvalue()


def error_line(error):
    """An exception's message, one line."""
    return " ".join(str(error).split()) or type(error).__name__

"""Plots TensorBoard scalars of several training runs side by side, as a
figure in the format `--out`'s extension names (.png, .pdf, .svg, ...: any
format matplotlib writes).

    python -m tools.plot_training runs/gru runs/rcn --out rcn.png
    python -m tools.plot_training runs/a runs/b --panel loss --panel grad_norm_max \\
        --panel diagnostics/rcn/pass_1/eq9_min_relative_denominator --panel dev:rsum --out a_b.png

Each `--panel` is one TensorBoard tag, read from every run's `logs/train/`
event files, or from `logs/dev/` with the prefix "dev:" (default: the
training loss, the largest pre-clip gradient norm between log steps and dev
rsum). A panel whose values span more than two orders of magnitude is drawn
on a logarithmic scale (when they change sign, symmetric-logarithmic:
linear within [-1, 1]), so single-step spikes and sign changes stay
visible. Runs without a tag are
left out of its panel. An extension matplotlib cannot write, or an output
directory that is missing or not writable, is refused before any event file
is read. The plotted numbers are printed as JSON lines
(run, panel, steps, values) so that a figure can be checked against them.
"""

import argparse
import json
import logging
import math
import sys
from pathlib import Path

from common.errors import ArgumentParser, InputError, run_command
from common.files import check_output_file
from common.wording import counted

DEFAULT_PANELS = ("loss", "grad_norm_max", "dev:rsum")


def parse_args(argv):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="model directories written by train.py")
    parser.add_argument("--panel", action="append", help="[dev:]TAG (repeatable; default: %(default)s)")
    parser.add_argument("--label", action="append", help="a legend label per run (default: the directory name)")
    parser.add_argument("--title", default=None)
    parser.add_argument("--out", required=True,
                        help="figure to write, in the format of its extension (.png, .pdf, .svg, ...)")
    return parser.parse_args(argv)


def figure_format(out, argument="--out"):
    """The matplotlib format `out`'s extension names ("pdf" for x.pdf), after
    checking that the file can be written: `InputError`, before any work,
    for an extension matplotlib cannot write or a directory that is missing
    or not writable."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    out = Path(out)
    formats = Figure().canvas.get_supported_filetypes()
    fmt = out.suffix[1:].lower()
    if fmt not in formats:
        found = f"the extension {out.suffix!r}" if out.suffix else "no extension"
        raise InputError(f"{argument} {out}: {found} names no format matplotlib writes; "
                         f"end the name in one of {', '.join('.' + f for f in sorted(formats))}")
    check_output_file(out, argument)
    return fmt


def read_scalars(model_dir, run):
    """{tag: ([steps], [values])} of `model_dir/logs/run`."""
    import tensorflow as tf
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logs = Path(model_dir) / "logs" / run
    if not logs.is_dir():
        raise InputError(f"{logs}: no TensorBoard logs (is {model_dir} a model directory written by train.py?)")
    accumulator = EventAccumulator(str(logs), size_guidance={"tensors": 0})
    # TensorBoard logs "No path found after ..." at the end of every event
    # file, at INFO: the commands' log level.
    tensorboard_logger = logging.getLogger("tensorboard")
    level = tensorboard_logger.level
    tensorboard_logger.setLevel(logging.WARNING)
    try:
        accumulator.Reload()
    finally:
        tensorboard_logger.setLevel(level)
    scalars = {}
    for tag in accumulator.Tags()["tensors"]:
        events = [(e.step, tf.make_ndarray(e.tensor_proto)) for e in accumulator.Tensors(tag)]
        events = [(step, float(value)) for step, value in events if value.ndim == 0 and value.dtype.kind == "f"]
        if events:
            scalars[tag] = ([step for step, _ in events], [value for _, value in events])
    return scalars


def plot(runs, labels, panels, out, title=None):
    """Draws one panel per tag into `out`, in the format of its extension;
    returns the plotted series [{"run", "panel", "steps", "values"}]."""
    fmt = figure_format(out)  # before reading any event file
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    logs = {(run, kind): read_scalars(run, kind) for run in runs for kind in ("train", "dev")}
    # One colour per run in every panel, also where some runs lack a tag.
    colours = {run: f"C{index % 10}" for index, run in enumerate(runs)}
    figure, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    series = []
    for axis, panel in zip(axes[0], panels):
        kind, tag = ("dev", panel[4:]) if panel.startswith("dev:") else ("train", panel)
        values_seen = []
        for run, label in zip(runs, labels):
            if tag not in logs[(run, kind)]:
                continue
            steps, values = logs[(run, kind)][tag]
            axis.plot(steps, values, label=label, color=colours[run], marker="o" if kind == "dev" else None,
                      markersize=3, linewidth=1)
            values_seen += values
            series.append({"run": str(run), "panel": panel, "steps": steps, "values": values})
        if not values_seen:
            raise InputError(f"--panel {panel}: no run has the tag {tag!r} in logs/{kind}/")
        _choose_scale(axis, values_seen)
        axis.set_title(tag if kind == "train" else f"dev {tag}", fontsize=9)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    out = Path(out)
    partial = out.with_name(out.name + ".partial")
    figure.savefig(partial, format=fmt, dpi=110)
    partial.replace(out)
    plt.close(figure)
    return series


def _choose_scale(axis, values):
    finite = [abs(v) for v in values if math.isfinite(v) and v != 0]
    if not finite or max(finite) / min(finite) < 100:
        return
    if min(values) < 0:
        axis.set_yscale("symlog", linthresh=1.0)  # linear within [-1, 1], logarithmic beyond
    else:
        axis.set_yscale("log")


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    figure_format(args.out, "--out")
    labels = args.label or [Path(run).name for run in args.runs]
    if len(labels) != len(args.runs):
        raise InputError(f"--label given {counted(len(labels), 'time')} for {counted(len(args.runs), 'run')}")
    for series in plot(args.runs, labels, args.panel or list(DEFAULT_PANELS), args.out, args.title):
        print(json.dumps(series))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How long a mistake in a command's flags waits for its error line, as a
table and JSON.

    python -m tools.bench_cli_errors
    python -m tools.bench_cli_errors --repeats 5 --record results/bench/cli-errors.json

Runs each of `MISTAKES` (train.py's and evaluate.py's flags: a model, a
preset, `--set` keys, value types and ranges, a config's own checks, a
folder) as a process of its own, `--repeats` times, and times it from its
start to the `error:` line on its stderr. A mistake is refused before
TensorFlow loads (seconds on 2 cores), so each should take well under a
second on an idle machine; the load average at the start and the end
(`--record`) says how idle it was. The report: each mistake's command, its
median seconds and its error line. `evaluate.py`'s mistakes run on a
made-up run folder holding only a `gru` config.json.
"""

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import records
from common.errors import ArgumentParser, InputError, count, run_command
from data.image_features import ImageFeatures
from models import registry
from models.experiments import CONFIG_FILE, RunConfig

# The folder of train.py and evaluate.py.
REPOSITORY = Path(__file__).resolve().parent.parent
# (what is wrong, the command's arguments after `python`). They run in a
# temporary folder holding RUN, a made-up run: a `gru` config.json only.
RUN = "run"
MISTAKES = (
    ("unknown model", ["train.py", "--model", "gur"]),
    ("unknown preset", ["train.py", "--model", "gru", "--preset", "quik"]),
    ("unknown --set section", ["train.py", "--model", "gru", "--set", "trian.epochs=2"]),
    ("unknown --set key", ["train.py", "--model", "gru", "--set", "train.epoch=2"]),
    ("value of the wrong type", ["train.py", "--model", "gru", "--set", "train.epochs=two"]),
    ("value out of range", ["train.py", "--model", "gru", "--set", "train.epochs=0"]),
    ("model setting not a choice", ["train.py", "--model", "rcn", "--set", "model.routing=literl"]),
    ("model settings that contradict", ["train.py", "--model", "w2vv", "--set", "model.scales=bow,bow"]),
    ("m-CNN setting out of range", ["train.py", "--model", "mcnn-st", "--set", "model.dropout=1"]),
    ("ensemble member that is no run", ["train.py", "--model", "ensemble", "--set", "model.members=no/such/run,run"]),
    ("image features the model cannot read", ["train.py", "--model", "gru", "--image-features", "fne"]),
    ("missing --data folder", ["train.py", "--model", "gru", "--data", "no/such/folder"]),
    ("--model-dir holding a run", ["train.py", "--model", "gru", "--model-dir", RUN]),
    ("evaluate.py: unknown --set key", ["evaluate.py", "--model-dir", RUN, "--set", "model.similarty=dot"]),
    ("evaluate.py: model setting not a choice", ["evaluate.py", "--model-dir", RUN, "--set", "model.similarity=dott"]),
)


def parse_args(argv):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=count, default=3, help="runs of each mistake (the median is reported)")
    records.add_record_option(parser)
    args = parser.parse_args(argv)
    args.command = records.command_line("tools.bench_cli_errors", argv)
    return args


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    recording = records.Recording(args.record, args.command)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / RUN).mkdir()
        run = RunConfig(registry.get("gru").experiment("paper"), ImageFeatures("fc", 1280))
        (Path(folder) / RUN / CONFIG_FILE).write_text(run.to_json())
        reports = [time_mistake(mistake, argv, args.repeats, folder) for mistake, argv in MISTAKES]
    print(f"{'mistake':<40} {'seconds':>7}  error line")
    for report in reports:
        print(f"{report['mistake']:<40} {report['seconds']:>7.2f}  {report['error'][:100]}")
    recording.write(reports)
    return 0


def time_mistake(mistake, argv, repeats, folder):
    """The median seconds from starting `python ARGV` (its script the
    repository's) in `folder` to its `error:` line, over `repeats` runs,
    and the line; an `InputError` if the command ends without one."""
    script, *arguments = argv
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        process = subprocess.Popen([sys.executable, REPOSITORY / script, *arguments], cwd=folder,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        error = next((line.strip() for line in process.stderr if line.startswith("error:")), None)
        seconds.append(time.perf_counter() - start)
        process.stderr.close()
        process.wait()
        if error is None:
            raise InputError(f"python {shlex.join(argv)}: ended (status {process.returncode}) without an error line")
    return {"mistake": mistake, "command": shlex.join(["python", *argv]), "seconds": round(statistics.median(seconds), 2),
            "error": error}


if __name__ == "__main__":
    sys.exit(main())

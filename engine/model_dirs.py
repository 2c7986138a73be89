"""Where a run goes: the default model directory, and the checks that a
directory can take a new run or holds one to continue. Imports no
TensorFlow, so `train.py` makes them before it loads.

A model directory holds a training run when it holds `config.json`,
which a run writes once its inputs are checked and its model is built.
"""

from pathlib import Path

from common.errors import InputError
from common.files import check_output_folder
from models.experiments import CONFIG_FILE, load_run

# What a run's settings are, for telling whether a new run's equal a recorded one's.
_SETTINGS = ("model_name", "preset", "model", "train")


def default(model_name, preset):
    """The model directory of a run without `--model-dir`: it names the
    preset, so runs of one model with two presets never meet."""
    return Path("runs") / f"{model_name}-{preset}"


def free(path):
    """`path` if a new run can go there (it is new or an empty folder),
    else the first of `path`-2, `path`-3, ... that can."""
    path = Path(path)
    candidate, number = path, 1
    while candidate.exists() and not (candidate.is_dir() and not any(candidate.iterdir())):
        number += 1
        candidate = path.with_name(f"{path.name}-{number}")
    return candidate


def holds_run(path):
    """Whether the folder `path` holds a training run (reading its
    config.json, which may be unreadable, tells the rest)."""
    return (Path(path) / CONFIG_FILE).exists()


def check_run(path, argument):
    """Fails unless `path` holds a training run (for `argument`, e.g.
    "--resume")."""
    if not holds_run(path):
        raise InputError(f"{argument}: {path} holds no training run (no {CONFIG_FILE})")


def check_new(path, config):
    """Fails, before any work, unless `path` can take a new run of the
    `ExperimentConfig` `config`: a file or a folder of anything else is
    refused (nothing is written among a user's files), and so is an
    earlier run, with the command that continues it when its settings are
    `config`'s, and a free directory either way."""
    check_output_folder(path, "--model-dir", CONFIG_FILE, "a training run")
    if not holds_run(path):
        return
    try:
        recorded = load_run(path).experiment
    except InputError:  # a config.json this zoo cannot read: another version's, or damaged
        recorded = None
    alternative = f"--model-dir {free(path)}"
    if recorded is not None and all(getattr(recorded, key) == getattr(config, key) for key in _SETTINGS):
        raise InputError(f"--model-dir {path} already holds a training run of these settings; continue it with "
                         f"`python train.py --model-dir {path} --resume`, or start another with {alternative}")
    described = f"{recorded.model_name}, preset {recorded.preset}" if recorded else "an unreadable config.json"
    if recorded is not None and all(getattr(recorded, key) == getattr(config, key) for key in ("model_name", "preset")):
        described += ", other --set values"
    raise InputError(f"--model-dir {path} already holds a training run of other settings ({described}), which "
                     f"--resume would continue; start this one with {alternative}")

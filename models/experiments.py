"""A trained run's experiment config back from its directory's
`config.json`, without TensorFlow, so a command checks its `--set`
values against the run before TensorFlow loads (`models.restore` rebuilds
the model)."""

from pathlib import Path

from common.config import ExperimentConfig, apply_overrides, experiment_from_json
from common.errors import InputError
from common.files import read_text
from models import registry

# The folder of a run directory that holds its best checkpoint (`engine.training`).
BEST_DIR = "best"


def load_experiment(model_dir, overrides=()):
    """Reads `<model_dir>/config.json` back into an `ExperimentConfig`,
    with `overrides`: `model.KEY=VALUE` changes that leave a trained
    model's weights valid (e.g. the similarity used for retrieval; any
    other section's is an `InputError`).

    A `model_name` that names no registered model is an `InputError`
    naming the file and its key (not `--model`, which the user may not
    have given)."""
    path = Path(model_dir) / "config.json"
    if not path.exists():
        raise InputError(f"{path}: no config.json; is this a model directory written by train.py?")

    def defaults(model_name, preset):
        spec = registry.get(model_name, f"{path}: model_name")
        return ExperimentConfig(model_name=model_name, preset=preset, model=spec.config_class(),
                                train=type(spec.train)(), data=type(spec.data)())

    if any(not item.startswith("model.") for item in overrides):
        raise InputError(f"--set {list(overrides)}: only model.KEY=VALUE settings apply to a trained model")
    return apply_overrides(experiment_from_json(read_text(path), defaults, path), overrides)

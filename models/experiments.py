"""A run's config.json (`RunConfig`: its experiment, the
`models.base_config.ExperimentConfig`, and the image features it trained
on), written by the trainer and read back through the same types,
without TensorFlow, so a command checks its `--set` values against a run
before TensorFlow loads (`models.restore` rebuilds the model).

config.json holds, beside its `version`, the experiment's fields
(`model_name`, `preset` and the sections `model`, `train`, `data`,
`runtime`) and `image_features`, the `data.image_features.ImageFeatures`
record: facts of the run, not settings. Files of version 1 (without a
`version`) kept those facts as `image_dim` and `image_provenance`, and
the feature kinds `fc` and `fne` by their file stems `ims` and `stages`
(`data.splits.DataConfig` reads those as the kinds); they are read as the
same types.
"""

import dataclasses
import json
from pathlib import Path

from common.config import SECTIONS, apply_overrides, rebuild
from common.errors import InputError
from common.files import read_text
from data.image_features import ImageFeatures
from models import registry
from models.base_config import ExperimentConfig

# The folder of a run directory that holds its best checkpoint (`engine.training`).
BEST_DIR = "best"
CONFIG_FILE = "config.json"
CONFIG_VERSION = 2


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """A run's config.json: its experiment and the image features it
    trained on (the module docstring).

    Attributes:
      experiment: the `ExperimentConfig`.
      image_features: the training data's `ImageFeatures` (kind, width,
        provenance).
    """

    experiment: ExperimentConfig
    image_features: ImageFeatures

    def to_json(self):
        record = {"version": CONFIG_VERSION, **dataclasses.asdict(self.experiment),
                  "image_features": self.image_features.to_dict()}
        return json.dumps(record, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text, path):
        """The `RunConfig` of a config.json's `text` (`path` names the file
        in errors): every section replaces the registered model's class
        defaults, checked field by field (`common.config.rebuild`)."""
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}: unreadable model config ({error})") from None
        if not isinstance(raw, dict) or "model_name" not in raw or "preset" not in raw:
            raise InputError(f"{path}: unreadable model config (needs model_name and preset)")
        version = raw.get("version", 1)
        if version not in (1, CONFIG_VERSION):
            raise InputError(f"{path}: config version {version!r}; this zoo reads versions 1 and {CONFIG_VERSION}")
        spec = registry.get(raw["model_name"], f"{path}: model_name")
        if not isinstance(raw["preset"], str):
            raise InputError(f"{path}: preset must be a string; got {raw['preset']!r}")
        defaults = ExperimentConfig(model_name=spec.name, preset=raw["preset"], model=spec.config_class(),
                                    train=type(spec.train)(), data=type(spec.data)())
        sections = {name: raw.get(name, {}) for name in SECTIONS}
        if version == 1:
            sections, features = _from_version_1(raw, sections, type(defaults.model), path)
        else:
            features = raw.get("image_features")
        try:
            experiment = rebuild(defaults, sections)
        except InputError as error:
            raise InputError(f"{path}: {error}") from None
        return cls(experiment, ImageFeatures.from_dict(features, path))


def _from_version_1(raw, sections, model_class, path):
    """The sections and the image-features record of a version-1 file."""
    # Settings a model config no longer has, left in older files at the
    # value that meant "unused" (`RETIRED` of the config class).
    retired = getattr(model_class, "RETIRED", {})
    if isinstance(sections["model"], dict) and retired:
        sections["model"] = {key: value for key, value in sections["model"].items()
                             if not (key in retired and value == retired[key])}
    if "runtime" not in raw and isinstance(sections["train"], dict):
        # Runs written before the runtime section kept these in `train`.
        sections["train"] = dict(sections["train"])
        sections["runtime"] = {key: sections["train"].pop(key) for key in ("mixed_precision", "jit_compile")
                               if key in sections["train"]}
    if raw.get("image_dim") is None:
        raise InputError(f"{path}: no image_dim; is this a run written by train.py?")
    data = sections["data"]
    kind = data.get("image_features", "fc") if isinstance(data, dict) else "fc"
    features = {"kind": kind, "width": raw["image_dim"], "provenance": raw.get("image_provenance")}
    return sections, features


def load_run(model_dir, overrides=()):
    """Reads `<model_dir>/config.json` back into a `RunConfig`, with
    `overrides`: `model.KEY=VALUE` changes that leave a trained model's
    weights valid (e.g. the similarity used for retrieval; any other
    section's is an `InputError`).

    A `model_name` that names no registered model is an `InputError`
    naming the file and its key (not `--model`, which the user may not
    have given)."""
    path = Path(model_dir) / CONFIG_FILE
    if not path.exists():
        raise InputError(f"{path}: no config.json; is this a model directory written by train.py?")
    if any(not item.startswith("model.") for item in overrides):
        raise InputError(f"--set {list(overrides)}: only model.KEY=VALUE settings apply to a trained model")
    run = RunConfig.from_json(read_text(path), path)
    return dataclasses.replace(run, experiment=apply_overrides(run.experiment, overrides))

"""A model made of trained runs (an ensemble's members, a two-stage
model's stages), built from their records (`models.members.TrainedRun`,
read once by its registration's `parts`): each run's model as its record
describes it, the columns of the composite model's image input it reads,
and its best weights loaded when the composite model is fitted. The one
build path of `models.ensemble` and `models.rerank`."""

import dataclasses
import itertools
from pathlib import Path

import tensorflow as tf

from common.errors import InputError
from models import registry
from models.members import TrainedRun, feature_kinds
from models.restore import restore_weights


@dataclasses.dataclass(frozen=True)
class Part:
    """A trained run as the composite model sees it.

    Attributes:
      run: its `TrainedRun`.
      columns: (first, past-the-last) column of the composite model's
        image input that it reads: the features of its own kind.
    """

    run: TrainedRun
    columns: tuple[int, int]


def build_parts(runs, image_dim):
    """The models of `runs` (untrained weights: `restore_parts` loads their
    best) and their `Part`s, reading the kinds of features of `runs` side
    by side in the order they first appear (`models.members.feature_kinds`),
    which must make `image_dim` columns. Returns (models, parts)."""
    kinds = feature_kinds(runs)
    if sum(kinds.values()) != image_dim:
        raise InputError(
            f"model.members read image features {' + '.join(f'{k} ({d})' for k, d in kinds.items())} = "
            f"{sum(kinds.values())} columns; the run's features have {image_dim}")
    starts = dict(zip(kinds, itertools.accumulate([0, *kinds.values()])))
    parts = tuple(Part(run, (starts[run.image_features.kind], starts[run.image_features.kind] + run.image_features.width))
                  for run in runs)
    return [build_run(run) for run in runs], parts


def build_run(run):
    """A trained run's model as its record describes it (its config, its
    vocabulary, the runs it is made of), with untrained weights."""
    experiment = run.experiment
    return registry.get(experiment.model_name).build_model(experiment.model, run.vocabulary, run.image_features, run.parts)


def restore_parts(models, parts):
    """Loads each part's best weights (its record's checkpoint) into its model."""
    for model, part in zip(models, parts):
        restore_weights(model, part.run.checkpoint, Path(part.run.directory) / "config.json")


def encoding_widths(model):
    """The widths of a built model's image and text encodings."""
    image = model.encode_image(tf.zeros([1, model.image_features.width]))
    text = model.encode_text(model.vectorizer(tf.constant(["a"])))
    return int(image.shape[-1]), int(text.shape[-1])

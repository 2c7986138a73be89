"""A trained run's model back from its directory: the experiment config
(`config.json`, read by `models.experiments`), the vocabulary (`vocab.json`) and the best checkpoint
(`best/`), as `train.py` writes them."""

from pathlib import Path

import tensorflow as tf

from common.errors import InputError, error_reason
from data.vocabulary import Vocabulary
from models import registry
from models.experiments import BEST_DIR, load_run


def restore_model(model_dir, overrides=()):
    """Rebuilds a model directory's model and loads its best weights.

    Args:
      model_dir: a directory written by train.py.
      overrides: `model.KEY=VALUE` changes to the model config that leave
        its weights valid (e.g. the similarity used for retrieval).

    Returns:
      (RunConfig, RetrievalModel): the run's config.json and its model
      (which carries the run's `image_features`).
    """
    model_dir = Path(model_dir)
    run = load_run(model_dir, overrides)
    vocabulary = Vocabulary.load(model_dir / "vocab.json")
    spec = registry.get(run.experiment.model_name)
    model = spec.build_model(run.experiment.model, vocabulary, run.image_features)
    restore_best_weights(model, model_dir, overrides)
    return run, model


def restore_best_weights(model, model_dir, overrides=()):
    """Loads a model directory's best weights into `model`, built from its
    config.json (with `overrides`) and vocab.json: every weight of the
    model must come from the checkpoint, else an `InputError` names it."""
    model_dir = Path(model_dir)
    best = tf.train.latest_checkpoint(str(model_dir / BEST_DIR))
    if best is None:
        raise InputError(f"{model_dir / BEST_DIR}: no checkpoint; has this model been validated once?")
    restore_weights(model, best, model_dir / "config.json", overrides)


def restore_weights(model, checkpoint, config_file, overrides=()):
    """Loads the weights of `checkpoint` into `model`, built from
    `config_file` (with `overrides`): every weight of the model must come
    from the checkpoint, else an `InputError` names it."""
    try:
        # Strict: every weight of the model must come from the checkpoint
        # (a setting that changes the weights, such as another layer size,
        # must not leave some of them at their initial values).
        status = restore_checkpoint(tf.train.Checkpoint(model=model), checkpoint,
                                    "the model's best weights are lost: train it again")
        status.expect_partial()  # silences the warning about the checkpoint's own save counter
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError) as error:
        # The half-restored model is discarded with this error; TF would
        # log warnings about its unrestored values when it is collected.
        tf.get_logger().setLevel("ERROR")
        reason = str(error).strip().splitlines()[-1][:300]
        raise InputError(f"{checkpoint}: the checkpoint does not fit the model configured in {config_file}"
                         f"{' with ' + ' '.join(overrides) if overrides else ''} ({reason})") from None


def restore_checkpoint(checkpoint, path, advice=None):
    """`checkpoint.restore(path)`; a damaged checkpoint (a truncated or
    overwritten file) is an `InputError` naming it and giving `advice`, not
    TensorFlow's IndexError or OpError."""
    try:
        return checkpoint.restore(path)
    except (IndexError, tf.errors.OpError) as error:
        raise InputError(f"{path}: damaged checkpoint ({error_reason(error)}){'; ' + advice if advice else ''}") from None

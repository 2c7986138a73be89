"""Scoring with a trained model: from a training checkpoint or a SavedModel.

Both scorers offer the same three operations (encode images, encode
captions, similarity of encodings), so `score_split` runs one protocol for
both and a checkpoint and its export give the same numbers.
"""

import re
from pathlib import Path

import numpy as np
import tensorflow as tf

import evaluate
import progress
from config import apply_overrides, load_experiment
from data.errors import InputError, error_reason
from data.vocabulary import Vocabulary
from models import registry

BEST_DIR = "best"


class CheckpointScorer:
    """Scores with the Keras model of a model directory's best checkpoint."""

    def __init__(self, model, image_dim, data_path=None, image_features="ims", test_split="test"):
        self.model = model
        self.image_dim = image_dim
        self.data_path = data_path
        self.image_features = image_features
        self.test_split = test_split
        self.joint_space = model.joint_space
        self._encode_text = tf.function(
            lambda text: model.encode_text(model.vectorizer(text)), reduce_retracing=True
        )
        self._encode_image = tf.function(model.encode_image, reduce_retracing=True)
        self._similarity = tf.function(model.similarity, reduce_retracing=True)

    @classmethod
    def from_model_dir(cls, model_dir, overrides=()):
        config, model = restore_model(model_dir, overrides)
        return cls(model, config.image_dim, config.data.path, config.data.image_features, config.data.test_split)

    def encode_images(self, features, batch_size=256):
        return _batched(self._encode_image, features, batch_size)

    def encode_texts(self, captions, batch_size=256):
        return _encode_texts(self._encode_text, captions, batch_size)

    def similarity(self, image_encodings, text_encodings):
        return self._similarity(image_encodings, text_encodings).numpy()


class SavedModelScorer:
    """Scores with a SavedModel exported by `export.export_saved_model`."""

    def __init__(self, path):
        try:
            self.loaded = tf.saved_model.load(str(path))
        except (OSError, ValueError) as error:
            raise InputError(f"{path}: not a readable SavedModel ({str(error).splitlines()[0]})") from None
        self.image_dim = self.loaded.encode_image.input_signature[0].shape[1]
        self.joint_space = bool(self.loaded.joint_space.numpy())
        self.data_path = None
        self.image_features = "ims"
        self.test_split = "test"

    def encode_images(self, features, batch_size=256):
        return _batched(self.loaded.encode_image, features, batch_size)

    def encode_texts(self, captions, batch_size=256):
        return _encode_texts(self.loaded.encode_text, captions, batch_size)

    def similarity(self, image_encodings, text_encodings):
        return self.loaded.similarity(image_encodings, text_encodings).numpy()


def _encode_texts(function, captions, batch_size):
    """Encodes captions in batches of similar length (less padding to run
    through a recurrent encoder), returning them in the original order."""
    order = np.argsort([len(c.split()) for c in captions], kind="stable")
    encodings = _batched(function, np.asarray(captions, dtype=object)[order], batch_size, "caption")
    return encodings[np.argsort(order)]


def _batched(function, items, batch_size, unit="image"):
    encodings = []
    with progress.bar(total=len(items), desc=f"encoding {unit}s", unit=unit) as bar:
        for a in range(0, len(items), batch_size):
            encodings.append(function(tf.constant(items[a : a + batch_size])).numpy())
            bar.update(len(encodings[-1]))
    return np.concatenate(encodings)


def restore_model(model_dir, overrides=()):
    """Rebuilds a model directory's model and loads its best weights.

    Args:
      model_dir: a directory written by train.py.
      overrides: `model.KEY=VALUE` changes to the model config that leave
        its weights valid (e.g. the similarity used for retrieval).

    Returns:
      (ExperimentConfig, RetrievalModel).
    """
    model_dir = Path(model_dir)
    config = load_experiment(model_dir, registry)
    if any(not item.startswith("model.") for item in overrides):
        raise InputError(f"--set {list(overrides)}: only model.KEY=VALUE settings apply to a trained model")
    config = apply_overrides(config, overrides)
    vocabulary = Vocabulary.load(model_dir / "vocab.json")
    spec = registry.get(config.model_name)
    model = spec.build_model(config.model, vocabulary, config.image_dim)
    best = tf.train.latest_checkpoint(str(model_dir / BEST_DIR))
    if best is None:
        raise InputError(f"{model_dir / BEST_DIR}: no checkpoint; has this model been validated once?")
    try:
        # Strict: every weight of the model must come from the checkpoint
        # (a setting that changes the weights, such as another layer size,
        # must not leave some of them at their initial values).
        status = restore_checkpoint(tf.train.Checkpoint(model=model), best,
                                    "the model's best weights are lost: train it again")
        status.expect_partial()  # silences the warning about the checkpoint's own save counter
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError) as error:
        # The half-restored model is discarded with this error; TF would
        # log warnings about its unrestored values when it is collected.
        tf.get_logger().setLevel("ERROR")
        reason = str(error).strip().splitlines()[-1][:300]
        raise InputError(f"{best}: the checkpoint does not fit the model configured in {model_dir / 'config.json'}"
                         f"{' with ' + ' '.join(overrides) if overrides else ''} ({reason})") from None
    return config, model


def restore_checkpoint(checkpoint, path, advice=None):
    """`checkpoint.restore(path)`; a damaged checkpoint (a truncated or
    overwritten file) is an `InputError` naming it and giving `advice`, not
    TensorFlow's IndexError or OpError."""
    try:
        return checkpoint.restore(path)
    except (IndexError, tf.errors.OpError) as error:
        raise InputError(f"{path}: damaged checkpoint ({error_reason(error)}){'; ' + advice if advice else ''}") from None


def check_image_dim(split, image_dim, path):
    if split.images.shape[1] != image_dim:
        raise InputError(
            f"{path}: image features have dimension {split.images.shape[1]}, the model expects {image_dim}"
        )


def encode_split(scorer, split, batch_size=256):
    """(image encodings, text encodings) of a loaded `RetrievalSplit`."""
    try:
        return scorer.encode_images(split.images, batch_size), scorer.encode_texts(split.captions, batch_size)
    except tf.errors.InvalidArgumentError as error:
        raise InputError(f"{split.captions_file}: {first_line(error)}") from None


def score_split(scorer, split, protocol="full", batch_size=256, encodings=None):
    """The metrics of a loaded `RetrievalSplit` under `scorer` (from its
    `encodings` when given)."""
    image_encodings, text_encodings = encodings or encode_split(scorer, split, batch_size)
    return evaluate.evaluate_encodings(
        scorer.similarity, image_encodings, text_encodings, split.caption_image, protocol,
        sentence_similarity=scorer.joint_space,
    )


def compose_query(scorer, image_features, add=(), subtract=()):
    """Multi-modal query composition (Dong et al. 2018, Sec. IV-C, Fig. 5):
    an image's encoding minus the encodings of the `subtract` texts plus
    those of the `add` texts, e.g. phi(image) - r("dog") + r("cat").

    Args:
      scorer: a `CheckpointScorer` or `SavedModelScorer`.
      image_features: float [N, F].
      add, subtract: texts (words or sentences).

    Returns:
      float32 [N, D] composed queries. Score them against captions with
      `scorer.similarity(composed, scorer.encode_texts(captions))` or
      against images with `scorer.similarity(scorer.encode_images(images),
      composed)`. Meaningful for models whose images and texts share one
      space (Word2VisualVec's visual space, a VSE joint space), not for a
      pairwise model.
    """
    composed = scorer.encode_images(np.asarray(image_features, np.float32))
    for texts, sign in ((add, 1.0), (subtract, -1.0)):
        if len(texts):
            composed = composed + sign * scorer.encode_texts(list(texts)).sum(axis=0)
    return composed


def first_line(error):
    """The message of a TensorFlow error without its graph traceback: the
    text of a failed assertion (e.g. "empty caption: ..."), else the first
    line."""
    message = getattr(error, "message", str(error))
    assertion = re.search(r"assertion failed: \[([^\]]*)\]", message)
    if assertion:
        return assertion.group(1).strip()
    return next(line for line in message.strip().splitlines() if line.strip())

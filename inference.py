"""Scoring with a trained model: from a training checkpoint or a SavedModel.

Both scorers offer the same three operations (encode images, encode
captions, similarity of encodings), so `evaluate_split` runs one protocol for
both and a checkpoint and its export give the same numbers.
"""

import re
from pathlib import Path

import numpy as np
import tensorflow as tf

import evaluate
from config import EMBEDDED_DATA, load_experiment
from data import readers
from data.errors import InputError
from data.vocabulary import Vocabulary
from models import registry

BEST_DIR = "best"


class CheckpointScorer:
    """Scores with the Keras model of a model directory's best checkpoint."""

    def __init__(self, model, image_dim, data_path=None, image_features="ims"):
        self.model = model
        self.image_dim = image_dim
        self.data_path = data_path
        self.image_features = image_features
        self._encode_text = tf.function(
            lambda text: model.encode_text(model.vectorizer(text)), reduce_retracing=True
        )
        self._encode_image = tf.function(model.encode_image, reduce_retracing=True)
        self._similarity = tf.function(model.similarity, reduce_retracing=True)

    @classmethod
    def from_model_dir(cls, model_dir):
        config, model = restore_model(model_dir)
        return cls(model, config.image_dim, config.data.path, config.data.image_features)

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
        self.data_path = None
        self.image_features = "ims"

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
    encodings = _batched(function, np.asarray(captions, dtype=object)[order], batch_size)
    return encodings[np.argsort(order)]


def _batched(function, items, batch_size):
    return np.concatenate(
        [function(tf.constant(items[a : a + batch_size])).numpy() for a in range(0, len(items), batch_size)]
    )


def restore_model(model_dir):
    """Rebuilds a model directory's model and loads its best weights.

    Returns:
      (ExperimentConfig, RetrievalModel).
    """
    model_dir = Path(model_dir)
    config = load_experiment(model_dir, registry)
    vocabulary = Vocabulary.load(model_dir / "vocab.json")
    spec = registry.get(config.model_name)
    model = spec.build_model(config.model, vocabulary.tokens, config.image_dim)
    best = tf.train.latest_checkpoint(str(model_dir / BEST_DIR))
    if best is None:
        raise InputError(f"{model_dir / BEST_DIR}: no checkpoint; has this model been validated once?")
    tf.train.Checkpoint(model=model).restore(best).expect_partial()
    return config, model


def check_image_dim(split, image_dim, path):
    if split.images.shape[1] != image_dim:
        raise InputError(
            f"{path}: image features have dimension {split.images.shape[1]}, the model expects {image_dim}"
        )


def evaluate_split(scorer, data_root, split_name, image_features="ims", protocol="full", batch_size=256):
    """Loads a split, encodes it with `scorer`, and returns its metrics."""
    data_root = data_root or EMBEDDED_DATA
    split = readers.load_precomp(data_root, split_name, image_features)
    check_image_dim(split, scorer.image_dim, Path(data_root) / f"{split_name}_{image_features}.npy")
    try:
        image_encodings = scorer.encode_images(split.images, batch_size)
        text_encodings = scorer.encode_texts(split.captions, batch_size)
    except tf.errors.InvalidArgumentError as error:
        raise InputError(f"{Path(data_root) / (split_name + '_caps.txt')}: {first_line(error)}") from None
    return evaluate.evaluate_encodings(
        scorer.similarity, image_encodings, text_encodings, split.caption_image, protocol
    )


def first_line(error):
    """The message of a TensorFlow error without its graph traceback: the
    text of a failed assertion (e.g. "empty caption: ..."), else the first
    line."""
    message = getattr(error, "message", str(error))
    assertion = re.search(r"assertion failed: \[([^\]]*)\]", message)
    if assertion:
        return assertion.group(1).strip()
    return next(line for line in message.strip().splitlines() if line.strip())

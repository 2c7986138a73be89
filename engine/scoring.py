"""Scoring with a trained model: from a training checkpoint or a SavedModel.

Both scorers offer the same three operations (encode images, encode
captions, similarity of encodings), so `engine.evaluation.evaluate` runs
one protocol for both and a checkpoint and its export give the same
numbers; `two_stage` (an `engine.evaluation.TwoStage`, or None) says how a
two-stage model ranks (a two-stage SavedModel's encodings are both stages'
side by side, as its checkpoint's, and its `similarity` the second stage's).
"""

import json
from pathlib import Path

import numpy as np
import tensorflow as tf

from common import progress
from common.errors import InputError
from data.image_features import ImageFeatures, kind_name
from engine import evaluation
from models.experiments import CONFIG_FILE
from models.restore import restore_model


class CheckpointScorer:
    """Scores with the Keras model of a model directory's best checkpoint."""

    def __init__(self, model, data_path=None, test_split="test", recorded_in=None):
        self.model = model
        # The features the model reads (`data.image_features.ImageFeatures`), and the file that records them.
        self.image_features = model.image_features
        self.recorded_in = recorded_in
        self.data_path = data_path
        self.test_split = test_split
        self.joint_space = model.joint_space
        # Traced once for every batch of captions (a recurrent encoder takes seconds to trace).
        self._encode_text = tf.function(
            lambda text: model.encode_text(model.vectorizer(text)), input_signature=[tf.TensorSpec([None], tf.string)]
        )
        self._encode_image = tf.function(model.encode_image, reduce_retracing=True)
        self._similarity = tf.function(model.similarity, reduce_retracing=True)
        if model.rerank_k is not None:
            self._stages = _stage_functions(*(stage.model for stage in model.stages()))

    @classmethod
    def from_model_dir(cls, model_dir, overrides=()):
        run, model = restore_model(model_dir, overrides)
        return cls(model, run.experiment.data.path, run.experiment.data.test_split, Path(model_dir) / CONFIG_FILE)

    @property
    def two_stage(self):
        """How a two-stage model (`models.rerank`) ranks, at its current
        `rerank_k` (a fit chooses it); None for every other model."""
        k = self.model.rerank_k
        if k is None:
            return None
        return evaluation.TwoStage(stage_encodings=self._stage_encodings, **self._stages, k=k)

    def _stage_encodings(self, image_encodings, text_encodings):
        """Each stage's part of the model's encodings (`RetrievalModel.stage_encodings`), as tensors
        (made once, so that no block's call converts a whole split's encodings again)."""
        return tuple((tf.constant(images), tf.constant(texts))
                     for images, texts in self.model.stage_encodings(image_encodings, text_encodings))

    def encode_images(self, features, batch_size=256):
        return _batched(self._encode_image, features, batch_size)

    def encode_texts(self, captions, batch_size=256):
        return _encode_texts(self._encode_text, captions, batch_size)

    def similarity(self, image_encodings, text_encodings):
        return self._similarity(image_encodings, text_encodings).numpy()


class SavedModelScorer:
    """Scores with a SavedModel exported by `engine.export.export_saved_model`."""

    def __init__(self, path):
        try:
            self.loaded = tf.saved_model.load(str(path))
        except (OSError, ValueError) as error:
            raise InputError(f"{path}: not a readable SavedModel ({str(error).splitlines()[0]})") from None
        self.joint_space = bool(self.loaded.joint_space.numpy())
        self.data_path = None
        # Exports written before the variable existed read one CNN layer's features; those written before
        # provenance was recorded hold none.
        kind, provenance = (getattr(self.loaded, name, None) for name in ("image_features", "image_provenance"))
        text = provenance.numpy().decode() if provenance is not None else ""
        self.image_features = ImageFeatures(
            kind=kind_name(kind.numpy().decode()) if kind is not None else "fc",
            width=self.loaded.encode_image.input_signature[0].shape[1],
            provenance=json.loads(text) if text else None)
        self.test_split = "test"
        self.recorded_in = path
        rerank_k = getattr(self.loaded, "rerank_k", None)
        # A two-stage export's list length (`engine.export`); None for one that ranks in one stage.
        self.rerank_k = None if rerank_k is None else int(rerank_k.numpy())
        self.two_stage = None
        # One batch in, encodings out (tensors), without a progress bar.
        self.encode_image_batch, self.encode_text_batch = self.loaded.encode_image, self.loaded.encode_text
        if self.rerank_k is not None:
            # Encodings are both stages' side by side (the first's, then the second's), and `similarity` is
            # the second stage's, so it is ranked as its checkpoint is.
            self.joint_space = False
            self.first_widths = [int(spec.shape[1]) for spec in self.loaded.similarity.input_signature]
            self.encode_image_batch = lambda features: tf.concat(
                [self.loaded.encode_image(features), self.loaded.rerank_encode_image(features)], axis=1)
            self.encode_text_batch = lambda text: tf.concat(
                [self.loaded.encode_text(text), self.loaded.rerank_encode_text(text)], axis=1)
            self.two_stage = evaluation.TwoStage(
                stage_encodings=self._stage_encodings, propose=lambda i, t: self.loaded.similarity(i, t).numpy(),
                score_pairs=self._score_pairs, similarity=self._rerank_similarity, k=self.rerank_k)

    def encode_images(self, features, batch_size=256):
        return _batched(self.encode_image_batch, features, batch_size)

    def encode_texts(self, captions, batch_size=256):
        return _encode_texts(self.encode_text_batch, captions, batch_size)

    def similarity(self, image_encodings, text_encodings):
        if self.rerank_k is None:
            return self.loaded.similarity(image_encodings, text_encodings).numpy()
        return self._rerank_similarity(*self._stage_encodings(image_encodings, text_encodings)[1])

    def _stage_encodings(self, image_encodings, text_encodings):
        """Each stage's part of side-by-side encodings (the first stage's, then the second's)."""
        image_encodings, text_encodings = np.asarray(image_encodings), np.asarray(text_encodings)
        image_width, text_width = self.first_widths
        return ((np.ascontiguousarray(image_encodings[:, :image_width]),
                 np.ascontiguousarray(text_encodings[:, :text_width])),
                (np.ascontiguousarray(image_encodings[:, image_width:]),
                 np.ascontiguousarray(text_encodings[:, text_width:])))

    def _rerank_similarity(self, image_encodings, text_encodings):
        """The second stage's every pair of its encodings, through its pair scoring, a block of pairs at a time."""
        n_texts = len(text_encodings)
        pairs = np.arange(len(image_encodings) * n_texts)
        blocks = (pairs[a : a + evaluation.PAIR_BLOCK] for a in range(0, len(pairs), evaluation.PAIR_BLOCK))
        scores = [self._score_pairs(image_encodings, text_encodings, block // n_texts, block % n_texts)
                  for block in blocks]
        return np.concatenate([np.zeros(0, np.float32), *scores]).reshape(len(image_encodings), n_texts)

    def _score_pairs(self, image_encodings, text_encodings, image_rows, text_rows):
        """The second stage's scores of the pairs (image_rows[p], text_rows[p]) of its encodings."""
        return self.loaded.rerank_score_pairs(image_encodings[image_rows], text_encodings[text_rows]).numpy()


def _stage_functions(first, second):
    """The `TwoStage` functions of a two-stage model's first and second
    stage models, on the stages' own encodings, returning NumPy arrays."""
    def score_pairs(images, texts, image_rows, text_rows):
        # Gathered in the graph, from the split's encodings: no copy of the pairs' encodings outside it.
        return tf.cast(second.pair_similarity(tf.gather(images, image_rows), tf.gather(texts, text_rows)), tf.float32)

    functions = {"propose": lambda images, texts: tf.cast(first.similarity(images, texts), tf.float32),
                 "score_pairs": score_pairs,
                 "similarity": lambda images, texts: tf.cast(second.similarity(images, texts), tf.float32)}
    return {name: _numpy(tf.function(function, reduce_retracing=True)) for name, function in functions.items()}


def _numpy(function):
    """`function` returning a NumPy array."""
    return lambda *args: function(*args).numpy()


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


def compose_query(scorer, image_features, add=(), subtract=()):
    """Multi-modal query composition (Dong et al. 2018, Sec. IV-C, Fig. 5):
    an image's encoding minus the encodings of the `subtract` texts plus
    those of the `add` texts, e.g. phi(image) - r("dog") + r("cat").

    Args:
      scorer: a `CheckpointScorer` or `SavedModelScorer`.
      image_features: float [N, F].
      add, subtract: texts (words or sentences): a sequence of strings, or
        one string, taken as one text (`add="cat"` is `add=["cat"]`, not
        the letters c, a, t).

    Returns:
      float32 [N, D] composed queries. Score them against captions with
      `scorer.similarity(composed, scorer.encode_texts(captions))` or
      against images with `scorer.similarity(scorer.encode_images(images),
      composed)`.

    Raises:
      InputError: the scorer's model has no space that images and texts
        share (`scorer.joint_space` False: the pairwise m-CNN), where the
        sum of an image's and a text's encodings means nothing. Meaningful
        for Word2VisualVec's visual space or a VSE joint space.
      TypeError: `add` or `subtract` is not a string or a sequence of
        strings.
      ValueError: `image_features` is not a 2-D [N, F] array.
    """
    if not scorer.joint_space:
        raise InputError(
            "compose_query: this model scores image-text pairs without a space that images and texts "
            "share (joint_space is False, e.g. m-CNN), so adding and subtracting its encodings is meaningless"
        )
    add, subtract = _texts(add, "add"), _texts(subtract, "subtract")
    image_features = np.asarray(image_features, np.float32)
    if image_features.ndim != 2:
        raise ValueError(
            f"compose_query: image_features must be a 2-D [N, F] array; got shape {image_features.shape}"
        )
    composed = scorer.encode_images(image_features)
    for texts, sign in ((add, 1.0), (subtract, -1.0)):
        if texts:
            composed = composed + sign * scorer.encode_texts(texts).sum(axis=0)
    return composed


def _texts(texts, name):
    """`texts` (one string, or an iterable of strings) as a list of strings."""
    if isinstance(texts, str):
        return [texts]
    if isinstance(texts, (bytes, dict)) or not hasattr(texts, "__iter__"):
        raise TypeError(f"compose_query: {name} must be a string or a sequence of strings; got {type(texts).__name__}")
    texts = list(texts)
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(
                f"compose_query: {name} must hold strings; got {type(text).__name__} {text!r}"
            )
    return texts

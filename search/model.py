"""The SavedModel an index is built with and queried with.

`SearchModel(path)` loads an export of the zoo (`engine.export`) and
offers what search needs of it: encoding texts, encoded images
(`encode_image_bytes`, JPEG/PNG bytes in) and precomputed image features,
the model's own `similarity`, and two facts an index records:

- its fingerprint (`fingerprint.pb`'s singleprint), so that an index is
  never queried with another model's encodings;
- its metric: "dot" or "cosine" when the export's `similarity` is that
  product of the encodings (then exact search is a matrix product and an
  approximate index can serve it), else "model" (the similarity signature
  scores every pair: the pairwise m-CNN and ensembles, `joint_space`
  false, and joint spaces under order-violation or negative-MSE
  similarities).

A two-stage export (`engine.export`: `rerank_k` and the second stage's
`rerank_*` signatures) is indexed by its first stage (the metric is its
first stage's) and re-ranks with its second; its encodings here are both
stages' side by side (`split` parts them), as `engine.scoring` has them.
"""

import numpy as np
import tensorflow as tf

from common.errors import InputError, error_reason
from engine.scoring import SavedModelScorer

IMAGE_BYTES_SIGNATURE = "encode_image_bytes"
METRICS = ("dot", "cosine", "model")


class SearchModel:
    """An export of the zoo, as search uses it (see the module docstring)."""

    def __init__(self, path):
        self.path = str(path)
        self.scorer = SavedModelScorer(path)
        self.loaded = self.scorer.loaded
        try:
            self.fingerprint = tf.saved_model.experimental.read_fingerprint(self.path).singleprint()
        except (OSError, ValueError, tf.errors.OpError) as error:
            raise InputError(f"{path}: the SavedModel has no readable fingerprint.pb ({error_reason(error)}); "
                             "export it again with this TensorFlow") from None
        # Whether the export's `encode_*` (a two-stage export's: its first stage's) meet in one space.
        self.joint_space = bool(self.loaded.joint_space.numpy())
        self.metric = _probe_metric(self.loaded.similarity, self.joint_space)
        # A two-stage export's list length: its encodings are then both stages' side by side (`split`).
        self.rerank_k = self.scorer.rerank_k

    @property
    def takes_images(self):
        """Whether the export encodes JPEG/PNG bytes (`encode_image_bytes`)."""
        return hasattr(self.loaded, IMAGE_BYTES_SIGNATURE)

    def check_takes_images(self, argument):
        if not self.takes_images:
            raise InputError(f"{argument}: the SavedModel {self.path} takes precomputed image features only (it has "
                             f"no {IMAGE_BYTES_SIGNATURE} signature); export a run whose features have a known "
                             "backbone to index or query with images")

    def encode_texts(self, texts, batch_size=256):
        """float32 [n, ...] encodings of `texts` (the model's progress bar)."""
        return self.scorer.encode_texts(list(texts), batch_size)

    def encode_text_batch(self, texts):
        """float32 [n, ...] encodings of one batch of texts; a
        `tf.errors.InvalidArgumentError` when the model refuses one."""
        return self.scorer.encode_text_batch(tf.constant(list(texts), tf.string)).numpy()

    def encode_image_features(self, features, batch_size=256):
        return self.scorer.encode_images(np.asarray(features, np.float32), batch_size)

    def encode_image_bytes(self, images):
        """float32 [n, ...] encodings of a batch of encoded images; a
        `tf.errors.InvalidArgumentError` when one of them cannot be decoded.
        A two-stage export runs the backbone once for both stages."""
        images = tf.constant(images, tf.string)
        if self.rerank_k is None:
            return self.loaded.encode_image_bytes(images).numpy()
        return self.scorer.encode_image_batch(self.loaded.extract_image_features(images)).numpy()

    def similarity(self, image_encodings, text_encodings):
        """The export's `similarity` (a two-stage export's: its first stage's)."""
        return self.loaded.similarity(image_encodings, text_encodings).numpy()

    def split(self, encodings, side):
        """(first stage's, second stage's) parts of a two-stage export's
        encodings of `side` ("image" or "text")."""
        width = self.scorer.first_widths[0 if side == "image" else 1]
        return encodings[:, :width], encodings[:, width:]

    def rerank_encoding_shape(self, side):
        """The shape of the second stage's encodings of `side`."""
        return self.loaded.rerank_score_pairs.input_signature[0 if side == "image" else 1].shape[1:]

    def rerank_score_pairs(self, image_encodings, text_encodings):
        """float32 [P]: the second stage's scores of aligned pairs [P, ...] x [P, ...]."""
        return self.loaded.rerank_score_pairs(image_encodings, text_encodings).numpy()


def encode_image_files(model, files, read):
    """Encodes one batch of image files, skipping those that cannot be read
    or decoded.

    Args:
      model: a `SearchModel` with the image signature.
      files: the batch's file names (ids).
      read: file name -> bytes (an `OSError` skips the file).

    Returns:
      (encodings float32 [n_encoded, ...], the encoded file names,
      [(skipped file name, reason)]).
    """
    contents, skipped = [], []
    for file in files:
        try:
            contents.append((file, read(file)))
        except OSError as error:
            skipped.append((file, f"unreadable ({error.strerror or error})"))
    if not contents:
        return None, [], skipped
    try:
        return model.encode_image_bytes([data for _, data in contents]), [file for file, _ in contents], skipped
    except tf.errors.InvalidArgumentError:
        pass
    # A file of the batch is not an image the model decodes: each on its own
    # finds which (rare, so the batch's speed is kept for the others).
    encodings, encoded = [], []
    for file, data in contents:
        try:
            encodings.append(model.encode_image_bytes([data]))
            encoded.append(file)
        except tf.errors.InvalidArgumentError as error:
            skipped.append((file, f"not a decodable JPEG/PNG image ({error_reason(error)})"))
    return (np.concatenate(encodings) if encodings else None), encoded, skipped


def _probe_metric(similarity, joint_space, size=8, seed=0):
    """"dot" or "cosine" when `similarity` equals that product on random
    encodings of its input shape, else "model" (see the module docstring)."""
    if not joint_space:
        return "model"
    image_spec, text_spec = similarity.input_signature
    if len(image_spec.shape) != 2 or len(text_spec.shape) != 2 or image_spec.shape[1] != text_spec.shape[1]:
        return "model"
    rng = np.random.default_rng(seed)
    images = rng.normal(size=(size, image_spec.shape[1])).astype(np.float32)
    texts = rng.normal(size=(size + 1, text_spec.shape[1])).astype(np.float32)
    scores = similarity(images, texts).numpy()
    products = {"dot": images @ texts.T, "cosine": normalize(images) @ normalize(texts).T}
    for metric, product in products.items():
        if np.allclose(scores, product, rtol=1e-4, atol=1e-4 * np.abs(product).max()):
            return metric
    return "model"


def normalize(rows):
    """Rows scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1)

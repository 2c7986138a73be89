"""The extractor of image features (`FeatureExtractor`): a backbone run
over image files or encoded images, its features averaged over each
image's views; also rebuilt from a folder's recorded provenance
(`from_provenance`, for the exports that take images). See
data/extract_features.py for the protocol.
"""

import logging
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from common import progress
from common.errors import InputError
from data.backbones import BACKBONES, EFFICIENTNET_LITE0, TFHUB_PREFIX, build_backbone
from data.full_network import full_network
from data.image_features import EVERY_LAYER, ONE_LAYER, file_stems
from data.image_decoding import CROP, RESIZE, decode_image, load_image, views

LOG_EVERY = 100  # batches

log = logging.getLogger("extract_features")


class FeatureExtractor(tf.Module):
    """Features of images, averaged over their views.

    Args:
      model, preprocess: from `build_backbone` (or `full_network`).
      crops: 10 (resize to 256x256, `ten_crops`), 2 (resize to 224x224,
        the image and its mirror) or 1 (resize to 224x224).

    Call with (paths, batch_size) -> float32 [len(paths), F], in path
    order; `encode_bytes(contents)` maps encoded images (string [N]) to
    float32 [N, F] in the graph. A `tf.Module`: a module that holds it
    saves the backbone's variables (a TF Hub backbone's `.module` too).
    """

    def __init__(self, model, preprocess, crops):
        super().__init__()
        self.model = model
        self.hub_module = getattr(model, "module", None)
        # F, the width of the features.
        self.dim = model.dim if self.hub_module is not None else int(model.output_shape[-1])
        self.preprocess = preprocess
        self.crops = crops
        self.size = RESIZE if crops == 10 else CROP
        # Traced once for all batches and splits (tracing ResNet-152 takes
        # seconds), and for every function of an export that encodes images.
        self._encode = tf.function(
            self._encode_batch, input_signature=[tf.TensorSpec([None, self.size, self.size, 3], tf.float32)]
        )

    def _encode_batch(self, images):
        crops = views(images, self.crops)
        features = self.model(self.preprocess(tf.reshape(crops, [-1, CROP, CROP, 3])), training=False)
        return tf.reduce_mean(tf.reshape(features, [tf.shape(images)[0], self.crops, -1]), axis=1)

    def encode_bytes(self, contents):
        """float32 [N, F] features of encoded images (string [N])."""
        images = tf.map_fn(lambda c: decode_image(c, self.size), contents,
                           fn_output_signature=tf.TensorSpec([self.size, self.size, 3], tf.float32))
        # The backbones fail on an empty batch (in a convolution's BiasAdd or a
        # batch normalisation), which has no features to compute.
        return tf.cond(tf.size(contents) > 0, lambda: self._encode(images),
                       lambda: tf.zeros([0, self.dim], tf.float32))

    def __call__(self, paths, batch_size):
        dataset = (
            tf.data.Dataset.from_tensor_slices([str(path) for path in paths])
            .map(lambda path: load_image(path, self.size), num_parallel_calls=tf.data.AUTOTUNE)
            .batch(batch_size)
            .prefetch(tf.data.AUTOTUNE)
        )
        features = []
        try:
            with progress.bar(total=len(paths), desc="extracting features", unit="image") as bar:
                for images in dataset:
                    features.append(self._encode(images).numpy())
                    bar.update(len(features[-1]))
                    if len(features) % LOG_EVERY == 0:
                        log.info("%d/%d images", min(len(features) * batch_size, len(paths)), len(paths))
        except tf.errors.InvalidArgumentError:
            # tf.data does not say which file failed: decode the files of the
            # failed batch and after it one by one to name it.
            _raise_first_unreadable(paths[len(features) * batch_size :], self.size)
            raise
        return np.concatenate(features).astype(np.float32)


def from_provenance(recorded, image_features="fc"):
    """The extractor that makes a folder's features again from images.

    Args:
      recorded: a provenance (`data.provenance`) of features made by
        `data.extract_features` or of the embedded ones.
      image_features: the kind of features a model reads
        (`data.image_features`): "fc", "fne" or both joined by "+" (their
        columns side by side, in that order).

    Returns:
      A `FeatureExtractor`, or None when the provenance names no backbone
      this module can rebuild (a TF Hub handle that is not a local
      directory, which would need the network at every export) or the
      features are not ones it makes.
    """
    backbone = recorded["backbone"]
    stems = file_stems(image_features)
    if not set(stems) <= {ONE_LAYER, EVERY_LAYER}:
        return None
    # provenance.json names what it holds by file stem: EVERY_LAYER where the per-layer features were written.
    if backbone.startswith(TFHUB_PREFIX):
        if EVERY_LAYER in stems or not Path(backbone[len(TFHUB_PREFIX):]).is_dir():
            return None
    elif backbone not in (*BACKBONES, EFFICIENTNET_LITE0) or (EVERY_LAYER in stems and EVERY_LAYER not in recorded):
        return None
    if EVERY_LAYER not in stems:
        model, preprocess = build_backbone(backbone, recorded["weights"])
        return FeatureExtractor(model, preprocess, recorded["crops"])
    full, preprocess, _, ims = full_network(backbone, recorded["weights"])
    parts = [full.output[:, ims] if stem == ONE_LAYER else full.output for stem in stems]
    model = keras.Model(full.input, parts[0] if len(parts) == 1 else keras.layers.Concatenate()(parts))
    return FeatureExtractor(model, preprocess, recorded["crops"])


def _raise_first_unreadable(paths, size):
    """Raises an InputError naming the first of `paths` that does not decode."""
    for path in paths:
        try:
            load_image(str(path), size)
        except tf.errors.InvalidArgumentError as error:
            reason = error.message.split("}}")[-1].split("[Op:")[0].strip()
            raise InputError(f"{path}: not a readable image ({reason})") from None

"""CNN image features: the backbones of `python -m data.extract_features`
(keras.applications networks or TF Hub modules), their 10-crop protocol,
the per-layer features of a Full-Network Embedding, and the extractor that
runs them over image files. See data/extract_features.py for the protocol.
"""

import dataclasses
import logging
import os
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from common import progress
from common.errors import InputError

CROP = 224
RESIZE = 256  # the side of the image the 10 crops are cut from
LOG_EVERY = 100  # batches

log = logging.getLogger("extract_features")


@dataclasses.dataclass(frozen=True)
class Backbone:
    """A `keras.applications` network and the layer whose output is the feature.

    Attributes:
      application: the `keras.applications` module and constructor.
      feature_layer: name of the layer giving the feature vector.
      weights_url: the ImageNet weights file Keras downloads (with the top).
    """
    application: tuple[str, str]
    feature_layer: str
    weights_url: str


_WEIGHTS = "https://storage.googleapis.com/tensorflow/keras-applications/"
BACKBONES = {
    "resnet152": Backbone(
        ("resnet", "ResNet152"), "avg_pool", _WEIGHTS + "resnet/resnet152_weights_tf_dim_ordering_tf_kernels.h5"
    ),
    "vgg16": Backbone(("vgg16", "VGG16"), "fc2", _WEIGHTS + "vgg16/vgg16_weights_tf_dim_ordering_tf_kernels.h5"),
    "vgg19": Backbone(("vgg19", "VGG19"), "fc2", _WEIGHTS + "vgg19/vgg19_weights_tf_dim_ordering_tf_kernels.h5"),
}


TFHUB_PREFIX = "tfhub:"


def check_backbone_name(name):
    """InputError unless `name` is a key of `BACKBONES` or "tfhub:" and a
    handle."""
    if name not in BACKBONES and not (name.startswith(TFHUB_PREFIX) and len(name) > len(TFHUB_PREFIX)):
        raise InputError(f"--backbone {name!r}: choose {', '.join(sorted(BACKBONES))} or {TFHUB_PREFIX}HANDLE")


def build_backbone(name, weights="imagenet"):
    """The feature extractor of a backbone.

    Args:
      name: a key of `BACKBONES`, or "tfhub:" and a TF Hub handle or module
        directory (`hub_backbone`).
      weights: "imagenet", "none" (random, for tests) or the path of a Keras
        weights file of the whole network (e.g. the ImageNet file).

    Returns:
      (model, preprocess_input): the model maps preprocessed [B, 224, 224, 3]
      crops to [B, F] features; preprocess_input maps RGB in [0, 255] to the
      model's input.
    """
    if name.startswith(TFHUB_PREFIX):
        if weights != "imagenet":
            raise InputError("--weights applies to the keras.applications backbones; a TF Hub module holds its own")
        return hub_backbone(name[len(TFHUB_PREFIX):]), lambda images: images / 255.0
    backbone = BACKBONES[name]
    module, constructor = backbone.application
    application = getattr(keras.applications, module)
    if weights not in ("imagenet", "none") and not Path(weights).is_file():
        raise InputError(f"--weights {weights}: file not found")
    try:
        model = getattr(application, constructor)(weights=None if weights == "none" else weights)
    except Exception as error:  # Keras raises a bare Exception when a download fails.
        if "URL fetch failure" in str(error):
            keras_home = os.environ.get("KERAS_HOME", os.path.join(os.path.expanduser("~"), ".keras"))
            raise InputError(
                f"cannot download the ImageNet weights of {name}: download {backbone.weights_url} "
                f"into {os.path.join(keras_home, 'models')}{os.sep}, or pass --weights PATH"
            ) from None
        if weights in ("imagenet", "none"):
            raise
        reason = str(error).splitlines()[0]
        raise InputError(f"--weights {weights}: not a weights file of {name} ({reason})") from None
    features = keras.Model(model.input, model.get_layer(backbone.feature_layer).output)
    return features, application.preprocess_input


def hub_backbone(handle):
    """A TF Hub image feature-vector module as a function of images.

    Args:
      handle: a tfhub.dev / Kaggle Models URL or handle, or a local module
        directory.

    Returns:
      A callable (images [B, 224, 224, 3] in [0, 1], training=False) ->
      [B, F]: the images are resized to the module's input size when its
      signature fixes one (`.input_size`, (height, width) or None); `.dim`
      is F.

    Raises:
      InputError: the module cannot be loaded, does not run on [B, H, W, 3]
        float32 images, or does not return [B, F] vectors (checked up front
        on one blank image).
    """
    import tensorflow_hub as hub  # Only here: most runs use keras.applications.

    if "://" not in handle and not Path(handle).exists():
        looks_remote = handle.count("/") >= 2 and not handle.startswith((".", "/"))
        if not looks_remote:
            raise InputError(f"--backbone tfhub:{handle}: no such module directory")
    try:
        module = hub.load(handle)
    except Exception as error:  # hub raises whatever its resolver or loader does.
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if "://" in handle or not Path(handle).exists():
            raise InputError(
                f"--backbone tfhub:{handle}: cannot download the module ({reason}); download it elsewhere and "
                "pass its directory as --backbone tfhub:PATH"
            ) from None
        raise InputError(f"--backbone tfhub:{handle}: not a TF Hub module ({reason})") from None
    signatures = getattr(module, "signatures", {})
    if callable(module):
        function, specs = module, _input_specs(module.__call__)
    else:
        name = next((n for n in ("image_feature_vector", "default") if n in signatures), None)
        if name is None:
            raise InputError(f"--backbone tfhub:{handle}: the module is not callable and has no "
                             "image_feature_vector or default signature")
        signature = signatures[name]
        function, specs = signature, _input_specs(signature)
    size = _fixed_input_size(specs)
    # The module's signature, probed once on one blank image before any
    # image is read: the input size it takes and the output it gives.
    height, width = size or (CROP, CROP)
    try:
        probe = _feature_output(function(tf.zeros([1, height, width, 3], tf.float32)))
    except Exception as error:  # noqa: BLE001  whatever the module's function raises on a bad input
        raise InputError(f"--backbone tfhub:{handle}: the module does not run on [batch, {height}, {width}, 3] "
                         f"float32 images ({_first_line(error)})") from None
    if len(probe.shape) != 2:
        shape = ", ".join(str(d) for d in probe.shape[1:])
        raise InputError(f"--backbone tfhub:{handle}: the module returns shape [batch, {shape}], not [batch, features] "
                         "(an image feature-vector module is needed, not one returning feature maps)")

    def features(images, training=False):
        if size is not None and tuple(images.shape[1:3]) != size:
            # A module of a fixed input size: each crop resized to it.
            images = tf.image.resize(images, size, antialias=True)
        return _feature_output(function(images))

    features.module = module  # a signature alone does not keep the module's variables alive
    features.input_size = size
    features.dim = int(probe.shape[1])
    return features


def _input_specs(function):
    """The [B, H, W, C] input specs of a (restored) tf.function or concrete
    function, from its signature(s); [] where it has none."""
    concrete = getattr(function, "concrete_functions", None)
    if concrete is None:
        concrete = [function] if hasattr(function, "structured_input_signature") else []
    specs = []
    for candidate in concrete:
        args, kwargs = candidate.structured_input_signature
        specs += [spec for spec in tf.nest.flatten((args, kwargs))
                  if isinstance(spec, tf.TensorSpec) and spec.shape.rank == 4]
    return specs


def _fixed_input_size(specs):
    """(height, width) when the module's signature fixes its input size,
    else None."""
    sizes = {(spec.shape[1], spec.shape[2]) for spec in specs}
    fixed = [size for size in sizes if size[0] is not None and size[1] is not None]
    return tuple(int(d) for d in fixed[0]) if len(fixed) == 1 and len(sizes) == 1 else None


def _feature_output(outputs):
    """The features of a module's outputs (a tensor, or a dict of them as
    a signature returns: its "default" entry, else its first)."""
    if isinstance(outputs, dict):
        return outputs["default"] if "default" in outputs else next(iter(outputs.values()))
    return outputs


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


def full_network(features_model, feature_layer):
    """The Full-Network Embedding's raw features of a VGG feature model.

    Args:
      features_model: from `build_backbone` (input to fc2).
      feature_layer: the name of its usual feature layer.

    Returns:
      (model, layout): the model maps crops to [B, F] features (every
      convolution's output spatially averaged, then fc1 and fc2); layout is
      [{"name", "dim"}] per layer, in that order.
    """
    layers = [layer for layer in features_model.layers if isinstance(layer, keras.layers.Conv2D)]
    layers += [layer for layer in features_model.layers if layer.name in ("fc1", "fc2")]
    if not any(layer.name == feature_layer for layer in layers):
        raise InputError("--stages needs a VGG backbone (convolutions followed by fc1, fc2): --backbone vgg16 or vgg19")
    outputs = [
        keras.layers.GlobalAveragePooling2D(name=f"{layer.name}_mean")(layer.output)
        if len(layer.output.shape) == 4
        else layer.output
        for layer in layers
    ]
    model = keras.Model(features_model.input, keras.layers.Concatenate()(outputs))
    return model, [{"name": layer.name, "dim": int(layer.output.shape[-1])} for layer in layers]


def load_image(path, size):
    """Reads an image file as float32 RGB [size, size, 3] in [0, 255] (graph-safe)."""
    image = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
    # Antialiasing keeps downscaled photos from aliasing, as PIL's resize does.
    return tf.image.resize(image, (size, size), antialias=True)


def ten_crops(images, size):
    """The papers' 10 views of each image.

    Args:
      images: [B, H, W, C].
      size: the side of the square crops.

    Returns:
      [B, 10, size, size, C]: the top-left, top-right, bottom-left,
      bottom-right and centre crops, then the same five mirrored left-right.
    """
    height, width = images.shape[1], images.shape[2]
    bottom, right = height - size, width - size
    offsets = [(0, 0), (0, right), (bottom, 0), (bottom, right), (bottom // 2, right // 2)]
    crops = [images[:, y : y + size, x : x + size] for y, x in offsets]
    crops += [tf.reverse(crop, axis=[2]) for crop in crops]
    return tf.stack(crops, axis=1)


class FeatureExtractor:
    """Features of image files, averaged over their crops.

    Args:
      model, preprocess: from `build_backbone`.
      crops: 10 (resize to 256x256, `ten_crops`) or 1 (resize to 224x224).

    Call with (paths, batch_size) -> float32 [len(paths), F], in path order.
    """

    def __init__(self, model, preprocess, crops):
        self.model = model
        self.preprocess = preprocess
        self.crops = crops
        self.size = RESIZE if crops == 10 else CROP
        # Traced once for all batches and splits (tracing ResNet-152 takes seconds).
        self._encode = tf.function(
            self._encode_batch, input_signature=[tf.TensorSpec([None, self.size, self.size, 3], tf.float32)]
        )

    def _encode_batch(self, images):
        views = ten_crops(images, CROP) if self.crops == 10 else images[:, None]
        features = self.model(self.preprocess(tf.reshape(views, [-1, CROP, CROP, 3])), training=False)
        return tf.reduce_mean(tf.reshape(features, [tf.shape(images)[0], self.crops, -1]), axis=1)

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


def _raise_first_unreadable(paths, size):
    """Raises an InputError naming the first of `paths` that does not decode."""
    for path in paths:
        try:
            load_image(str(path), size)
        except tf.errors.InvalidArgumentError as error:
            reason = error.message.split("}}")[-1].split("[Op:")[0].strip()
            raise InputError(f"{path}: not a readable image ({reason})") from None

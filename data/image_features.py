"""CNN image features: the backbones of `python -m data.extract_features`
(the embedded features' EfficientNet-Lite0, keras.applications networks or
TF Hub modules), their views (1 image, the image and its mirror, or 10
crops), the per-layer features of a Full-Network Embedding, and the
extractor that runs them over image files or encoded images, also rebuilt
from a folder's recorded provenance (`from_provenance`, for the exports
that take images). See data/extract_features.py for the protocol.
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
from data import efficientnet_lite

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
# The CNN of the embedded Flickr8k features, with its ImageNet weights
# converted from PyTorch by tools/convert_efficientnet_lite0.py.
EFFICIENTNET_LITE0 = "efficientnet-lite0"
EFFICIENTNET_LITE0_WEIGHTS = Path(__file__).resolve().parent / "efficientnet_lite0" / "efficientnet_lite0.weights.h5"
# The views each backbone's features average by default: the papers' 10
# crops, the embedded features' image and mirror.
DEFAULT_CROPS = 10
EFFICIENTNET_LITE0_CROPS = 2


def check_backbone_name(name):
    """InputError unless `name` is a key of `BACKBONES`, "efficientnet-lite0"
    or "tfhub:" and a handle."""
    if name not in (*BACKBONES, EFFICIENTNET_LITE0) and not (
        name.startswith(TFHUB_PREFIX) and len(name) > len(TFHUB_PREFIX)
    ):
        raise InputError(f"--backbone {name!r}: choose {', '.join(sorted([*BACKBONES, EFFICIENTNET_LITE0]))} "
                         f"or {TFHUB_PREFIX}HANDLE")


def build_backbone(name, weights="imagenet"):
    """The feature extractor of a backbone.

    Args:
      name: a key of `BACKBONES`, "efficientnet-lite0", or "tfhub:" and a
        TF Hub handle or module directory (`hub_backbone`).
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
    if name == EFFICIENTNET_LITE0:
        stages = efficientnet_lite_stages(weights)
        head_mean = keras.layers.GlobalAveragePooling2D(name="head_mean")(stages.output[-1])
        return keras.Model(stages.input, head_mean), _scale_efficientnet_lite
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


def _scale_efficientnet_lite(images):
    return (images - 127.0) / 128.0


def efficientnet_lite_stages(weights="imagenet"):
    """EfficientNet-Lite0 (`data.efficientnet_lite`) at 224x224 with the
    shipped ImageNet weights ("imagenet"), random ones ("none") or a
    `.weights.h5` file of it; outputs its 18 stage maps."""
    if weights not in ("imagenet", "none") and not Path(weights).is_file():
        raise InputError(f"--weights {weights}: file not found")
    path = {"imagenet": EFFICIENTNET_LITE0_WEIGHTS, "none": None}.get(weights, weights)
    try:
        return efficientnet_lite.efficientnet_lite0(path, (CROP, CROP, 3))
    except (ValueError, OSError) as error:  # another network's file; not an HDF5 file
        raise InputError(f"--weights {weights}: not a weights file of {EFFICIENTNET_LITE0} "
                         f"({str(error).splitlines()[0][:200]})") from None


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


def full_network(name, weights="imagenet"):
    """The Full-Network Embedding's raw features of a backbone: every
    stage's output spatially averaged, concatenated.

    Args:
      name: "efficientnet-lite0" (the stem, the 16 blocks and the head, as
        the embedded `stages.json`) or a VGG key of `BACKBONES` (every
        convolution, then fc1 and fc2).
      weights: as `build_backbone`'s.

    Returns:
      (model, preprocess, layout, ims): the model maps preprocessed crops
      to [B, F], `preprocess` as `build_backbone`'s; layout is
      [{"name", "dim"}] per layer, in that order; `ims` is the slice of F
      that is the backbone's usual feature (`build_backbone`'s).
    """
    if name == EFFICIENTNET_LITE0:
        stages = efficientnet_lite_stages(weights)
        means = [keras.layers.GlobalAveragePooling2D(name=f"{stage}_mean")(output)
                 for stage, output in zip(efficientnet_lite.stage_names(), stages.output)]
        layout = [{"name": stage, "dim": int(output.shape[-1])}
                  for stage, output in zip(efficientnet_lite.stage_names(), stages.output)]
        head = layout[-1]["dim"]
        total = sum(entry["dim"] for entry in layout)
        model = keras.Model(stages.input, keras.layers.Concatenate()(means))
        return model, _scale_efficientnet_lite, layout, slice(total - head, total)
    if name not in ("vgg16", "vgg19"):
        raise InputError(f"--stages needs a backbone with stages: {EFFICIENTNET_LITE0}, vgg16 or vgg19; got {name}")
    features_model, preprocess = build_backbone(name, weights)
    feature_layer = BACKBONES[name].feature_layer
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
    layout = [{"name": layer.name, "dim": int(layer.output.shape[-1])} for layer in layers]
    position = [entry["name"] for entry in layout].index(feature_layer)
    start = sum(entry["dim"] for entry in layout[:position])
    return model, preprocess, layout, slice(start, start + layout[position]["dim"])


def decode_image(contents, size):
    """Decodes one encoded image (JPEG, PNG, GIF or BMP bytes) as float32
    RGB [size, size, 3] in [0, 255] (graph-safe; a corrupt or non-image
    input fails with TensorFlow's InvalidArgumentError)."""
    # JPEGs by libjpeg's accurate integer DCT, as PIL decodes them (and as
    # the embedded features were made): TensorFlow's default fast DCT moves
    # EfficientNet-Lite0's features by 8%.
    image = tf.cond(
        tf.io.is_jpeg(contents),
        lambda: tf.io.decode_jpeg(contents, channels=3, dct_method="INTEGER_ACCURATE"),
        lambda: tf.io.decode_image(contents, channels=3, expand_animations=False),
    )
    # Antialiasing keeps downscaled photos from aliasing, as PIL's resize does.
    return tf.image.resize(image, (size, size), antialias=True)


def load_image(path, size):
    """Reads an image file as float32 RGB [size, size, 3] in [0, 255] (graph-safe)."""
    return decode_image(tf.io.read_file(path), size)


def views(images, crops):
    """The views of each image whose features are averaged.

    Args:
      images: [B, H, W, C], resized to 224x224 (1 or 2 views) or 256x256
        (10 views).
      crops: 1 (the image), 2 (the image and its horizontal mirror) or 10
        (`ten_crops`).

    Returns:
      [B, crops, 224, 224, C].
    """
    if crops == 10:
        return ten_crops(images, CROP)
    if crops == 2:
        return tf.stack([images, tf.reverse(images, axis=[2])], axis=1)
    return images[:, None]


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
        # Traced once for all batches and splits (tracing ResNet-152 takes seconds).
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
        return tf.cond(tf.size(contents) > 0, lambda: self._encode_batch(images),
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


def from_provenance(recorded, image_features="ims"):
    """The extractor that makes a folder's features again from images.

    Args:
      recorded: a provenance (`data.provenance`) of features made by
        `data.extract_features` or of the embedded ones.
      image_features: the features a model reads: "ims", "stages" or both
        joined by "+" (their columns side by side, in that order).

    Returns:
      A `FeatureExtractor`, or None when the provenance names no backbone
      this module can rebuild (a TF Hub handle that is not a local
      directory, which would need the network at every export) or the
      features are not ones it makes.
    """
    backbone = recorded["backbone"]
    kinds = image_features.split("+")
    if not set(kinds) <= {"ims", "stages"}:
        return None
    if backbone.startswith(TFHUB_PREFIX):
        if "stages" in kinds or not Path(backbone[len(TFHUB_PREFIX):]).is_dir():
            return None
    elif backbone not in (*BACKBONES, EFFICIENTNET_LITE0) or ("stages" in kinds and "stages" not in recorded):
        return None
    if "stages" not in kinds:
        model, preprocess = build_backbone(backbone, recorded["weights"])
        return FeatureExtractor(model, preprocess, recorded["crops"])
    full, preprocess, _, ims = full_network(backbone, recorded["weights"])
    parts = [full.output[:, ims] if kind == "ims" else full.output for kind in kinds]
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

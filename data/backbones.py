"""The backbones of `python -m data.extract_features`, by name: the
embedded features' EfficientNet-Lite0 (`data.efficientnet_lite`, with its
shipped ImageNet weights), `keras.applications` networks (`BACKBONES`) and
TF Hub modules ("tfhub:" and a handle); `build_backbone` makes one's
feature extractor, `efficientnet_lite_stages` EfficientNet-Lite0's stage
maps, `hub_backbone` a TF Hub module's function of images.
"""

import dataclasses
import os
from pathlib import Path

import keras
import tensorflow as tf

from common.errors import InputError, error_reason
from data import efficientnet_lite
from data.image_decoding import CROP


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
        return keras.Model(stages.input, head_mean), scale_efficientnet_lite
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


def scale_efficientnet_lite(images):
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
        reason = error_reason(error, limit=300)
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
                         f"float32 images ({error_reason(error, limit=300)})") from None
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

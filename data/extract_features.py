"""Extracts CNN image features into the VSE++ precomp layout.

    python -m data.extract_features --images DIR --flickr-text DIR --out DIR
    python -m data.extract_features --images DIR --karpathy dataset_coco.json --out DIR
        [--splits train,dev,test] [--backbone resnet152|vgg16|vgg19|tfhub:HANDLE] [--crops 10|1]
        [--weights imagenet|none|PATH] [--batch-size 16] [--stages]

The captions and the split of each image come from the Flickr8k text release
(`--flickr-text`) or from Karpathy's JSON (`--karpathy`; Flickr8k, Flickr30k
or COCO, whose file names include `train2014/` or `val2014/`); image files are
looked up relative to `--images`. Each split is written to `--out` as
`{split}_ims.npy` (one float32 row per image), `{split}_caps.txt` and
`{split}_ids.txt`, which `train.py --data` reads.

Features, as in the papers: ResNet-152's global average pool (2048-d) or
VGG's fc7, the `fc2` layer (4096-d), with each backbone's own ImageNet
preprocessing. With 10 crops (the default, the papers' protocol) each image
is resized to 256x256 and the features of the 224x224 crops at its four
corners and centre, and of their horizontal mirrors, are averaged; with 1
crop the whole image is resized to 224x224. The aspect ratio is not kept.

`--backbone tfhub:HANDLE` runs a TensorFlow Hub image feature-vector
module instead: a tfhub.dev / Kaggle Models handle (downloaded by
`tensorflow_hub` into $TFHUB_CACHE_DIR) or the path of a module directory
(a TF2 SavedModel, or a TF1 Hub module with an "image_feature_vector" or
"default" signature). As the Hub convention for such modules, it reads RGB
scaled to [0, 1] and returns [B, F] features; the crops are the same 224x224
views as above. The module is probed once on a blank image before any image
is read: a module whose signature fixes its input size (e.g. 299x299 for
Inception) gets each 224x224 crop resized to that size (bilinear,
antialiased); a module that does not return [B, F] vectors (feature maps
[B, H, W, C], say) is refused in one line naming its output shape.

With `--stages` (VGG backbones) the raw material of a Full-Network Embedding
(Garcia-Gasulla et al. 2018; Vilalta et al. 2018, Sec. 3.1) is written too:
`{split}_stages.npy`, the spatial average of every convolutional layer's
output and the fully connected fc1 and fc2 outputs, concatenated (VGG16:
13 convolutions + 2 FC layers = 12,416 values), averaged over the crops,
and `stages.json`, the layers and their sizes in that order. `train.py
--image-features fne` standardises and discretises them in the model.

Keras downloads the ImageNet weights on first use into ~/.keras/models/
($KERAS_HOME/models/ if set); offline, put the file named in the error
message there, or pass its path as --weights PATH.
"""

import argparse
import dataclasses
import json
import logging
import os
import sys
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from common import files, progress
from common.errors import InputError, run_command
from data import readers

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


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", required=True, help="folder of the image files")
    parser.add_argument("--out", required=True, help="output folder (precomp layout)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--flickr-text", help="folder of the Flickr8k text release (Flickr8k.token.txt + split files)")
    source.add_argument("--karpathy", help="Karpathy's dataset_{flickr8k,flickr30k,coco}.json")
    parser.add_argument("--splits", default="train,dev,test", help="comma-separated splits to extract")
    parser.add_argument("--backbone", default="resnet152", type=_backbone,
                        help=f"{', '.join(sorted(BACKBONES))}, or {TFHUB_PREFIX}HANDLE_OR_PATH (default: %(default)s)")
    parser.add_argument("--crops", type=int, default=10, choices=(1, 10), help="10: the papers' 10-crop average")
    parser.add_argument("--weights", default="imagenet", help="imagenet, none (random, for tests) or a weights file")
    parser.add_argument("--batch-size", type=_positive_int, default=16, help="images per forward pass")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (there is none when stderr is not a terminal)")
    parser.add_argument("--stages", action="store_true",
                        help="also write every layer's features ({split}_stages.npy, stages.json) for the Full-Network Embedding")
    return parser.parse_args(argv)


def _backbone(text):
    if text in BACKBONES or (text.startswith(TFHUB_PREFIX) and len(text) > len(TFHUB_PREFIX)):
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: choose {', '.join(sorted(BACKBONES))} or {TFHUB_PREFIX}HANDLE")


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    images = Path(args.images)
    if not images.is_dir():
        raise InputError(f"--images {images}: folder not found")
    files.check_output_dir(args.out, "--out")
    # Every split is checked before the (slow) network is built.
    splits = {}
    for split in args.splits.split(","):
        if args.flickr_text:
            data = readers.read_flickr_text(args.flickr_text, split)
        else:
            data = readers.read_karpathy_json(args.karpathy, split)
        if not data.image_files:
            raise InputError(f"{args.flickr_text or args.karpathy}: split {split} has no images")
        missing = next((name for name in data.image_files if not (images / name).is_file()), None)
        if missing is not None:
            raise InputError(f"{images / missing}: image of split {split} not found")
        splits[split] = data
    if args.stages and args.backbone not in ("vgg16", "vgg19"):
        raise InputError("--stages needs a VGG backbone (convolutions followed by fc1, fc2): --backbone vgg16 or vgg19")
    model, preprocess = build_backbone(args.backbone, args.weights)
    layout = None
    if args.stages:
        feature_layer = BACKBONES[args.backbone].feature_layer
        model, layout = full_network(model, feature_layer)
        # The usual features ({split}_ims.npy) are the feature layer's block.
        position = [entry["name"] for entry in layout].index(feature_layer)
        start = sum(entry["dim"] for entry in layout[:position])
        feature_slice = slice(start, start + layout[position]["dim"])
    extract = FeatureExtractor(model, preprocess, args.crops)
    for split, data in splits.items():
        log.info("%s: %d images, %s, %d crop(s)", split, len(data.image_files), args.backbone, args.crops)
        paths = [images / name for name in data.image_files]
        features = extract(paths, args.batch_size)
        if layout is not None:
            readers.write_image_features(args.out, split, "stages", features, data.image_files)
            features = features[:, feature_slice]
        readers.write_precomp(args.out, split, features, data)
        log.info("%s: wrote %s features to %s", split, features.shape, args.out)
    if layout is not None:
        text = json.dumps({"backbone": f"{args.backbone} ({args.weights})", "layers": layout}, indent=1)
        files.atomic_write(Path(args.out) / "stages.json", lambda f: f.write(text.encode("utf-8")))
    return 0


if __name__ == "__main__":
    sys.exit(main())

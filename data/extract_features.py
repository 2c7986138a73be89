"""Extracts CNN image features into the VSE++ precomp layout.

    python -m data.extract_features --images DIR --flickr-text DIR --out DIR
    python -m data.extract_features --images DIR --karpathy dataset_coco.json --out DIR \\
        [--backbone resnet152|vgg16|vgg19] [--crops 10|1] [--weights imagenet|none|PATH]

Features, as in the papers: ResNet-152's global-average-pooled last block
(2048-d) or VGG's fc7 (the `fc2` layer, 4096-d). With 10 crops (the
default) each image is resized to 256x256 and the features of the 224x224
crops at its four corners and centre, and of their mirror images, are
averaged; with 1 crop the image is resized to 224x224.

Keras downloads the ImageNet weights on first use into ~/.keras/models/;
without internet access, put the file there or pass --weights PATH.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

from data import readers
from data.errors import InputError

CROP, RESIZE = 224, 256
WEIGHTS_URL = "https://storage.googleapis.com/tensorflow/keras-applications/"


def _backbones():
    import keras

    apps = keras.applications
    # name -> (constructor, preprocess, constructor kwargs, feature layer or None, ImageNet weights file)
    return {
        "resnet152": (apps.ResNet152, apps.resnet.preprocess_input, {"include_top": False, "pooling": "avg"}, None,
                      "resnet/resnet152_weights_tf_dim_ordering_tf_kernels_notop.h5"),
        "vgg16": (apps.VGG16, apps.vgg16.preprocess_input, {"include_top": True}, "fc2",
                  "vgg16/vgg16_weights_tf_dim_ordering_tf_kernels.h5"),
        "vgg19": (apps.VGG19, apps.vgg19.preprocess_input, {"include_top": True}, "fc2",
                  "vgg19/vgg19_weights_tf_dim_ordering_tf_kernels.h5"),
    }


def build_extractor(backbone, weights="imagenet"):
    """A Keras model mapping preprocessed 224x224 crops to feature vectors.

    Returns:
      (model, preprocess_input).
    """
    import keras

    constructor, preprocess, kwargs, layer, weights_file = _backbones()[backbone]
    try:
        model = constructor(weights="imagenet" if weights == "imagenet" else None,
                            input_shape=(CROP, CROP, 3), **kwargs)
    except Exception as error:  # Keras raises a bare Exception on download failure.
        if "URL fetch failure" not in str(error):
            raise
        file_name = Path(weights_file).name
        raise InputError(
            f"cannot download the ImageNet weights of {backbone} ({WEIGHTS_URL}{weights_file}); "
            f"put {file_name} in {Path.home() / '.keras' / 'models'}/ or pass --weights PATH"
        ) from None
    if weights not in ("imagenet", "none"):
        try:
            model.load_weights(weights)
        except (OSError, ValueError) as error:
            raise InputError(f"--weights {weights}: cannot load {backbone} weights ({str(error).splitlines()[0]})") from None
    if layer is not None:
        model = keras.Model(model.input, model.get_layer(layer).output)
    return model, preprocess


def crops(image, n_crops):
    """The crops of one image: float [H, W, 3] -> [n_crops, 224, 224, 3].

    10 crops: resized to 256x256, the 224x224 top-left, top-right,
    bottom-left, bottom-right and centre crops, then their horizontal
    mirrors. 1 crop: the image resized to 224x224.
    """
    import tensorflow as tf

    if n_crops == 1:
        return tf.image.resize(image, (CROP, CROP))[None]
    resized = tf.image.resize(image, (RESIZE, RESIZE))
    far, centre = RESIZE - CROP, (RESIZE - CROP) // 2
    corners = [(0, 0), (0, far), (far, 0), (far, far), (centre, centre)]
    five = tf.stack([resized[y : y + CROP, x : x + CROP] for y, x in corners])
    return tf.concat([five, tf.reverse(five, axis=[2])], axis=0)


def read_image(path):
    import tensorflow as tf

    try:
        image = tf.io.decode_image(tf.io.read_file(str(path)), channels=3, expand_animations=False)
    except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError) as error:
        raise InputError(f"{path}: unreadable image ({error.message.strip().splitlines()[0]})") from None
    return tf.cast(image, tf.float32)


def extract(model, preprocess, paths, n_crops, batch_size):
    """Features of the images at `paths`, averaged over their crops: [n, D]."""
    import tensorflow as tf

    features = []
    for start in range(0, len(paths), batch_size):
        batch = tf.concat([crops(read_image(p), n_crops) for p in paths[start : start + batch_size]], axis=0)
        out = model.predict_on_batch(preprocess(batch.numpy()))
        features.append(np.asarray(out).reshape(-1, n_crops, out.shape[-1]).mean(axis=1))
    return np.concatenate(features).astype(np.float32)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", required=True, help="folder holding the image files")
    parser.add_argument("--out", required=True, help="output folder (precomp layout)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--flickr-text", help="folder of the Flickr8k text release (Flickr8k.token.txt + split files)")
    source.add_argument("--karpathy", help="Karpathy's dataset_{flickr8k,flickr30k,coco}.json")
    parser.add_argument("--splits", default="train,dev,test")
    parser.add_argument("--backbone", default="resnet152", choices=("resnet152", "vgg16", "vgg19"))
    parser.add_argument("--crops", type=int, default=10, choices=(1, 10))
    parser.add_argument("--weights", default="imagenet", help="imagenet, none (random, for tests) or a weights file")
    parser.add_argument("--batch-size", type=int, default=32, help="images per forward pass")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        images = Path(args.images)
        if not images.is_dir():
            raise InputError(f"--images {images}: folder not found")
        splits = {}
        for split in args.splits.split(","):
            if args.flickr_text:
                data = readers.read_flickr_text(args.flickr_text, split)
            else:
                data = readers.read_karpathy_json(args.karpathy, split)
            missing = next((f for f in data.image_files if not (images / f).is_file()), None)
            if missing is not None:
                raise InputError(f"{images}: image {missing} of split {split} is missing")
            splits[split] = data
        model, preprocess = build_extractor(args.backbone, args.weights)
        for split, data in splits.items():
            paths = [images / f for f in data.image_files]
            features = extract(model, preprocess, paths, args.crops, args.batch_size)
            readers.write_precomp(args.out, split, features, data)
            print(f"{split}: {features.shape[0]} images, {features.shape[1]}-d features -> {args.out}")
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

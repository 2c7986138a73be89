"""Which data an experiment reads (`DataConfig`) and one split of it,
whatever the folder's layout (`load_split`)."""

import dataclasses
from pathlib import Path

import numpy as np

from common.errors import InputError
from data import collections, readers
from data.embedded import EMBEDDED_DATA


@dataclasses.dataclass
class DataConfig:
    """Where the data is.

    Attributes:
      path: a folder in the VSE++ precomp layout or of bigfile collections
        (see `load_split`); defaults to the embedded Flickr8k features.
      image_features: the image (or video) feature name: `{split}_<name>.npy`
        in the precomp layout, `<split>/FeatureData/<name>/` for
        collections; "a+b" concatenates the features a and b of each item
        (e.g. a video's visual and audio features). "ims" and "stages" are
        the files of the kinds `fc` and `fne` (`models.registry.FEATURE_NAMES`).
      train_split / dev_split / test_split: the splits used for training,
        model selection and the final report (file prefixes, or collection
        names such as msrvtt10ktrain).
    """

    path: str = EMBEDDED_DATA
    image_features: str = "ims"
    train_split: str = "train"
    dev_split: str = "dev"
    test_split: str = "test"


def load_split(root, split, image_features="ims"):
    """Reads one split of a dataset folder, whatever its layout.

    Args:
      root: a folder in the precomp layout, or holding collections
        (`<root>/<split>/TextData/` exists).
      split: the file prefix or collection name.
      image_features: the feature name; "a+b" concatenates each item's
        features a and b (e.g. a video's visual and audio features).

    Returns:
      A `RetrievalSplit`.
    """
    root = Path(root)
    if (root / split / "TextData").is_dir():
        read = collections.load_collection
    else:
        read = readers.load_precomp
    names = image_features.split("+")
    if not all(names):
        raise InputError(f"image features {image_features!r}: expected a name or names joined by '+'")
    parts = [read(root, split, name) for name in names]
    if len(parts) == 1:
        return parts[0]
    return dataclasses.replace(parts[0], images=np.concatenate([part.images for part in parts], axis=1))


def feature_files(root, split, image_features="ims"):
    """The file a user must fix when a split's features are wrong: for each
    name of `image_features` ("a+b": two), `<root>/<split>_<name>.npy` in the
    precomp layout, the bigfile folder `<root>/<split>/FeatureData/<name>`
    for a collection (as `load_split` reads them)."""
    root = Path(root)
    names = image_features.split("+")
    if (root / split / "TextData").is_dir():
        return [root / split / "FeatureData" / name for name in names]
    return [root / f"{split}_{name}.npy" for name in names]


def features_location(root, split, image_features="ims"):
    """`feature_files` as one string for messages ("a + b" for two)."""
    return " + ".join(str(path) for path in feature_files(root, split, image_features))


def check_image_dim(split, image_dim, path, expected_from=None):
    """Fails unless the features of `split` have the model's dimension.

    `path` names them in the error: the feature file or folder the user
    must fix, `features_location(root, split_name, image_features)`;
    `expected_from`, if given, names where `image_dim` comes from (the
    training split's features)."""
    if split.images.shape[1] != image_dim:
        source = f" (the dimension of {expected_from})" if expected_from else ""
        raise InputError(
            f"{path}: image features have dimension {split.images.shape[1]}, the model expects {image_dim}{source}"
        )


def load_experiment_splits(data, max_train_images=None, validate_max_images=None):
    """The train, dev and test splits of a `DataConfig`, read and checked
    (every split's features of the training features' dimension; a split
    of another dimension is an `InputError` naming its feature file).

    Args:
      data: a `DataConfig`.
      max_train_images, validate_max_images: keep only the first N images
        (and their captions) of the train and dev splits (None = all).

    Returns:
      (train, dev, test) `RetrievalSplit`s.
    """
    train = load_split(data.path, data.train_split, data.image_features)
    if max_train_images:
        train = train.first_images(max_train_images)
    dev = load_split(data.path, data.dev_split, data.image_features)
    if validate_max_images:
        dev = dev.first_images(validate_max_images)
    test = load_split(data.path, data.test_split, data.image_features)
    for name, split in ((data.dev_split, dev), (data.test_split, test)):
        check_image_dim(split, train.images.shape[1], features_location(data.path, name, data.image_features),
                        features_location(data.path, data.train_split, data.image_features))
    return train, dev, test

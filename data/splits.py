"""Which data an experiment reads (`DataConfig`) and one split of it,
whatever the folder's layout (`load_split`)."""

import dataclasses
from pathlib import Path

import numpy as np

from common.errors import InputError
from data import collections, readers
from data.embedded import EMBEDDED_DATA
from data.image_features import file_stems, kind_name


@dataclasses.dataclass
class DataConfig:
    """Where the data is.

    Attributes:
      path: a folder in the VSE++ precomp layout or of bigfile collections
        (see `load_split`); defaults to the embedded Flickr8k features.
      image_features: the kind of image (or video) features, a kind of
        `data.image_features` ("fc", "fne", "a+b" for both side by side)
        or a collection's own feature name.
      train_split / dev_split / test_split: the splits used for training,
        model selection and the final report (file prefixes, or collection
        names such as msrvtt10ktrain).
    """

    path: str = EMBEDDED_DATA
    image_features: str = "fc"
    train_split: str = "train"
    dev_split: str = "dev"
    test_split: str = "test"

    def __post_init__(self):
        # The old names "ims" and "stages" (runs written before `data.image_features`) read as their kinds.
        self.image_features = kind_name(self.image_features)


def load_split(root, split, image_features="fc"):
    """Reads one split of a dataset folder, whatever its layout.

    Args:
      root: a folder in the precomp layout, or holding collections
        (`<root>/<split>/TextData/` exists).
      split: the file prefix or collection name.
      image_features: the kind of features (`data.image_features`); "a+b"
        concatenates each item's features a and b (e.g. a video's visual
        and audio features).

    Returns:
      A `RetrievalSplit`.
    """
    root = Path(root)
    if (root / split / "TextData").is_dir():
        read = collections.load_collection
    else:
        read = readers.load_precomp
    parts = [read(root, split, name) for name in file_stems(image_features)]
    if len(parts) == 1:
        return parts[0]
    return dataclasses.replace(parts[0], images=np.concatenate([part.images for part in parts], axis=1))


def feature_files(root, split, image_features="fc"):
    """The file a user must fix when a split's features are wrong: for each
    part of the kind `image_features` ("a+b": two), `<root>/<split>_<stem>.npy`
    in the precomp layout, the bigfile folder `<root>/<split>/FeatureData/<name>`
    for a collection (as `load_split` reads them)."""
    root = Path(root)
    names = file_stems(image_features)
    if (root / split / "TextData").is_dir():
        return [root / split / "FeatureData" / name for name in names]
    return [root / f"{split}_{name}.npy" for name in names]


def features_location(root, split, image_features="fc"):
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

"""`data.splits`: the train, dev and test splits of an experiment's data
(`load_experiment_splits`), on hand-built precomp folders."""

from pathlib import Path

import numpy as np
import pytest

from common.errors import InputError
from data import splits

SIZES = {"train": 4, "dev": 3, "test": 2}


def write_precomp(root, name, n_images, dim=3, features="ims"):
    """`{name}_{features}.npy` (row i = [i, i, ...] + 100 for dev, 200 for
    test) and 5 captions an image, "<name> <k> of <i>", in image order."""
    offset = {"train": 0, "dev": 100, "test": 200}.get(name, 300)
    rows = np.arange(n_images, dtype=np.float32)[:, None] + offset
    np.save(root / f"{name}_{features}.npy", np.repeat(rows, dim, axis=1))
    (root / f"{name}_caps.txt").write_text("".join(f"{name} {k} of {i}\n" for i in range(n_images) for k in range(5)))


@pytest.fixture
def data(tmp_path):
    for name, n in SIZES.items():
        write_precomp(tmp_path, name, n)
    return splits.DataConfig(path=str(tmp_path))


def captions(name, images):
    return [f"{name} {k} of {i}" for i in images for k in range(5)]


def test_every_split_whole_by_default(data):
    train, dev, test = splits.load_experiment_splits(data)
    assert train.captions == captions("train", range(4)) and train.images.shape == (4, 3)
    assert dev.captions == captions("dev", range(3)) and dev.images.shape == (3, 3)
    assert test.captions == captions("test", range(2)) and test.images.shape == (2, 3)
    np.testing.assert_array_equal(dev.images[:, 0], [100, 101, 102])


def test_max_train_images_and_validate_max_images_cut_train_and_dev_only(data):
    train, dev, test = splits.load_experiment_splits(data, max_train_images=2, validate_max_images=1)
    np.testing.assert_array_equal(train.images, [[0, 0, 0], [1, 1, 1]])
    assert train.captions == captions("train", [0, 1])
    np.testing.assert_array_equal(train.caption_image, [0] * 5 + [1] * 5)
    np.testing.assert_array_equal(dev.images, [[100, 100, 100]])
    assert dev.captions == captions("dev", [0]) and list(dev.caption_image) == [0] * 5
    # The final test is always complete.
    assert test.captions == captions("test", range(2)) and test.images.shape == (2, 3)
    # Each cut alone.
    train, dev, _ = splits.load_experiment_splits(data, max_train_images=3)
    assert len(train.images) == 3 and len(train.captions) == 15 and len(dev.images) == 3
    train, dev, _ = splits.load_experiment_splits(data, validate_max_images=2)
    assert len(train.images) == 4 and dev.captions == captions("dev", [0, 1])


def test_the_configs_split_names_and_features_are_read(tmp_path):
    for name, n in (("tr", 3), ("va", 2), ("te", 2)):
        write_precomp(tmp_path, name, n, dim=5, features="feat")
    config = splits.DataConfig(path=str(tmp_path), image_features="feat", train_split="tr", dev_split="va",
                               test_split="te")
    train, dev, test = splits.load_experiment_splits(config)
    assert train.captions == captions("tr", range(3)) and dev.captions == captions("va", range(2))
    assert test.captions == captions("te", range(2)) and test.images.shape == (2, 5)


@pytest.mark.parametrize("split", ["dev", "test"])
def test_a_split_of_another_feature_dimension_names_its_feature_file(data, split):
    write_precomp(Path(data.path), split, SIZES[split], dim=4)
    with pytest.raises(InputError) as error:
        splits.load_experiment_splits(data)
    root = Path(data.path)
    assert str(error.value) == (
        f"{root / f'{split}_ims.npy'}: image features have dimension 4, the model expects 3 "
        f"(the dimension of {root / 'train_ims.npy'})"
    )


def test_a_collection_of_another_feature_dimension_names_its_feature_folder(tmp_path):
    """Collections: the bigfile folder `<root>/<collection>/FeatureData/<feature>`
    is named, and with two features ("a+b") both folders."""
    from data import collections

    for name, dims in (("tr", (2, 3)), ("va", (2, 4)), ("te", (2, 3))):
        items = [f"{name}{i}" for i in range(2)]
        for feature, dim in zip(("a", "b"), dims):
            collections.write_collection(tmp_path, name, feature, items, np.ones((2, dim)),
                                         [(item, f"caption of {item}") for item in items])
    config = splits.DataConfig(path=str(tmp_path), image_features="a+b", train_split="tr", dev_split="va",
                               test_split="te")
    with pytest.raises(InputError) as error:
        splits.load_experiment_splits(config)
    folders = " + ".join(str(tmp_path / "va" / "FeatureData" / f) for f in ("a", "b"))
    train_folders = " + ".join(str(tmp_path / "tr" / "FeatureData" / f) for f in ("a", "b"))
    assert str(error.value) == (
        f"{folders}: image features have dimension 6, the model expects 5 (the dimension of {train_folders})"
    )


def test_feature_files_of_each_layout(tmp_path):
    (tmp_path / "clips" / "TextData").mkdir(parents=True)
    assert splits.feature_files(tmp_path, "dev", "ims") == [tmp_path / "dev_ims.npy"]
    assert splits.feature_files(tmp_path, "clips", "x+y") == [tmp_path / "clips" / "FeatureData" / "x",
                                                             tmp_path / "clips" / "FeatureData" / "y"]


def test_a_missing_split_is_an_input_error_naming_its_file(data):
    (Path(data.path) / "dev_caps.txt").unlink()
    with pytest.raises(InputError, match="dev_caps.txt"):
        splits.load_experiment_splits(data)

"""Tests of `data.feature_extractor`: features averaged over each image's
views in file order, from files and from encoded bytes alike, an
unreadable file named, and the extractor rebuilt from a recorded
provenance (or None where it cannot be)."""

import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from common.errors import InputError
from data import feature_extractor, image_decoding, provenance
from tests.helpers import EMBEDDED_IMAGES

IMAGES = sorted(EMBEDDED_IMAGES.glob("*.jpg"))[:3]
CORNERS_AND_CENTRE = [(0, 0), (0, 32), (32, 0), (32, 32), (16, 16)]  # of 224x224 crops of a 256x256 image


def mean_colour_model():
    """A backbone whose feature is the mean colour of each crop."""
    inputs = keras.Input((224, 224, 3))
    return keras.Model(inputs, keras.layers.GlobalAveragePooling2D()(inputs))


@pytest.mark.parametrize("crops", [1, 10])
def test_features_are_averaged_over_crops_in_file_order(crops):
    # The expected features follow from the resized images by hand.
    features = feature_extractor.FeatureExtractor(mean_colour_model(), lambda x: x, crops)(IMAGES, batch_size=2)
    assert features.shape == (3, 3) and features.dtype == np.float32
    for row, path in enumerate(IMAGES):
        image = image_decoding.load_image(str(path), 256 if crops == 10 else 224).numpy()
        if crops == 1:
            expected = image.mean(axis=(0, 1))
        else:
            views = [image[y : y + 224, x : x + 224] for y, x in CORNERS_AND_CENTRE]
            expected = np.mean([view.mean(axis=(0, 1)) for view in views], axis=0)  # mirrors: same means
        np.testing.assert_allclose(features[row], expected, rtol=1e-5)


def test_two_views_average_the_image_and_its_mirror_through_the_preprocessing():
    # A backbone that sees the left half of each view: the mirror's left half is the image's right half.
    inputs = keras.Input((224, 224, 3))
    model = keras.Model(inputs, keras.layers.GlobalAveragePooling2D()(inputs[:, :, :112]))
    extractor = feature_extractor.FeatureExtractor(model, lambda x: x / 2, 2)
    features = extractor(IMAGES[:2], batch_size=1)
    for row, path in enumerate(IMAGES[:2]):
        image = image_decoding.load_image(str(path), 224).numpy() / 2
        expected = (image[:, :112].mean(axis=(0, 1)) + image[:, 112:].mean(axis=(0, 1))) / 2
        np.testing.assert_allclose(features[row], expected, rtol=1e-5)
    contents = tf.constant([path.read_bytes() for path in IMAGES[:2]])
    np.testing.assert_allclose(extractor.encode_bytes(contents).numpy(), features, rtol=1e-6)


def test_encoding_no_bytes_gives_no_features():
    extractor = feature_extractor.FeatureExtractor(mean_colour_model(), lambda x: x, 1)
    assert extractor.dim == 3
    empty = extractor.encode_bytes(tf.constant([], tf.string))
    assert empty.shape == (0, 3) and empty.dtype == tf.float32


def test_unreadable_images_are_named(tmp_path):
    paths = [tmp_path / name for name in ("a.jpg", "b.jpg", "c.jpg", "d.jpg")]
    for path, source in zip(paths, IMAGES * 2):
        shutil.copy(source, path)
    paths[3].write_bytes(b"not an image")
    with pytest.raises(InputError, match=r"d.jpg: not a readable image \(Unknown image file format"):
        feature_extractor.FeatureExtractor(mean_colour_model(), lambda x: x, 1)(paths, batch_size=2)


class _MeanColourTimesTwo(tf.Module):
    """A TF Hub-style feature-vector module: [B, H, W, 3] in [0, 1] -> twice the mean colour."""

    @tf.function(input_signature=[tf.TensorSpec([None, None, None, 3], tf.float32)])
    def __call__(self, images):
        return 2 * tf.reduce_mean(images, axis=[1, 2])


def test_from_provenance_rebuilds_a_local_tfhub_modules_extractor(tmp_path):
    tf.saved_model.save(_MeanColourTimesTwo(), str(tmp_path / "module"))
    recorded = provenance.describe(f"tfhub:{tmp_path / 'module'}", "imagenet", 1, stages=False)
    extractor = feature_extractor.from_provenance(recorded, "ims")
    assert extractor.crops == 1 and extractor.dim == 3
    # TF Hub's convention: images scaled to [0, 1]. The module's float32 mean of 50,176 pixels in TensorFlow's
    # summation order is within about 1e-4 of the float64 mean.
    expected = [2 * image_decoding.load_image(str(path), 224).numpy().astype(np.float64).mean(axis=(0, 1)) / 255
                for path in IMAGES]
    np.testing.assert_allclose(extractor(IMAGES, batch_size=2), expected, rtol=5e-4)


@pytest.mark.parametrize("backbone, stages, kinds", [
    ("resnet152", False, "stages"),  # per-stage features the folder does not have
    ("vgg16", True, "audio"),  # a kind of features the extractor does not make
    ("vgg16", True, "ims+audio"),
    ("tfhub:https://tfhub.dev/google/x/feature_vector/2", False, "ims"),  # the network at every export
    ("tfhub:{tmp}", False, "stages"),  # a TF Hub module has no stages
    ("tfhub:{tmp}/missing", False, "ims"),
    ("alexnet", False, "ims"),
])
def test_from_provenance_is_none_for_what_it_cannot_rebuild(tmp_path, backbone, stages, kinds):
    recorded = provenance.describe("resnet152" if backbone == "alexnet" else backbone.format(tmp=tmp_path), "none",
                                   1, stages)
    recorded["backbone"] = backbone.format(tmp=tmp_path)
    assert feature_extractor.from_provenance(recorded, kinds) is None

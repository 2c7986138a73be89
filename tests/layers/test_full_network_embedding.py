import numpy as np
import pytest
import tensorflow as tf
from sklearn.preprocessing import StandardScaler

from data import readers
from layers.full_network_embedding import FullNetworkEmbedding
from tests.helpers import EMBEDDED_DATA, run_layer_test

RNG = np.random.default_rng(0)


def numpy_fne(features, mean, std):
    """Standardise with the given statistics, then threshold at -0.25 / 0.15."""
    z = (features - mean) / std
    return np.select([z < -0.25, z > 0.15], [-1.0, 1.0], 0.0)


def test_layer_contract():
    features = tf.constant(RNG.normal(size=(4, 6)), tf.float32)
    output = run_layer_test(FullNetworkEmbedding, {}, features, expected_output_shape=(4, 6), input_gradients=False,
                            float32_layer=True)
    # Unfitted statistics (mean 0, std 1) threshold the raw values.
    np.testing.assert_array_equal(output, numpy_fne(features.numpy(), 0, 1))


def test_thresholds_are_strict_and_asymmetric():
    layer = FullNetworkEmbedding()
    z = np.array([[-0.26, -0.25, -0.1, 0.0, 0.15, 0.16]], np.float32)
    np.testing.assert_array_equal(layer(z), [[-1, 0, 0, 0, 0, 1]])


def test_statistics_come_from_the_training_images_only_real_stages():
    data = EMBEDDED_DATA
    train = readers.load_precomp(data, "train", "stages").images
    test = readers.load_precomp(data, "test", "stages").images
    layer = FullNetworkEmbedding()
    layer.adapt(train)
    train64 = train.astype(np.float64)
    mean, std = train64.mean(axis=0), train64.std(axis=0)
    np.testing.assert_allclose(layer.mean, mean, rtol=1e-5, atol=1e-6)
    expected = numpy_fne(test.astype(np.float64), mean, np.where(std > 0, std, 1))
    got = layer(test).numpy()
    # float32 vs float64 may flip the rare value sitting on a threshold.
    assert np.mean(got != expected) < 1e-4
    assert set(np.unique(got)) == {-1.0, 0.0, 1.0}
    # Fitting on the test images instead changes the embedding.
    other = FullNetworkEmbedding()
    other.adapt(test)
    assert np.mean(other(test).numpy() != got) > 0.01


def test_standardisation_is_scikit_learns_standard_scaler():
    """Per-feature mean and population standard deviation of the training
    images (few of them, so a sample deviation would differ by 15%); a
    feature of tiny spread is still standardised, a constant one divided
    by 1: as scikit-learn's StandardScaler."""
    train = RNG.normal(loc=2, scale=3, size=(4, 60))
    train[:, 0] = 5.0  # constant
    train[:, 1] = RNG.normal(scale=1e-4, size=4)  # tiny but non-zero spread
    test = RNG.normal(loc=2, scale=3, size=(30, 60))
    test[:, 1] = RNG.normal(scale=1e-4, size=30)
    layer = FullNetworkEmbedding()
    layer.adapt(train)
    z = StandardScaler().fit(train).transform(test)
    np.testing.assert_array_equal(layer(test.astype(np.float32)), numpy_fne(z, 0, 1))


def test_constant_features_map_to_zero():
    features = np.concatenate([RNG.normal(size=(10, 3)), np.full((10, 1), 7.0)], axis=1).astype(np.float32)
    layer = FullNetworkEmbedding()
    layer.adapt(features)
    assert np.all(layer(features).numpy()[:, 3] == 0)


def test_statistics_travel_with_a_saved_model(tmp_path):
    features = RNG.normal(loc=3, scale=2, size=(50, 6)).astype(np.float32)
    layer = FullNetworkEmbedding()
    layer.adapt(features)
    module = tf.Module()
    module.layer = layer
    module.embed = tf.function(layer.call, input_signature=[tf.TensorSpec([None, 6], tf.float32)])
    tf.saved_model.save(module, str(tmp_path / "fne"))
    loaded = tf.saved_model.load(str(tmp_path / "fne"))
    np.testing.assert_array_equal(loaded.embed(features[:7]), layer(features[:7]))


def test_thresholds_must_be_ordered():
    with pytest.raises(ValueError, match="negative_threshold < positive_threshold"):
        FullNetworkEmbedding(negative_threshold=0.2, positive_threshold=0.1)

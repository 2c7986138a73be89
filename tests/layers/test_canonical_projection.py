import numpy as np
import tensorflow as tf

from layers.canonical_projection import CanonicalProjection
from tests.helpers import run_layer_test

RNG = np.random.default_rng(0)


def test_layer_contract():
    run_layer_test(CanonicalProjection, {"input_dim": 5, "output_dim": 3},
                   tf.constant(RNG.normal(size=(4, 5)), tf.float32), expected_output_shape=(4, 3))


def test_centred_projection_scaled_by_correlations_then_unit_norm():
    mean, directions, r = RNG.normal(size=5), RNG.normal(size=(5, 3)), np.array([0.9, 0.5, 0.1])
    layer = CanonicalProjection(5, 3, power=2.0)
    layer.set_projection(mean, directions, r)
    x = RNG.normal(size=(4, 5)).astype(np.float32)
    expected = (x - mean) @ directions * r**2
    np.testing.assert_allclose(layer(x), expected / np.linalg.norm(expected, axis=1, keepdims=True), rtol=1e-5,
                               atol=1e-6)
    assert np.all(layer(np.tile(mean, (2, 1)).astype(np.float32)).numpy() == 0)

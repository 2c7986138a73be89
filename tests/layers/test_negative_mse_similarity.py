import numpy as np
import tensorflow as tf

from layers.negative_mse_similarity import NegativeMSESimilarity
from tests.helpers import run_layer_test


def test_layer_contract_and_values():
    rng = np.random.default_rng(0)
    images = tf.constant(rng.normal(size=(3, 8)), tf.float32)
    texts = tf.constant(rng.normal(size=(5, 8)), tf.float32)
    output = run_layer_test(NegativeMSESimilarity, {}, (images, texts), expected_output_shape=(3, 5),
                            float32_layer=True)
    expected = -np.mean((images.numpy()[:, None, :] - texts.numpy()[None, :, :]) ** 2, axis=-1)
    np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-5)


def test_equal_vectors_score_zero_the_maximum():
    x = tf.constant([[1.0, 2.0, 3.0], [0.5, 0.0, 1.0]])
    output = NegativeMSESimilarity()(x, x).numpy()
    np.testing.assert_array_equal(np.diag(output), [0.0, 0.0])
    assert (output <= 0).all()

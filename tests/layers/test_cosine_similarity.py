import numpy as np
import tensorflow as tf

from layers.cosine_similarity import CosineSimilarity
from tests.helpers import run_layer_test


def test_layer_contract_and_values():
    rng = np.random.default_rng(0)
    images = tf.constant(rng.normal(size=(3, 8)), tf.float32)
    texts = tf.constant(rng.normal(size=(5, 8)), tf.float32)
    output = run_layer_test(CosineSimilarity, {}, (images, texts), expected_output_shape=(3, 5),
                            float32_layer=True)
    expected = (images.numpy() / np.linalg.norm(images, axis=1, keepdims=True)) @ (
        texts.numpy() / np.linalg.norm(texts, axis=1, keepdims=True)).T
    np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-6)


def test_zero_vector_gives_zero_not_nan():
    output = CosineSimilarity()(tf.zeros([1, 4]), tf.ones([2, 4]))
    np.testing.assert_array_equal(output, np.zeros((1, 2)))

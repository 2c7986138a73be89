import numpy as np
import tensorflow as tf

from layers.dot_product_similarity import DotProductSimilarity
from tests.helpers import run_layer_test


def test_layer_contract_and_values():
    rng = np.random.default_rng(0)
    images = tf.constant(rng.normal(size=(3, 8)), tf.float32)
    texts = tf.constant(rng.normal(size=(5, 8)), tf.float32)
    output = run_layer_test(DotProductSimilarity, {}, (images, texts), expected_output_shape=(3, 5),
                            float32_layer=True)
    np.testing.assert_allclose(output, images.numpy() @ texts.numpy().T, rtol=1e-5, atol=1e-5)

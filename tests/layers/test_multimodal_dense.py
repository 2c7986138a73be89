import numpy as np
import tensorflow as tf

from layers.multimodal_dense import MultimodalDense
from tests.helpers import run_layer_test

RNG = np.random.default_rng(0)


def test_layer_contract():
    text, image = (tf.constant(RNG.normal(size=(3, n)), tf.float32) for n in (8, 5))
    run_layer_test(MultimodalDense, {"units": 4}, (text, image), expected_output_shape=(3, 4))


def test_factorised_layer_is_one_dense_relu_layer_on_image_then_sentence():
    text, image = (RNG.normal(size=(3, n)).astype(np.float32) for n in (8, 5))
    layer = MultimodalDense(4)
    output = layer(text, image)
    w = np.concatenate([layer.image_kernel.numpy(), layer.text_kernel.numpy()])
    expected = np.maximum(np.concatenate([image, text], axis=1) @ w + layer.bias.numpy(), 0)
    np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-6)
    all_pairs = layer.combine(layer.text_part(text)[None], layer.image_part(image)[:, None])  # built by the call
    np.testing.assert_allclose(np.diagonal(all_pairs, axis1=0, axis2=1).T, output, rtol=1e-6, atol=1e-6)

import numpy as np
import pytest
import tensorflow as tf

from layers.order_violation_similarity import OrderViolationSimilarity
from tests.helpers import run_layer_test

RNG = np.random.default_rng(0)


def numpy_order_similarity(images, texts):
    """Vilalta et al. eq. 3 for every pair, as printed: -||max(0, c - i)||^2."""
    return np.array([[-np.sum(np.maximum(0, c - i) ** 2) for c in texts] for i in images])


def test_layer_contract():
    images = tf.constant(RNG.normal(size=(3, 8)), tf.float32)
    texts = tf.constant(RNG.normal(size=(5, 8)), tf.float32)
    output = run_layer_test(OrderViolationSimilarity, {}, (images, texts), expected_output_shape=(3, 5),
                            float32_layer=True)
    np.testing.assert_allclose(output, numpy_order_similarity(images.numpy(), texts.numpy()), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n_images, n_texts", [(7, 11), (1, 1), (6, 6)])
def test_blocks_smaller_than_the_inputs_give_the_same_scores(n_images, n_texts):
    images = np.abs(RNG.normal(size=(n_images, 8))).astype(np.float32)
    texts = np.abs(RNG.normal(size=(n_texts, 8))).astype(np.float32)
    # 3 x 3 blocks: several blocks each way, ragged ends.
    layer = OrderViolationSimilarity(max_elements=9)
    np.testing.assert_allclose(layer(images, texts), numpy_order_similarity(images, texts), rtol=1e-5, atol=1e-6)


def test_gradients_through_blocks_are_the_equations():
    images = tf.constant(RNG.normal(size=(7, 8)), tf.float32)
    texts = tf.constant(RNG.normal(size=(5, 8)), tf.float32)
    weights = tf.constant(RNG.normal(size=(7, 5)), tf.float32)

    def gradients(layer):
        with tf.GradientTape() as tape:
            tape.watch([images, texts])
            loss = tf.reduce_sum(layer(images, texts) * weights)
        return tape.gradient(loss, [images, texts])

    # d/di of sum(W * S) = 2 sum_c W max(0, c - i); d/dc = -2 sum_i W max(0, c - i).
    violation = np.maximum(0, texts.numpy()[None] - images.numpy()[:, None])  # [7, 5, 8]
    expected = (2 * np.einsum("ic,icd->id", weights.numpy(), violation),
                -2 * np.einsum("ic,icd->cd", weights.numpy(), violation))
    for max_elements in (4, 2**20):  # 2 x 2 blocks, ragged; one block
        for got, want in zip(gradients(OrderViolationSimilarity(max_elements=max_elements)), expected):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_caption_below_image_in_every_coordinate_scores_zero():
    image = np.array([[1.0, 2.0, 3.0]], np.float32)
    texts = np.array([[0.5, 2.0, -1.0], [1.5, 2.0, 3.0]], np.float32)
    np.testing.assert_allclose(OrderViolationSimilarity()(image, texts), [[0.0, -0.25]])

import numpy as np
import tensorflow as tf

from layers.multimodal_conv1d import MultimodalConv1D
from tests.helpers import run_layer_test

RNG = np.random.default_rng(0)


def case(lengths, width=10, channels=4, image_dim=3):
    mask = np.arange(width)[None, :] < np.array(lengths)[:, None]
    inputs = RNG.normal(size=(len(lengths), width, channels)).astype(np.float32) * mask[..., None]
    images = RNG.uniform(size=(len(lengths), image_dim)).astype(np.float32)
    return inputs, tf.constant(mask), images


def test_layer_contract():
    inputs, mask, images = case([10, 3, 1])
    run_layer_test(MultimodalConv1D, {"filters": 5}, (tf.constant(inputs), mask, tf.constant(images)),
                   expected_output_shape=((3, 4, 5), (3, 4)))


def test_factorised_layer_equals_convolving_each_window_concatenated_with_the_image():
    lengths = [10, 5, 2, 1]
    inputs, mask, images = case(lengths)
    layer = MultimodalConv1D(6)
    layer(inputs, mask, images)  # builds the weights
    # A non-zero bias: a window of padding would give ReLU(b + I) without its gate.
    layer.bias.assign(RNG.normal(size=6).astype(np.float32))
    outputs, pooled_mask = layer(inputs, mask, images)
    w = np.concatenate([layer.text_kernel.numpy().reshape(12, 6), layer.image_kernel.numpy()])
    bias = layer.bias.numpy()
    for b, n in enumerate(lengths):
        # Eq. 5: the image in every window, zero-padded where the sentence
        # is; eq. 6: g = 0 for an all-zero window.
        windows = [np.concatenate([inputs[b, i : i + 3].reshape(-1), images[b] * (i < n)]) for i in range(8)]
        convolved = np.array([(np.any(x != 0)) * np.maximum(x @ w + bias, 0) for x in windows])
        np.testing.assert_allclose(outputs[b], np.maximum(convolved[0::2], convolved[1::2]), rtol=1e-5, atol=1e-5)
        valid = np.array([2 * i < n for i in range(4)])
        np.testing.assert_array_equal(pooled_mask[b], valid)
        assert np.all(outputs.numpy()[b][~valid] == 0)
    # The text part alone (an m-CNN's stored and exported text encoding) is
    # finite, 0 where gated.
    text, gate = layer.text_part(inputs, mask)
    np.testing.assert_array_equal(gate, pooled_mask)
    assert np.isfinite(text.numpy()).all() and np.all(text.numpy()[gate.numpy() == 0] == 0)


def test_all_pairs_by_broadcasting_equal_aligned_pairs():
    inputs, mask, images = case([10, 4, 1])
    layer = MultimodalConv1D(5)
    layer(inputs, mask, images)  # builds the weights
    text, gate = layer.text_part(inputs, mask)
    image = layer.image_part(images)
    all_pairs = layer.combine(text[None], gate[None], image[:, None])  # [images, texts, P, F]
    for i in range(3):
        aligned, _ = layer(inputs, mask, np.repeat(images[i : i + 1], 3, axis=0))
        np.testing.assert_allclose(all_pairs[i], aligned, rtol=1e-6, atol=1e-6)

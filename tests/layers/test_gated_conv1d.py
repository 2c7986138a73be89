import numpy as np
import tensorflow as tf

from layers.gated_conv1d import GatedConv1D
from tests.helpers import run_layer_test

RNG = np.random.default_rng(0)


def lengths_mask(lengths, width):
    return tf.constant(np.arange(width)[None, :] < np.array(lengths)[:, None])


def test_layer_contract():
    inputs = tf.constant(RNG.normal(size=(3, 10, 4)), tf.float32)
    run_layer_test(GatedConv1D, {"filters": 5}, (inputs, lengths_mask([10, 3, 1], 10)),
                   expected_output_shape=((3, 4, 5), (3, 4)))


def test_eqs_3_4_6_7_against_a_numpy_loop_and_gated_positions_are_exactly_zero():
    lengths = [9, 4, 1]
    inputs = RNG.normal(size=(3, 9, 4)).astype(np.float32)
    inputs *= (np.arange(9)[None, :] < np.array(lengths)[:, None])[..., None]  # padding is 0
    layer = GatedConv1D(6)
    layer(inputs, lengths_mask(lengths, 9))  # builds the weights
    # A non-zero bias: a window of padding would give ReLU(b) without its gate.
    layer.bias.assign(RNG.normal(size=6).astype(np.float32))
    outputs, mask = layer(inputs, lengths_mask(lengths, 9))
    kernel, bias = layer.kernel.numpy().reshape(12, 6), layer.bias.numpy()
    for b, n in enumerate(lengths):
        convolved = np.array([
            (i < n) * np.maximum(inputs[b, i : i + 3].reshape(-1) @ kernel + bias, 0) for i in range(7)
        ])
        pooled = np.maximum(convolved[0:6:2], convolved[1:6:2])
        np.testing.assert_allclose(outputs[b], pooled, rtol=1e-5, atol=1e-6)
        valid = [(2 * i < n) or (2 * i + 1 < n) for i in range(3)]
        np.testing.assert_array_equal(mask[b], valid)
        assert np.all(outputs.numpy()[b][~np.array(valid)] == 0)

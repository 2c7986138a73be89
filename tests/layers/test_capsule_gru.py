import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.capsule_gru import CapsuleGRU
from tests.helpers import run_layer_test

RNG = np.random.default_rng(0)
MASK = tf.constant([[True] * 5, [True, True, True, False, False], [True] * 4 + [False]])


def numpy_gru(kernel, recurrent_kernel, bias, sequence, valid, act):
    """Francis et al. eqs. 1-4 for one GRU, step by step; returns the state
    after the last valid step. kernel [F, 3U], recurrent_kernel [U, 3U],
    bias [3U], sequence [L, F], valid [L]."""
    sigmoid = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731
    units = recurrent_kernel.shape[0]
    w_z, w_r, w_h = np.split(kernel, 3, axis=1)
    u_z, u_r, u_h = np.split(recurrent_kernel, 3, axis=1)
    b_z, b_r, b_h = np.split(bias, 3)
    h = np.zeros(units)
    for x, is_word in zip(sequence, valid):
        if not is_word:
            continue
        z = sigmoid(x @ w_z + h @ u_z + b_z)  # (1)
        r = sigmoid(x @ w_r + h @ u_r + b_r)  # (2)
        candidate = act(x @ w_h + (r * h) @ u_h + b_h)  # (3)
        h = (1 - z) * h + z * candidate  # (4)
    return h


def with_random_bias(layer, inputs):
    layer(inputs)
    layer.bias.assign(RNG.normal(size=layer.bias.shape))
    return layer


@pytest.mark.parametrize("activation", ["tanh", "sigmoid"])
@pytest.mark.parametrize("per_capsule_inputs", [False, True])
def test_layer_contract_and_eqs_1_to_4_for_every_capsule(activation, per_capsule_inputs):
    shape = (3, 2, 5, 4) if per_capsule_inputs else (3, 5, 4)
    inputs = tf.constant(RNG.normal(size=shape), tf.float32)
    run_layer_test(CapsuleGRU, {"units": 6, "num_capsules": 2, "candidate_activation": activation},
                   (inputs, MASK), expected_output_shape=(3, 2, 6))

    layer = with_random_bias(CapsuleGRU(6, num_capsules=2, candidate_activation=activation), inputs)
    output = layer(inputs, MASK).numpy()
    act = np.tanh if activation == "tanh" else (lambda a: 1 / (1 + np.exp(-a)))
    for b in range(3):
        for n in range(2):
            sequence = inputs[b, n] if per_capsule_inputs else inputs[b]
            expected = numpy_gru(layer.kernel[n].numpy(), layer.recurrent_kernel[n].numpy(), layer.bias[n, 0].numpy(),
                                 sequence.numpy(), MASK[b].numpy(), act)
            np.testing.assert_allclose(output[b, n], expected, rtol=1e-5, atol=1e-6)


def test_sigmoid_gru_states_are_masks_in_0_1():
    layer = CapsuleGRU(32, num_capsules=3, candidate_activation="sigmoid")
    states = layer(tf.constant(RNG.normal(size=(8, 7, 5)), tf.float32)).numpy()
    assert states.min() > 0 and states.max() < 1
    # Saturated float32 sigmoids reach the ends, never beyond.
    states = layer(tf.constant(RNG.normal(scale=30, size=(8, 7, 5)), tf.float32)).numpy()
    assert states.min() >= 0 and states.max() <= 1


def test_equals_a_keras_gru_with_the_update_gate_relabelled():
    """Keras' reset-before GRU writes eq. 4 as h = z h_prev + (1 - z) h~,
    i.e. with 1 - z: negating the update gate's weights maps one onto the
    other (sigmoid(-a) = 1 - sigmoid(a))."""
    inputs = tf.constant(RNG.normal(size=(3, 5, 4)), tf.float32)
    layer = with_random_bias(CapsuleGRU(6), inputs)
    keras_gru = keras.layers.GRU(6, reset_after=False)
    keras_gru(inputs)
    flip = np.concatenate([-np.ones(6), np.ones(12)]).astype(np.float32)
    keras_gru.set_weights([layer.kernel[0] * flip, layer.recurrent_kernel[0] * flip, layer.bias[0, 0] * flip])
    np.testing.assert_allclose(layer(inputs, MASK)[:, 0], keras_gru(inputs, mask=MASK), rtol=1e-5, atol=1e-6)


def test_padding_and_keras_masking_do_not_change_the_states():
    layer = CapsuleGRU(6, num_capsules=3)
    token_ids = tf.constant([[4, 2, 7, 0, 0], [1, 3, 0, 0, 0]])
    embedding = keras.layers.Embedding(9, 4, mask_zero=True)
    # The mask travels with the embedding output (Keras masking)...
    masked = keras.Sequential([embedding, layer])(token_ids)
    # ...and equals running only the real words of each caption.
    for b, length in enumerate([3, 2]):
        alone = layer(embedding(token_ids[b : b + 1, :length]))
        np.testing.assert_allclose(masked[b : b + 1], alone, rtol=1e-5, atol=1e-6)
    assert layer.compute_mask(token_ids, token_ids != 0) is None


def test_every_capsule_gets_gradients_of_its_own():
    layer = CapsuleGRU(6, num_capsules=4, candidate_activation="sigmoid")
    inputs = tf.constant(RNG.normal(size=(3, 4, 5, 4)), tf.float32)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(inputs, MASK) * RNG.normal(size=(3, 4, 6)))
    for gradient in tape.gradient(loss, layer.trainable_variables):
        per_capsule = np.abs(gradient.numpy()).reshape(4, -1).sum(axis=1)
        assert np.all(per_capsule > 0)


def test_capsules_start_from_different_weights():
    layer = CapsuleGRU(6, num_capsules=3)
    layer.build((None, 5, 4))
    kernel = layer.kernel.numpy()
    assert not np.allclose(kernel[0], kernel[1]) and not np.allclose(kernel[1], kernel[2])
    recurrent = layer.recurrent_kernel.numpy()[0]
    # Orthogonal per capsule, as a Keras GRU's recurrent kernel.
    np.testing.assert_allclose(recurrent @ recurrent.T, np.eye(6), atol=1e-5)

import keras
import numpy as np
import pytest
import tensorflow as tf

from data.readers import load_precomp
from layers.capsule_gru import CapsuleGRU
from tests.helpers import EMBEDDED_DATA, run_layer_test

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


def padded_loop(layer, inputs, mask):
    """Francis et al. eqs. 1-4 in TF, independently of the layer: a Python
    loop over every capsule and every padded step, each state kept over
    padding, whose autodiff gives the reference gradients. inputs
    [B, L, F] or [B, N, L, F], mask [B, L]; returns [B, N, U]."""
    act = {"tanh": tf.tanh, "sigmoid": tf.sigmoid}[layer.candidate_activation]
    states = []
    for n in range(layer.num_capsules):
        w_z, w_r, w_h = tf.split(layer.kernel[n], 3, axis=1)
        u_z, u_r, u_h = tf.split(layer.recurrent_kernel[n], 3, axis=1)
        b_z, b_r, b_h = tf.split(layer.bias[n, 0], 3)
        sequence = inputs[:, n] if len(inputs.shape) == 4 else inputs
        h = tf.zeros([inputs.shape[0], layer.units])
        for step in range(sequence.shape[1]):
            x = sequence[:, step]
            z = tf.sigmoid(x @ w_z + h @ u_z + b_z)  # (1)
            r = tf.sigmoid(x @ w_r + h @ u_r + b_r)  # (2)
            candidate = act(x @ w_h + (r * h) @ u_h + b_h)  # (3)
            h = tf.where(mask[:, step, None], (1 - z) * h + z * candidate, h)  # (4)
        states.append(h)
    return tf.stack(states, axis=1)


def real_captions(count, features, capsules=None):
    """The first `count` dev captions of the embedded Flickr8k data (mixed
    lengths, unsorted), a random vector per word, padded: words [B, L, F],
    or [B, N, L, F] masked per capsule by random masks in (0, 1) as the
    RCN's later passes read them, and mask [B, L]."""
    captions = [c.lower().split() for c in load_precomp(EMBEDDED_DATA, "dev").captions[:count]]
    vocabulary = sorted({w for c in captions for w in c})
    vectors = dict(zip(vocabulary, RNG.normal(size=(len(vocabulary), features))))
    steps = max(map(len, captions))
    words, mask = np.zeros((count, steps, features)), np.zeros((count, steps), bool)
    for b, caption in enumerate(captions):
        words[b, : len(caption)], mask[b, : len(caption)] = [vectors[w] for w in caption], True
    if capsules:
        words = RNG.uniform(size=(count, capsules, 1, features)) * words[:, None]
    return tf.constant(words, tf.float32), tf.constant(mask)


def outputs_and_gradients(layer, function, inputs, mask):
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        outputs = function(inputs, mask)
        weights = tf.cos(tf.range(outputs.shape[1] * outputs.shape[2], dtype=tf.float32))
        loss = tf.reduce_sum(outputs * tf.reshape(weights, outputs.shape[1:]))
    return outputs, [tf.convert_to_tensor(g) for g in tape.gradient(loss, [inputs, *layer.trainable_variables])]


def assert_same(got, expected):
    (outputs, gradients), (expected_outputs, expected_gradients) = got, expected
    np.testing.assert_allclose(outputs, expected_outputs, atol=1e-5)
    assert len(gradients) == len(expected_gradients) == 4
    for gradient, expected_gradient in zip(gradients, expected_gradients):
        np.testing.assert_allclose(gradient, expected_gradient, atol=1e-5)


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


@pytest.mark.parametrize("activation", ["tanh", "sigmoid"])
@pytest.mark.parametrize("capsules, per_capsule_inputs", [(1, False), (3, False), (3, True)])
def test_outputs_and_gradients_equal_the_padded_loop_on_real_captions(activation, capsules, per_capsule_inputs):
    """Computing real words only gives the padded computation's states and
    gradients (inputs, kernels, biases) on real captions of mixed lengths,
    in training (the written-out backward pass) and outside (autodiff of
    the loop), and under tf.function with batches of other widths."""
    inputs, mask = real_captions(12, 5, capsules if per_capsule_inputs else None)
    layer = with_random_bias(CapsuleGRU(6, num_capsules=capsules, candidate_activation=activation), inputs)

    def padded(x, m):
        return padded_loop(layer, x, m)

    expected = outputs_and_gradients(layer, padded, inputs, mask)
    for training in (True, False):
        assert_same(outputs_and_gradients(layer, lambda x, m: layer(x, m, training=training), inputs, mask), expected)
    # One trace for every batch width and length, as a training step
    # retraced for them (`reduce_retracing`) ends up with.
    traced = tf.function(lambda x, m: layer(x, m, training=True),
                         input_signature=[tf.TensorSpec([None, *inputs.shape[1:-2], None, inputs.shape[-1]]),
                                          tf.TensorSpec([None, None], tf.bool)])
    # Three captions cut at 11 words, the last one empty (it keeps the
    # initial zeros), then the whole batch.
    narrower, with_empty = inputs[2:5, ..., :11, :], tf.concat([mask[2:4, :11], tf.zeros([1, 11], bool)], axis=0)
    assert_same(outputs_and_gradients(layer, traced, narrower, with_empty),
                outputs_and_gradients(layer, padded, narrower, with_empty))
    assert_same(outputs_and_gradients(layer, traced, inputs, mask), expected)


def test_under_xla_the_padded_recurrence_computes_the_same():
    """XLA compiles fixed shapes only: there the layer runs every padded step."""
    inputs, mask = real_captions(12, 5, capsules=2)
    layer = with_random_bias(CapsuleGRU(6, num_capsules=2, candidate_activation="sigmoid"), inputs)
    compiled = tf.function(lambda x, m: outputs_and_gradients(layer, layer, x, m), jit_compile=True)
    expected = outputs_and_gradients(layer, lambda x, m: padded_loop(layer, x, m), inputs, mask)
    assert_same(compiled(inputs, mask), expected)

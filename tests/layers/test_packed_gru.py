import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.packed_gru import PackedGRU
from tests.helpers import run_layer_test


def batch(lengths, steps, features=5, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.arange(steps)[None, :] < np.asarray(lengths)[:, None]
    x = rng.normal(size=(len(lengths), steps, features)).astype(np.float32) * mask[..., None]
    return tf.constant(x), tf.constant(mask)


def outputs_and_gradients(layer, x, mask, training=False):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, mask=mask, training=training)
        loss = tf.reduce_sum(y * tf.cos(tf.range(y.shape[-1], dtype=tf.float32)))
    return y, [tf.convert_to_tensor(g) for g in tape.gradient(loss, [x, *layer.trainable_variables])]


def twin_layers(x, mask, **kwargs):
    """A Keras GRU and a PackedGRU with the same (non-default) weights."""
    padded, packed = keras.layers.GRU(8, **kwargs), PackedGRU(8, **kwargs)
    padded(x, mask=mask)
    packed(x, mask=mask)
    packed.set_weights([w + 0.1 for w in padded.get_weights()])
    padded.set_weights(packed.get_weights())
    return padded, packed


def assert_same(padded, packed, x, mask, training=False):
    expected, expected_grads = outputs_and_gradients(padded, x, mask, training)
    got, grads = outputs_and_gradients(packed, x, mask, training)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert len(grads) == len(expected_grads) == 4
    for g, e in zip(grads, expected_grads):
        np.testing.assert_allclose(g, e, atol=1e-5)


def test_layer_contract():
    x, mask = batch([3, 1, 4], 4)
    run_layer_test(PackedGRU, {"units": 6}, x, expected_output_shape=(3, 6))


LENGTHS = [([7, 1, 3, 7, 2, 5], 7), ([4, 4, 4], 4), ([1], 1), ([2, 9, 0, 5], 9), ([0, 0], 3)]


@pytest.mark.parametrize("reset_after", [True, False])
@pytest.mark.parametrize("lengths, steps", LENGTHS)
def test_outputs_and_gradients_equal_the_padded_keras_gru(lengths, steps, reset_after):
    """The same weights give the padded computation's state after each
    sequence's last real token, and the same gradients, whatever the order
    of lengths (an empty sequence gives zeros, as Keras')."""
    x, mask = batch(lengths, steps)
    padded, packed = twin_layers(x, mask, reset_after=reset_after)
    assert_same(padded, packed, x, mask, training=True)  # the written-out backward pass
    assert_same(padded, packed, x, mask)  # autodiff of the loop
    # Under tf.function, with a batch of another width, as in training:
    # one trace for every width and length, as a training step retraced
    # for them (`reduce_retracing`) ends up with.
    traced = tf.function(lambda a, b: packed(a, mask=b),
                         input_signature=[tf.TensorSpec([None, None, x.shape[-1]]),
                                          tf.TensorSpec([None, None], tf.bool)])
    other, other_mask = batch([2, 3], 3)
    np.testing.assert_allclose(traced(other, other_mask), padded(other, mask=other_mask), atol=1e-5)
    np.testing.assert_allclose(traced(x, mask), padded(x, mask=mask), atol=1e-5)


@pytest.mark.parametrize("reset_after", [True, False])
@pytest.mark.parametrize("dropout, recurrent_dropout", [(0.3, 0.0), (0.3, 0.4), (0.0, 0.4)])
def test_dropout_is_keras_given_the_same_masks(dropout, recurrent_dropout, reset_after):
    """In training, with Keras' per-sequence dropout masks (one per gate
    with recurrent dropout), outputs and gradients are the padded GRU's."""
    x, mask = batch([5, 2, 0, 4], 5)
    padded, packed = twin_layers(x, mask, reset_after=reset_after, dropout=dropout, recurrent_dropout=recurrent_dropout)
    rng = np.random.default_rng(1)

    def fixed(rate, shape):
        masks = [tf.constant((rng.random(shape) > rate) / (1 - rate), tf.float32) for _ in range(3)]
        return masks if recurrent_dropout else masks[0]

    input_masks, recurrent_masks = fixed(dropout, (4, 5)), fixed(recurrent_dropout, (4, 8))
    for layer in (padded, packed):
        layer.cell.get_dropout_mask = lambda _: input_masks
        layer.cell.get_recurrent_dropout_mask = lambda _: recurrent_masks
    assert_same(padded, packed, x, mask, training=True)
    # Outside training no mask applies.
    assert_same(padded, packed, x, mask)


def test_without_a_mask_every_step_counts():
    x, _ = batch([3, 3], 3)
    padded, packed = keras.layers.GRU(4), PackedGRU(4)
    padded(x), packed(x)
    packed.set_weights(padded.get_weights())
    np.testing.assert_allclose(packed(x), padded(x), atol=1e-6)


def test_only_the_last_state_of_a_forward_gru():
    for kwargs in ({"return_sequences": True}, {"go_backwards": True}, {"activation": "relu"}):
        with pytest.raises(ValueError, match="PackedGRU"):
            PackedGRU(4, **kwargs)


def test_under_xla_keras_padded_recurrence_computes_the_same():
    """XLA compiles fixed shapes only: there the layer is Keras' GRU."""
    x, mask = batch([5, 2, 0, 4], 5)
    padded, packed = twin_layers(x, mask)
    compiled = tf.function(lambda a, b: outputs_and_gradients(packed, a, b), jit_compile=True)
    expected, expected_grads = outputs_and_gradients(padded, x, mask)
    got, grads = compiled(x, mask)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    for g, e in zip(grads, expected_grads):
        np.testing.assert_allclose(g, e, atol=1e-5)

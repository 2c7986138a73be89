"""Shared test helpers: real-data locations and the layer test case.

`run_layer_test` gives every layer of `layers/` the same checks, in the
spirit of keras-hub's `TestCase.run_layer_test`: config and serialization
round trips, symbolic and eager calls, one training step, a gradient for
every trainable variable, and no NaN.
"""

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
EMBEDDED_DATA = REPO / "data" / "f8k_precomp"


def run_layer_test(layer_cls, init_kwargs, inputs, expected_output_shape=None, train_inputs=True):
    """Checks a layer the way every layer of the zoo must behave.

    Args:
      layer_cls: the layer class.
      init_kwargs: constructor arguments.
      inputs: a tensor or a tuple of positional input tensors (a batch).
      expected_output_shape: the eager output's shape, if known.
      train_inputs: whether the float inputs are nudged towards a random
        target in the fit step (so gradients must also flow to them).

    Returns:
      The layer's eager output, for further checks by the caller.
    """
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    layer = layer_cls(**init_kwargs)
    output = layer(*inputs)
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(output))), "NaN/inf in the output"
    if expected_output_shape is not None:
        assert tuple(output.shape) == tuple(expected_output_shape)

    # Config and serialization round trips give layers that compute the same.
    config = layer.get_config()
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config
    clone(*inputs)
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(clone(*inputs), output, rtol=1e-5, atol=1e-6)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(restored) is layer_cls and restored.get_config() == config

    # Symbolic call: the output spec agrees with the eager output.
    symbolic_inputs = [keras.Input(batch_shape=x.shape, dtype=x.dtype) for x in inputs]
    symbolic = layer_cls(**init_kwargs)(*symbolic_inputs)
    assert tuple(symbolic.shape[1:]) == tuple(output.shape[1:])

    # Every trainable variable gets a gradient, and one step keeps it finite.
    target = tf.random.stateless_normal(tuple(output.shape), seed=[1, 2])
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(tf.cast(layer(*inputs), tf.float32) - target))
    variables = layer.trainable_variables
    gradients = tape.gradient(loss, variables)
    for variable, gradient in zip(variables, gradients):
        assert gradient is not None, f"no gradient for {variable.path}"
        dense = tf.convert_to_tensor(gradient)
        assert np.all(np.isfinite(dense)), f"NaN gradient for {variable.path}"
        assert np.any(dense != 0), f"zero gradient for {variable.path}"
    if variables:
        keras.optimizers.Adam(1e-3).apply_gradients(zip(gradients, variables))
        assert np.all(np.isfinite(keras.ops.convert_to_numpy(layer(*inputs))))
    return output

"""Shared test helpers: real-data locations and the layer test case.

Tests read the small real data embedded in the repository (`data/`). The
few that need the large development data beside the repository
(`../shared/data/`: the per-stage Full-Network-Embedding features) get it
through `shared_data`, which skips them where it is absent (a user's clone)
and fails them when `ZOO_REQUIRE_SHARED_DATA=1` (CI, which has it).

`run_layer_test` gives every layer of `layers/` the same checks, in the
spirit of keras-hub's `TestCase.run_layer_test`: config and serialization
round trips, symbolic and eager calls, one training step, a gradient for
every trainable variable, and no NaN.
"""

import os
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

REPO = Path(__file__).resolve().parents[1]
EMBEDDED_DATA = REPO / "data" / "f8k_precomp"
EMBEDDED_TEXT = REPO / "data" / "flickr8k_text"
EMBEDDED_IMAGES = REPO / "data" / "flickr8k_images_sample"  # the first 8 test images
EMBEDDED_GLOVE = REPO / "data" / "glove_6b_50d" / "glove.6B.50d.flickr8k.txt"
SHARED_DATA = REPO.parent / "shared" / "data"


def shared_data(name):
    """`../shared/data/<name>`, the large development data; skips the
    calling test when it is absent, fails it when ZOO_REQUIRE_SHARED_DATA=1."""
    path = SHARED_DATA / name
    if not path.exists():
        reason = f"needs the development data {path} (put the project's shared/data/ beside the repository)"
        if os.environ.get("ZOO_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(f"ZOO_REQUIRE_SHARED_DATA=1: {reason}")
        pytest.skip(reason)
    return path


def run_layer_test(layer_cls, init_kwargs, inputs, expected_output_shape=None, input_gradients=True):
    """Checks a layer the way every layer of the zoo must behave.

    Args:
      layer_cls: the layer class.
      init_kwargs: constructor arguments.
      inputs: a tensor or a tuple of positional input tensors (a batch).
      expected_output_shape: the eager output's shape (a tuple of shapes for
        a layer returning several tensors), if known.
      input_gradients: whether gradients must reach the float inputs (not
        for a layer piecewise constant in them, such as a discretisation).

    Returns:
      The layer's eager output, for further checks by the caller.
    """
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    layer = layer_cls(**init_kwargs)
    output = layer(*inputs)
    outputs = keras.tree.flatten(output)
    for x in outputs:
        assert np.all(np.isfinite(keras.ops.convert_to_numpy(x))), "NaN/inf in the output"
    if expected_output_shape is not None:
        expected = expected_output_shape if isinstance(expected_output_shape[0], tuple) else (expected_output_shape,)
        assert [tuple(x.shape) for x in outputs] == [tuple(shape) for shape in expected]

    # Config and serialization round trips give layers that compute the same.
    config = layer.get_config()
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config
    clone(*inputs)
    clone.set_weights(layer.get_weights())
    for got, want in zip(keras.tree.flatten(clone(*inputs)), outputs):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(restored) is layer_cls and restored.get_config() == config

    # Symbolic call: the output spec agrees with the eager output.
    symbolic_inputs = [keras.Input(batch_shape=x.shape, dtype=x.dtype) for x in inputs]
    symbolic = keras.tree.flatten(layer_cls(**init_kwargs)(*symbolic_inputs))
    assert [tuple(x.shape[1:]) for x in symbolic] == [tuple(x.shape[1:]) for x in outputs]

    # Every trainable variable and every float input gets a finite, non-zero
    # gradient (losses the layer adds included), and one step keeps the
    # output finite.
    float_inputs = [x for x in inputs if x.dtype.is_floating] if input_gradients else []
    with tf.GradientTape() as tape:
        tape.watch(float_inputs)
        loss = sum(layer.losses, 0.0)
        for k, x in enumerate(keras.tree.flatten(layer(*inputs))):
            target = tf.random.stateless_normal(tuple(x.shape), seed=[1, k])
            loss += tf.reduce_mean(tf.square(tf.cast(x, tf.float32) - target))
    variables = layer.trainable_variables
    gradients = tape.gradient(loss, [*variables, *float_inputs])
    names = [v.path for v in variables] + [f"float input {k}" for k in range(len(float_inputs))]
    for name, gradient in zip(names, gradients):
        assert gradient is not None, f"no gradient for {name}"
        dense = tf.convert_to_tensor(gradient)
        assert np.all(np.isfinite(dense)), f"NaN gradient for {name}"
        assert np.any(dense != 0), f"zero gradient for {name}"
    if variables:
        keras.optimizers.Adam(1e-3).apply_gradients(zip(gradients, variables))
        for x in keras.tree.flatten(layer(*inputs)):
            assert np.all(np.isfinite(keras.ops.convert_to_numpy(x)))
    return output

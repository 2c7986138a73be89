"""Tests of `engine.train_step`: the optimizer of a config, and one
training step: the loss of the (gathered) batch with the layers' losses
at the model's scale, the gradient norm before clipping, clipping, the
update, the diagnostics, mixed precision (float32 loss and norms, loss
scaling, a skipped overflow) and XLA."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from common import diagnostics
from common.config import TrainConfig
from engine import runtime
from engine.train_step import make_optimizer, make_train_step
from models.base import RetrievalModel
from tests.helpers import skip_where_bfloat16_crashes
from tests.models.test_rcn import tiny as tiny_rcn
from tests.models.test_registered_models import batch, tiny_model


@pytest.mark.parametrize("name, kind", [("adam", keras.optimizers.Adam), ("rmsprop", keras.optimizers.RMSprop),
                                        ("sgd", keras.optimizers.SGD)])
def test_the_optimizer_of_the_config(name, kind):
    optimizer = make_optimizer(TrainConfig(optimizer=name, learning_rate=0.25))
    assert type(optimizer) is kind and float(optimizer.learning_rate) == 0.25


def test_the_epsilon_is_the_configs_or_keras_default():
    assert make_optimizer(TrainConfig(optimizer="rmsprop", optimizer_epsilon=1e-6)).epsilon == 1e-6
    assert make_optimizer(TrainConfig(optimizer="adam")).epsilon == keras.optimizers.Adam().epsilon


@pytest.mark.parametrize("mixed_precision, scaled", [("none", False), ("bf16", False), ("fp16", True)])
def test_only_float16_wraps_the_optimizer_in_loss_scaling(mixed_precision, scaled):
    optimizer = make_optimizer(TrainConfig(optimizer="sgd"), mixed_precision)
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer) is scaled
    if scaled:
        assert type(optimizer.inner_optimizer) is keras.optimizers.SGD


class Squares(keras.layers.Layer):
    """Adds the sum of the squares of its input to the layer losses."""

    def call(self, x):
        self.add_loss(tf.reduce_sum(tf.square(x)))
        return x


class ScaledFeatures(RetrievalModel):
    """A model whose step is computed by hand: images x * w (w [2]), texts
    their token ids as floats; the loss is sum(images * texts) plus the sum
    of the image indices (so they must arrive as given), its layer loss
    sum((x * w)^2) counts `LAYER_LOSS_SCALE` times; it records max(w)."""

    LAYER_LOSS_SCALE = 3.0

    def __init__(self):
        super().__init__()
        self.w = self.add_weight(shape=(2,), initializer=keras.initializers.Constant([1.0, 2.0]), name="w")
        self.squares = Squares()

    def encode_image(self, image_features, training=False):
        diagnostics.record("w_max", tf.reduce_max(self.w), "max")
        return self.squares(image_features * self.w)

    def encode_text(self, token_ids, training=False):
        return tf.cast(token_ids, tf.float32)

    def similarity(self, image_encodings, text_encodings):
        return tf.matmul(image_encodings, text_encodings, transpose_b=True)

    def pair_loss(self, image_encodings, text_encodings, image_index):
        return tf.reduce_sum(image_encodings * text_encodings) + tf.reduce_sum(tf.cast(image_index, tf.float32))

    def layer_loss_scale(self, batch_size):
        return self.LAYER_LOSS_SCALE


X = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
T = np.array([[2, 0], [1, 1]], np.int32)
INDEX = np.array([5, 7], np.int64)


def hand_step(w):
    """(loss, gradient) of ScaledFeatures at weights w on (X, T, INDEX), written out."""
    encodings = X * w
    loss = np.sum(encodings * T) + INDEX.sum() + ScaledFeatures.LAYER_LOSS_SCALE * np.sum(encodings**2)
    gradient = np.sum(X * T, axis=0) + ScaledFeatures.LAYER_LOSS_SCALE * 2 * np.sum(X**2, axis=0) * w
    return loss, gradient


@pytest.mark.parametrize("clip_norm", [None, 1.0, 1000.0])
def test_a_step_is_the_loss_and_update_written_out(clip_norm):
    model = ScaledFeatures()
    step = make_train_step(model, keras.optimizers.SGD(0.1), tf.distribute.get_strategy(), clip_norm)
    result = step({"image_features": X, "token_ids": T, "image_index": INDEX})
    loss, gradient = hand_step(np.array([1.0, 2.0]))  # 15 + 3 * 30 = 105; gradient [65, 59]
    norm = np.linalg.norm(gradient)
    np.testing.assert_allclose(float(result["loss"]), loss, rtol=1e-6)
    np.testing.assert_allclose(float(result["grad_norm"]), norm, rtol=1e-6)  # before clipping
    applied = gradient * min(1.0, clip_norm / norm) if clip_norm else gradient
    np.testing.assert_allclose(model.w.numpy(), np.array([1.0, 2.0]) - 0.1 * applied, rtol=1e-6)
    assert {name: float(value) for name, value in result["diagnostics"].items()} == {"w_max": 2.0}
    assert step.diagnostic_reductions == {"w_max": "max"}
    # The next step starts from the updated weights, with the same traced function.
    updated = model.w.numpy().astype(np.float64)
    second = step({"image_features": X, "token_ids": T, "image_index": INDEX})
    np.testing.assert_allclose(float(second["loss"]), hand_step(updated)[0], rtol=1e-5)


def test_train_step_reports_the_gradient_norm_before_clipping():
    model = tiny_model("gru")
    images, token_ids = batch(size=6)
    image_index = tf.range(6, dtype=tf.int64)
    with tf.GradientTape() as tape:
        loss = model.pair_loss(model.encode_image(images), model.encode_text(token_ids), image_index)
    norm = tf.linalg.global_norm([tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)])
    before = [v.numpy() for v in model.trainable_variables]
    step = make_train_step(model, keras.optimizers.SGD(1.0), tf.distribute.get_strategy(), clip_norm=1e-3)
    result = step({"image_features": images, "token_ids": token_ids, "image_index": image_index})
    assert float(norm) > 1e-2
    np.testing.assert_allclose(result["grad_norm"], norm, rtol=1e-5)
    assert result["diagnostics"] == {}
    # The update itself was clipped: SGD at rate 1 moved the weights by 1e-3.
    moved = np.sqrt(sum(np.sum((v.numpy() - b) ** 2) for v, b in zip(model.trainable_variables, before)))
    np.testing.assert_allclose(moved, 1e-3, rtol=1e-3)


def one_step(model, optimizer, clip_norm=None, jit_compile=False, size=6):
    images, token_ids = batch(size=size)
    step = make_train_step(model, optimizer, tf.distribute.get_strategy(), clip_norm, jit_compile)
    return step({"image_features": images, "token_ids": token_ids, "image_index": tf.range(size, dtype=tf.int64)})


def loss_and_gradient_norm(model, size=6):
    """The loss `one_step` computes on its batch (the pair loss plus the
    layers' losses at the model's scale) and its gradient's global norm,
    written out eagerly: no traced step."""
    images, token_ids = batch(size=size)
    with tf.GradientTape() as tape:
        loss = model.pair_loss(model.encode_image(images, training=True), model.encode_text(token_ids, training=True),
                               tf.range(size, dtype=tf.int64))
        if model.losses:
            loss += model.layer_loss_scale(size) * tf.add_n(model.losses)
    gradients = tape.gradient(loss, model.trainable_variables)
    return loss, tf.linalg.global_norm([tf.convert_to_tensor(g) for g in gradients])


@pytest.mark.parametrize("mixed_precision, compute", [("bf16", "bfloat16"), ("fp16", "float16")])
def test_mixed_precision_computes_low_but_keeps_weights_similarity_loss_and_norms_float32(
    mixed_precision, compute
):
    if mixed_precision == "bf16":
        skip_where_bfloat16_crashes()
    keras.utils.set_random_seed(0)
    reference = tiny_model("gru")
    with runtime.dtype_policy(mixed_precision):
        keras.utils.set_random_seed(0)
        model = tiny_model("gru")
    assert keras.config.dtype_policy().name == "float32"  # restored
    assert model.sentence_encoder.compute_dtype == model.image_projection.compute_dtype == compute
    assert all(v.dtype == "float32" for v in model.variables if v.trainable)
    for layer in (model.text_norm, model.image_norm, model.similarity_layer):
        assert layer.compute_dtype == "float32"
    images, token_ids = batch(size=6)
    sims = model.similarity(model.encode_image(images), model.encode_text(token_ids))
    assert sims.dtype == tf.float32
    expected = reference.similarity(reference.encode_image(images), reference.encode_text(token_ids))
    np.testing.assert_allclose(sims, expected, atol=0.05)

    config = TrainConfig(optimizer="sgd", learning_rate=1.0)
    optimizer = make_optimizer(config, mixed_precision)
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer) == (mixed_precision == "fp16")
    if mixed_precision == "fp16":
        # Keras starts at 2**15, which this batch's gradients overflow (the
        # step would be skipped, next test); a scale they fit under.
        optimizer.build(model.trainable_variables)
        optimizer.dynamic_scale.assign(16.0)
    before = [v.numpy() for v in model.trainable_variables]
    result = one_step(model, optimizer, clip_norm=1e-3)
    expected_loss, expected_norm = loss_and_gradient_norm(reference)
    # The reported norm is the unscaled gradient's, and clipping acts on it.
    np.testing.assert_allclose(result["loss"], expected_loss, rtol=0.05)
    np.testing.assert_allclose(result["grad_norm"], expected_norm, rtol=0.1)
    moved = np.sqrt(sum(np.sum((v.numpy() - b) ** 2) for v, b in zip(model.trainable_variables, before)))
    np.testing.assert_allclose(moved, 1e-3, rtol=0.02)


def test_a_layer_loss_joins_the_float32_loss_under_mixed_precision():
    """The RCN's mask regulariser (eq. 15, a layer loss on bfloat16 masks)
    is added to the float32 ranking loss: the step's loss is float32's.
    Two capsules and one recursion: the regulariser's smallest encoder."""
    skip_where_bfloat16_crashes()
    sizes = ("model.num_capsules=2", "model.recursions=1")
    keras.utils.set_random_seed(0)
    reference = tiny_rcn("rcn", *sizes)
    with runtime.dtype_policy("bf16"):
        keras.utils.set_random_seed(0)
        model = tiny_rcn("rcn", *sizes)
    result = one_step(model, keras.optimizers.SGD(0.0))
    assert model.losses and all(loss.dtype == tf.float32 for loss in model.losses)
    np.testing.assert_allclose(result["loss"], loss_and_gradient_norm(reference)[0], rtol=0.05)


def test_an_overflowing_float16_step_is_skipped_and_the_loss_scale_lowered():
    with runtime.dtype_policy("fp16"):
        model = tiny_model("gru")
    optimizer = make_optimizer(TrainConfig(), "fp16")
    optimizer.build(model.trainable_variables)
    optimizer.dynamic_scale.assign(2.0**60)  # overflows float16 at once
    before = [v.numpy() for v in model.trainable_variables]
    one_step(model, optimizer)
    assert float(optimizer.dynamic_scale) == 2.0**59
    for v, b in zip(model.trainable_variables, before):
        np.testing.assert_array_equal(v.numpy(), b)


def test_an_xla_compiled_step_equals_the_plain_one():
    keras.utils.set_random_seed(0)
    plain, compiled = tiny_model("gru"), tiny_model("gru")
    compiled.set_weights(plain.get_weights())
    expected = one_step(plain, keras.optimizers.SGD(0.1), clip_norm=2.0)
    result = one_step(compiled, keras.optimizers.SGD(0.1), clip_norm=2.0, jit_compile=True)
    np.testing.assert_allclose(result["loss"], expected["loss"], rtol=1e-5)
    np.testing.assert_allclose(result["grad_norm"], expected["grad_norm"], rtol=1e-5)
    for a, b in zip(compiled.get_weights(), plain.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)

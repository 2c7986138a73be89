import numpy as np
import tensorflow as tf

from layers.capsule_mask_regularization import CapsuleMaskRegularization, mask_variety_penalty
from tests.helpers import run_layer_test

RNG = np.random.default_rng(0)


def numpy_eq_14(masks):
    """Francis et al. eq. 14 for one sentence's masks [N, V], as printed."""
    n = len(masks)
    mean = masks.mean(axis=0)
    spread = sum(np.linalg.norm(m - mean) ** 2 for m in masks) / (n * np.linalg.norm(mean) ** 2)
    return 1 / (spread * min(np.linalg.norm(m) for m in masks))


def test_penalty_against_a_numpy_transcription_of_eq_14():
    masks = RNG.uniform(size=(6, 4, 10)).astype(np.float32)
    expected = [numpy_eq_14(m.astype(np.float64)) for m in masks]
    np.testing.assert_allclose(mask_variety_penalty(tf.constant(masks)), expected, rtol=1e-5)


def test_layer_passes_masks_through_and_adds_weighted_batch_mean():
    masks = tf.constant(RNG.uniform(size=(6, 4, 10)), tf.float32)
    output = run_layer_test(CapsuleMaskRegularization, {"weight": 0.05}, masks, expected_output_shape=(6, 4, 10))
    np.testing.assert_array_equal(output, masks)
    layer = CapsuleMaskRegularization(weight=0.05)
    layer(masks)
    [loss] = layer.losses
    expected = 0.05 * np.mean([numpy_eq_14(m) for m in masks.numpy().astype(np.float64)])
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


def test_more_varied_masks_are_penalised_less():
    base = RNG.uniform(size=(1, 1, 10)).astype(np.float32)
    alike = np.repeat(base, 4, axis=1) + RNG.normal(scale=0.01, size=(1, 4, 10)).astype(np.float32)
    varied = np.repeat(base, 4, axis=1) + RNG.normal(scale=0.3, size=(1, 4, 10)).astype(np.float32)
    assert mask_variety_penalty(tf.constant(alike))[0] > 10 * mask_variety_penalty(tf.constant(varied))[0]


def test_identical_or_zero_masks_give_finite_penalty_and_gradient():
    identical = np.repeat(RNG.uniform(size=(1, 1, 10)), 4, axis=1)
    with_a_zero = RNG.uniform(size=(1, 4, 10))
    with_a_zero[0, 2] = 0
    masks = tf.constant(np.concatenate([identical, with_a_zero]), tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(masks)
        penalty = mask_variety_penalty(masks)
        total = tf.reduce_sum(penalty)
    assert np.all(np.isfinite(penalty)) and penalty[0] > 1e3
    assert np.all(np.isfinite(tape.gradient(total, masks)))

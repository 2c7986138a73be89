import numpy as np
import pytest
import tensorflow as tf

from common import diagnostics
from layers.capsule_routing import CapsuleRouting
from tests.helpers import run_layer_test

RNG = np.random.default_rng(0)


def numpy_routing(v, candidate_masks, nonnegative=False):
    """Francis et al. eqs. 7-10 for one sentence, sums written out.
    v [N, H], candidate_masks [N, V]; `nonnegative` clips every agreement
    <v_i|v_j> at 0 (the layer's non-negative variant)."""
    n = len(v)
    clip = (lambda a: max(a, 0.0)) if nonnegative else (lambda a: a)  # noqa: E731
    dot = lambda a, b: clip(float(np.sum(a * b)))  # noqa: E731
    alpha = np.array([[dot(v[i], v[j]) / sum(dot(v[i], v[k]) for k in range(n)) for j in range(n)]
                      for i in range(n)])  # (9)
    total = sum(dot(v[k], v[l]) for k in range(n) for l in range(n))  # noqa: E741
    beta = np.array([[dot(v[i], v[j]) / total for j in range(n)] for i in range(n)])  # (10)
    masks = np.array([sum(alpha[i, j] * candidate_masks[j] for j in range(n)) for i in range(n)])  # (7)
    embedding = sum(beta[i, j] * v[i] for i in range(n) for j in range(n))  # (8)
    return embedding, masks


def test_layer_contract():
    embeddings = tf.constant(RNG.normal(size=(3, 4, 6)), tf.float32)
    candidate_masks = tf.constant(RNG.uniform(size=(3, 4, 5)), tf.float32)
    run_layer_test(CapsuleRouting, {}, (embeddings, candidate_masks), expected_output_shape=((3, 6), (3, 4, 5)))
    run_layer_test(CapsuleRouting, {"epsilon": 1e-3}, embeddings, expected_output_shape=(3, 6))


@pytest.mark.parametrize("nonnegative", [False, True])
def test_eqs_7_to_10_against_a_numpy_transcription(nonnegative):
    # Mixed-sign states, so some agreements and eq. 9 denominators are negative.
    embeddings = RNG.normal(size=(5, 4, 6)).astype(np.float32)
    candidate_masks = RNG.uniform(size=(5, 4, 3)).astype(np.float32)
    routing = CapsuleRouting(nonnegative=nonnegative)
    embedding, masks = routing(embeddings, candidate_masks)
    for b in range(5):
        expected_embedding, expected_masks = numpy_routing(
            embeddings[b].astype(np.float64), candidate_masks[b], nonnegative)
        np.testing.assert_allclose(embedding[b], expected_embedding, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(masks[b], expected_masks, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(routing(embeddings), embedding)


def test_nonnegative_routing_mixes_masks_and_embeddings_convexly():
    """Anti-aligned capsules: literal routing leaves the masks' range, the
    non-negative variant cannot."""
    v = RNG.normal(size=(6, 1, 8)).astype(np.float32)
    embeddings = np.concatenate([v, -0.9 * v + 0.1 * RNG.normal(size=v.shape).astype(np.float32)], axis=1)
    candidate_masks = RNG.uniform(0.05, 0.95, size=(6, 2, 5)).astype(np.float32)
    _, literal = CapsuleRouting()(embeddings, candidate_masks)
    assert np.min(literal) < 0 or np.max(literal) > 1
    embedding, masks = CapsuleRouting(nonnegative=True)(embeddings, candidate_masks)
    assert np.all((masks >= candidate_masks.min(axis=1, keepdims=True) - 1e-6)
                  & (masks <= candidate_masks.max(axis=1, keepdims=True) + 1e-6))
    # Clipped agreements: each capsule keeps only itself, and v is the
    # norm-weighted mean of the capsules.
    norms = np.sum(embeddings**2, axis=2, keepdims=True)
    np.testing.assert_allclose(masks, candidate_masks, rtol=1e-5)
    np.testing.assert_allclose(embedding, np.sum(norms * embeddings, axis=1) / np.sum(norms, axis=1), rtol=1e-5,
                               atol=1e-6)


def test_diagnostics_are_recorded_when_named():
    embeddings = tf.constant(RNG.normal(size=(3, 4, 6)), tf.float32)
    candidate_masks = tf.constant(RNG.uniform(size=(3, 4, 5)), tf.float32)
    routing = CapsuleRouting()
    with diagnostics.recording() as recorded:
        routing(embeddings, candidate_masks)  # unnamed: nothing recorded
        assert recorded == {}
        _, masks = routing(embeddings, candidate_masks, record_as="pass_1")
    dots = np.einsum("bih,bjh->bij", embeddings, embeddings)
    denominators = dots.sum(axis=2)
    alpha = dots / denominators[:, :, None]
    relative = denominators / np.einsum("bii->bi", dots)
    expected = {
        "pass_1/eq9_min_abs_denominator": (np.abs(denominators).min(), "min"),
        "pass_1/eq9_min_relative_denominator": (relative.min(), "min"),
        "pass_1/alpha_min": (alpha.min(), "min"),
        "pass_1/alpha_max": (alpha.max(), "max"),
        "pass_1/mask_min": (np.min(masks), "min"),
        "pass_1/mask_max": (np.max(masks), "max"),
    }
    assert set(recorded) == set(expected)
    for name, (value, reduction) in expected.items():
        assert recorded[name][1] == reduction
        np.testing.assert_allclose(recorded[name][0], value, rtol=1e-4, err_msg=name)


def test_one_capsule_routes_to_itself():
    embeddings = RNG.normal(size=(3, 1, 6)).astype(np.float32)
    candidate_masks = RNG.uniform(size=(3, 1, 5)).astype(np.float32)
    embedding, masks = CapsuleRouting()(embeddings, candidate_masks)
    np.testing.assert_array_equal(embedding, embeddings[:, 0])
    np.testing.assert_array_equal(masks, candidate_masks)


def test_cancelling_denominators_give_finite_outputs_and_gradients():
    v = RNG.normal(size=(1, 1, 6)).astype(np.float32)
    # v_2 = -v_1: every sum over capsules of eqs. 9-10 is exactly 0.
    embeddings = tf.constant(np.concatenate([v, -v], axis=1))
    candidate_masks = tf.constant(RNG.uniform(size=(1, 2, 5)), tf.float32)
    with tf.GradientTape() as tape:
        tape.watch([embeddings, candidate_masks])
        embedding, masks = CapsuleRouting(epsilon=1e-4)(embeddings, candidate_masks)
        loss = tf.reduce_sum(embedding) + tf.reduce_sum(masks)
    for x in [embedding, masks, *tape.gradient(loss, [embeddings, candidate_masks])]:
        assert np.all(np.isfinite(x))
    # The denominators became +epsilon: alpha_ij = <v_i|v_j> / 1e-4.
    norm = float(np.sum(v * v))
    expected_mask_0 = (norm * candidate_masks[0, 0] - norm * candidate_masks[0, 1]) / 1e-4
    np.testing.assert_allclose(masks[0, 0], expected_mask_0, rtol=1e-3)


def test_a_near_zero_negative_denominator_becomes_minus_epsilon():
    """|d| < epsilon (1e-4 by default) is replaced by epsilon with the sign
    of d. v_2 = -(1 + 5e-5) v_1 gives the eq. 9 denominators
    d_1 = <v_1|v_1 + v_2> = -5e-5 and d_2 = <v_2|v_1 + v_2> = +5.00025e-5,
    used as -1e-4 and +1e-4."""
    embeddings = np.array([[[1.0, 0.0], [-(1 + 5e-5), 0.0]]], np.float32)
    candidate_masks = np.array([[[0.2, 0.6], [0.4, 0.6]]], np.float32)
    _, masks = CapsuleRouting()(embeddings, candidate_masks)
    v = embeddings[0].astype(np.float64)
    alpha = (v @ v.T) / np.array([[-1e-4], [1e-4]])
    # m_1 = (0.2 - 0.4 (1 + 5e-5), 0.6 - 0.6 (1 + 5e-5)) / -1e-4 = (2000.2, 0.3).
    np.testing.assert_allclose(masks[0], alpha @ candidate_masks[0], rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(masks[0, 0], [2000.2, 0.3], rtol=1e-4, atol=1e-2)

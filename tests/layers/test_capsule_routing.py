import numpy as np
import tensorflow as tf

from layers.capsule_routing import CapsuleRouting
from tests.helpers import run_layer_test

RNG = np.random.default_rng(0)


def numpy_routing(v, candidate_masks):
    """Francis et al. eqs. 7-10 for one sentence, sums written out.
    v [N, H], candidate_masks [N, V]."""
    n = len(v)
    dot = lambda a, b: float(np.sum(a * b))  # noqa: E731
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


def test_eqs_7_to_10_against_a_numpy_transcription():
    # Mixed-sign states, so some eq. 9 denominators are negative.
    embeddings = RNG.normal(size=(5, 4, 6)).astype(np.float32)
    candidate_masks = RNG.uniform(size=(5, 4, 3)).astype(np.float32)
    embedding, masks = CapsuleRouting()(embeddings, candidate_masks)
    for b in range(5):
        expected_embedding, expected_masks = numpy_routing(embeddings[b].astype(np.float64), candidate_masks[b])
        np.testing.assert_allclose(embedding[b], expected_embedding, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(masks[b], expected_masks, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(CapsuleRouting()(embeddings), embedding)


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

"""FisherVector against a NumPy transcription of eqs. 4, 5, 10, 11 (with
SciPy's densities for the posteriors) for several blocks of components,
against the autodiff gradient of the log-likelihood, and on a hand-built
case pinning sgn(0) = +1."""

import math

import numpy as np
import pytest
import tensorflow as tf
from scipy import special, stats

from layers.fisher_vector import FisherVector
from models.fisher_vectors.mixtures import Mixture
from tests.helpers import run_layer_test

K, D = 4, 3


def random_mixture(seed=0, laplacian=None):
    rng = np.random.default_rng(seed)
    return Mixture(rng.dirichlet(np.ones(K)), rng.normal(size=(K, D)), rng.uniform(0.5, 1.5, size=(K, D)),
                   rng.integers(0, 2, size=(K, D)).astype(bool) if laplacian is None else np.full((K, D), laplacian))


def sentences(lengths, seed=0, width=7):
    rng = np.random.default_rng(seed)
    mask = np.arange(width)[None, :] < np.array(lengths)[:, None]
    return rng.normal(size=(len(lengths), width, D)).astype(np.float32), mask


def posteriors(mixture, words):
    """T_ki from SciPy's Gaussian and Laplacian densities: [N, K]."""
    x = words[:, None, :]
    log_h = np.log(mixture.weights) + np.sum(np.where(
        mixture.laplacian,
        stats.laplace.logpdf(x, mixture.loc, mixture.scale),
        stats.norm.logpdf(x, mixture.loc, mixture.scale)), axis=-1)
    return np.exp(log_h - special.logsumexp(log_h, axis=1, keepdims=True))


def numpy_fisher_vector(mixture, words):
    """Eqs. 4, 5, 10, 11 for one sentence [N, D], sums written out; sgn(0)
    = +1 as the layer documents."""
    n = len(words)
    (k_count, d_count), t = mixture.loc.shape, posteriors(mixture, words)
    location, scale = np.zeros((k_count, d_count)), np.zeros((k_count, d_count))
    for k in range(k_count):
        norm = math.sqrt(n * mixture.weights[k])
        for d in range(d_count):
            m, s = mixture.loc[k, d], mixture.scale[k, d]
            if mixture.laplacian[k, d]:
                location[k, d] = sum(t[i, k] * (1 if words[i, d] >= m else -1) for i in range(n)) / norm  # (4)
                scale[k, d] = sum(t[i, k] * (abs(words[i, d] - m) / s - 1) for i in range(n)) / norm  # (5)
            else:
                location[k, d] = sum(t[i, k] * (words[i, d] - m) / s for i in range(n)) / norm  # (10)
                scale[k, d] = sum(t[i, k] * ((words[i, d] - m) ** 2 / s**2 - 1) for i in range(n)) / (math.sqrt(2) * norm)  # (11)
    return np.concatenate([location.ravel(), scale.ravel()])


def power_and_l2(vector):
    """Sec. 5: sign(z)|z|^0.5, then unit L2."""
    powered = np.sign(vector) * np.sqrt(np.abs(vector))
    return powered / np.linalg.norm(powered)


def layer_with(mixture, **kwargs):
    layer = FisherVector(K, D, **kwargs)
    layer.set_mixture(mixture)
    return layer


def test_layer_contract():
    inputs, mask = sentences([7, 3, 1])
    run_layer_test(FisherVector, {"num_components": K, "dim": D, "component_block": 3},
                   (tf.constant(inputs), tf.constant(mask)), expected_output_shape=(3, 2 * K * D))


# Blocks of components: one at a time, 3 (K = 4 is not a multiple), all.
@pytest.mark.parametrize("component_block", [1, 3, 4, 10])
@pytest.mark.parametrize("laplacian", [False, True, None])  # GMM, LMM, HGLMM
def test_eqs_4_5_10_11_then_power_and_l2_normalisation(laplacian, component_block):
    mixture = random_mixture(laplacian=laplacian)
    inputs, mask = sentences([7, 3, 1])
    raw = layer_with(mixture, normalize=False, component_block=component_block)(inputs, mask).numpy()
    normalised = layer_with(mixture, component_block=component_block)(inputs, mask).numpy()
    for row, n in enumerate([7, 3, 1]):
        expected = numpy_fisher_vector(mixture, inputs[row, :n].astype(np.float64))
        np.testing.assert_allclose(raw[row], expected, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(normalised[row], power_and_l2(expected), rtol=1e-4, atol=1e-5)


def test_fisher_vector_is_the_normalised_autodiff_gradient_of_the_log_likelihood():
    mixture = random_mixture(seed=3)
    inputs, mask = sentences([6], seed=4)
    words = tf.constant(inputs[0, :6], tf.float64)
    loc, scale = tf.Variable(mixture.loc), tf.Variable(mixture.scale)
    b = tf.constant(mixture.laplacian, tf.float64)
    with tf.GradientTape() as tape:
        x = words[:, None, :]
        log_h = tf.reduce_sum(
            (1 - b) * (-0.5 * tf.math.log(2 * np.pi * scale**2) - (x - loc) ** 2 / (2 * scale**2))
            + b * (-tf.math.log(2 * scale) - tf.abs(x - loc) / scale), axis=-1) + np.log(mixture.weights)
        log_likelihood = tf.reduce_sum(tf.reduce_logsumexp(log_h, axis=1))
    d_loc, d_scale = (g.numpy() for g in tape.gradient(log_likelihood, [loc, scale]))
    # Fisher information: N tau / sigma^2 (mu, m and s) and 2 N tau / sigma^2 (sigma).
    fisher = 6 * mixture.weights[:, None] / mixture.scale**2
    expected = np.concatenate([
        (d_loc / np.sqrt(fisher)).ravel(),
        (d_scale / np.sqrt(np.where(mixture.laplacian, 1.0, 2.0) * fisher)).ravel(),
    ])
    got = layer_with(mixture, normalize=False)(inputs[:1, :6], mask[:1, :6]).numpy()[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_padding_does_not_change_it_and_a_sentence_without_words_gives_zeros():
    layer = layer_with(random_mixture(seed=5))
    inputs, mask = sentences([5, 0], seed=6)
    padded_inputs = np.concatenate([inputs, np.random.default_rng(7).normal(size=(2, 4, D)).astype(np.float32)], axis=1)
    padded_mask = np.concatenate([mask, np.zeros((2, 4), bool)], axis=1)
    np.testing.assert_allclose(layer(padded_inputs, padded_mask), layer(inputs, mask), rtol=1e-5, atol=1e-6)
    out = layer(inputs, mask).numpy()
    assert np.all(out[1] == 0) and np.isclose(np.linalg.norm(out[0]), 1)


def test_a_word_at_a_laplacian_location_counts_as_above_it():
    """sgn(0) = +1 (the layer's documented convention): m is a data value
    (a weighted median), so a word can sit exactly on it. Two Laplacian
    components, the second too far for any posterior (T = 1, 0); a word
    equal to the first's m gives, with N tau = 1/4, eq. 4: sgn(0) / (1/2)
    = +2 per dimension and eq. 5: (|0| / s - 1) / (1/2) = -2."""
    layer = FisherVector(2, 2, normalize=False)
    layer.set_mixture(Mixture(np.array([0.25, 0.75]), np.array([[0.5, -0.25], [50.0, 50.0]]),
                              np.array([[0.5, 2.0], [0.5, 0.5]]), np.ones((2, 2), bool)))
    words, mask = np.array([[[0.5, -0.25]]], np.float32), np.ones((1, 1), bool)
    np.testing.assert_array_equal(layer(words, mask).numpy(), [[2.0, 2.0, 0.0, 0.0, -2.0, -2.0, 0.0, 0.0]])
    # Beside a word below m the two signs cancel: (+1 - 1) / sqrt(2 / 4).
    words, mask = np.array([[[0.5, -0.25], [0.0, -1.0]]], np.float32), np.ones((1, 2), bool)
    np.testing.assert_allclose(layer(words, mask).numpy()[0, :2], [0.0, 0.0], atol=1e-7)

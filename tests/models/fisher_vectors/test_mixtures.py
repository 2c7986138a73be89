"""The GMM/LMM/HGLMM EM (Klein et al. 2015, eqs. 1-3, 6-9) against
scikit-learn, SciPy densities, brute force and a loop transcription of the
paper's EM step, on the real GloVe vectors and small synthetic data."""

import warnings

import numpy as np
import pytest
from scipy import special, stats
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

from data import word_vectors
from data.embedded import EMBEDDED_GLOVE_50D as GLOVE_50D
from models.fisher_vectors.mixtures import Mixture, em_step, fit_mixture, initial_mixture, weighted_median


@pytest.fixture(scope="module")
def glove():
    vectors = word_vectors.load_word_vectors(GLOVE_50D).vectors.astype(np.float64)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize("policy", ["gaussian", "laplacian", "hybrid"])
def test_log_likelihood_never_decreases(glove, policy):
    lls = []
    fit_mixture(glove[:3000], 10, policy, iterations=6, callback=lambda i, m, ll: lls.append(ll))
    assert len(lls) == 6 and all(b >= a - 1e-6 * abs(a) for a, b in zip(lls, lls[1:])), lls


def test_one_gaussian_step_equals_scikit_learns(glove):
    x = glove[:2000]
    start = initial_mixture(x, 8, "gaussian", np.random.default_rng(0))
    ours, _ = em_step(x, start, "gaussian")
    reference = GaussianMixture(
        8, covariance_type="diag", max_iter=1, reg_covar=1e-12, weights_init=start.weights,
        means_init=start.loc, precisions_init=1 / start.scale**2,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reference.fit(x)
    np.testing.assert_allclose(ours.weights, reference.weights_, rtol=1e-7)
    np.testing.assert_allclose(ours.loc, reference.means_, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(ours.scale**2, reference.covariances_, rtol=1e-6, atol=1e-10)


def test_log_densities_are_the_mixed_gaussian_and_laplacian_densities():
    rng = np.random.default_rng(0)
    mixture = Mixture(rng.dirichlet(np.ones(4)), rng.normal(size=(4, 3)), rng.uniform(0.5, 2, size=(4, 3)),
                      rng.integers(0, 2, size=(4, 3)).astype(bool))
    x = rng.normal(size=(6, 3))
    expected = np.log(mixture.weights) + np.array([[
        sum(stats.laplace.logpdf(xi[d], mixture.loc[k, d], mixture.scale[k, d]) if mixture.laplacian[k, d]
            else stats.norm.logpdf(xi[d], mixture.loc[k, d], mixture.scale[k, d]) for d in range(3))
        for k in range(4)] for xi in x])
    np.testing.assert_allclose(mixture.log_densities(x), expected, rtol=1e-10)
    np.testing.assert_allclose(mixture.responsibilities(x).sum(axis=1), 1)


def test_weighted_median_minimises_the_weighted_absolute_deviation():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 3))
    weights = rng.uniform(size=(40, 2))
    median = weighted_median(x, weights)
    for k in range(2):
        for d in range(3):
            cost = lambda m: np.sum(weights[:, k] * np.abs(x[:, d] - m))  # noqa: E731
            assert median[k, d] in x[:, d]
            assert cost(median[k, d]) <= min(cost(c) for c in x[:, d]) + 1e-12


def numpy_em_step(x, weights, loc, scale, laplacian, policy):
    """One EM step of the hybrid mixture, transcribed from Klein et al.
    2015 (Secs. 3.1, 4.1) with loops and SciPy densities.

    E-step: T_ki = tau_k h_k(x_i) / sum_r tau_r h_r(x_i), h_k the product
    over d of Laplace(x_id; m_kd, s_kd) where b_kd, else N(x_id; mu_kd,
    sigma_kd^2). M-step, N_k = sum_i T_ki: tau_k = N_k / N (1); m_kd the
    data value minimising sum_i T_ki |x_id - m| (2); s_kd = sum_i T_ki
    |x_id - m_kd| / N_k (3); mu_kd = sum_i T_ki x_id / N_k (6); sigma_kd^2
    = sum_i T_ki (x_id - mu_kd)^2 / N_k (7); b_kd = [L_kd > G_kd] with L, G
    the T-weighted log-likelihoods of x_.d under the new Laplacian and
    Gaussian (8, 9), or all 1 (LMM) / all 0 (GMM)."""
    n, dim = x.shape
    k_count = len(weights)
    log_h = np.zeros((n, k_count))
    for i in range(n):
        for k in range(k_count):
            log_h[i, k] = np.log(weights[k]) + sum(
                stats.laplace.logpdf(x[i, d], loc[k, d], scale[k, d]) if laplacian[k, d]
                else stats.norm.logpdf(x[i, d], loc[k, d], scale[k, d]) for d in range(dim))
    t = np.exp(log_h - special.logsumexp(log_h, axis=1, keepdims=True))
    new_weights, new_loc, new_scale = np.zeros(k_count), np.zeros((k_count, dim)), np.zeros((k_count, dim))
    new_laplacian = np.zeros((k_count, dim), bool)
    for k in range(k_count):
        count = t[:, k].sum()
        new_weights[k] = count / n
        for d in range(dim):
            column = x[:, d]
            median = min(column, key=lambda c: np.sum(t[:, k] * np.abs(column - c)))
            absolute_deviation = np.sum(t[:, k] * np.abs(column - median)) / count
            mean = np.sum(t[:, k] * column) / count
            variance = np.sum(t[:, k] * (column - mean) ** 2) / count
            laplace_ll = np.sum(t[:, k] * stats.laplace.logpdf(column, median, absolute_deviation))
            gauss_ll = np.sum(t[:, k] * stats.norm.logpdf(column, mean, np.sqrt(variance)))
            new_laplacian[k, d] = {"gaussian": False, "laplacian": True, "hybrid": laplace_ll > gauss_ll}[policy]
            new_loc[k, d] = median if new_laplacian[k, d] else mean
            new_scale[k, d] = absolute_deviation if new_laplacian[k, d] else np.sqrt(variance)
    return t, new_weights, new_loc, new_scale, new_laplacian


@pytest.mark.parametrize("policy", ["gaussian", "laplacian", "hybrid"])
def test_one_em_step_equals_the_papers_updates(policy):
    rng = np.random.default_rng(3)
    # Three groups, two heavy-tailed (Laplacian) and two Gaussian dimensions,
    # so that the hybrid step keeps both kinds of entries.
    centres = rng.normal(scale=2.0, size=(3, 4))
    x = np.concatenate([c + np.hstack([rng.laplace(size=(n, 2)), rng.normal(size=(n, 2))])
                        for c, n in zip(centres, (30, 20, 15))])
    start = Mixture(np.array([0.5, 0.3, 0.2]), centres + rng.normal(scale=0.5, size=(3, 4)),
                    rng.uniform(0.7, 1.5, size=(3, 4)), rng.integers(0, 2, size=(3, 4)).astype(bool))
    mixture, t = em_step(x, start, policy)
    expected_t, weights, loc, scale, laplacian = numpy_em_step(x, start.weights, start.loc, start.scale,
                                                               start.laplacian, policy)
    np.testing.assert_allclose(t, expected_t, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(mixture.laplacian, laplacian)
    np.testing.assert_allclose(mixture.weights, weights, rtol=1e-12)
    np.testing.assert_allclose(mixture.loc, loc, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(mixture.scale, scale, rtol=1e-9)
    if policy == "hybrid":  # the data makes eq. 9 choose both families
        assert 0.2 < laplacian.mean() < 0.8, laplacian

"""The GMM/LMM/HGLMM EM (Klein et al. 2015, eqs. 1-3, 6-9) against
scikit-learn, SciPy densities and brute force, on the real GloVe vectors."""

import warnings

import numpy as np
import pytest
from scipy import stats
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


def test_hybrid_switch_picks_the_family_with_the_higher_weighted_log_likelihood(glove):
    x = glove[:1500, :10]
    start = initial_mixture(x, 5, "hybrid", np.random.default_rng(2))
    mixture, t = em_step(x, start, "hybrid")
    laplace, _ = em_step(x, start, "laplacian", responsibilities=t)
    gauss, _ = em_step(x, start, "gaussian", responsibilities=t)
    for k in range(5):
        for d in range(10):
            l_ll = np.sum(t[:, k] * stats.laplace.logpdf(x[:, d], laplace.loc[k, d], laplace.scale[k, d]))
            g_ll = np.sum(t[:, k] * stats.norm.logpdf(x[:, d], gauss.loc[k, d], gauss.scale[k, d]))
            assert mixture.laplacian[k, d] == (l_ll > g_ll)
            chosen = laplace if l_ll > g_ll else gauss
            assert (mixture.loc[k, d], mixture.scale[k, d]) == pytest.approx((chosen.loc[k, d], chosen.scale[k, d]))

"""The GMM/LMM/HGLMM EM (Klein et al. 2015, eqs. 1-3, 6-9) against
scikit-learn, SciPy densities, brute force and a loop transcription of the
paper's EM step, on the real GloVe vectors and small synthetic data; the
weighted median from the once-sorted data against sorting every time; the
log-likelihood the fit reports and its threads."""

import warnings

import numpy as np
import pytest
from scipy import special, stats
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

from data import word_vectors
from data.embedded import EMBEDDED_GLOVE_50D as GLOVE_50D
from models.fisher_vectors import mixtures
from models.fisher_vectors.mixtures import EM, Mixture, fit_mixture, initial_mixture


@pytest.fixture(scope="module")
def glove():
    """The unit GloVe vectors, rounded to float32 as the EM holds its data
    (held as float64, for the references)."""
    vectors = word_vectors.load_word_vectors(GLOVE_50D)
    vectors = vectors.take(np.arange(len(vectors))).astype(np.float64)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("policy", ["gaussian", "laplacian", "hybrid"])
def test_log_likelihood_never_decreases_and_is_that_of_each_iterations_mixture(glove, policy):
    x = glove[:3000]
    reported = []
    fit_mixture(x, 10, policy, iterations=6, callback=lambda i, m, ll: reported.append((i, m, ll)))
    lls = [ll for _, _, ll in reported]
    assert [i for i, _, _ in reported] == list(range(6))
    assert all(b >= a - 1e-6 * abs(a) for a, b in zip(lls, lls[1:])), lls
    for _, mixture, ll in reported[::5]:  # the first and the last
        assert ll == pytest.approx(np.sum(special.logsumexp(scipy_log_densities(mixture, x), axis=1)), rel=1e-8)


def test_the_fit_stops_when_the_responsibilities_stop_moving(glove):
    """Tolerance as the released code: after iteration i once T_i - T_(i-1)
    is below it (an unreachable or an always reached one)."""
    for tolerance, iterations_run in ((1e-30, 4), (1e30, 2)):
        reported = []
        fit_mixture(glove[:500], 4, "laplacian", iterations=4, tolerance=tolerance,
                    callback=lambda i, m, ll: reported.append(i))
        assert reported == list(range(iterations_run))


def test_one_or_two_threads_fit_the_same_mixture(glove):
    one, two = (fit_mixture(glove[:3000], 6, "hybrid", iterations=3, workers=workers) for workers in (1, 2))
    np.testing.assert_array_equal(one.laplacian, two.laplacian)
    for a, b in ((one.weights, two.weights), (one.loc, two.loc), (one.scale, two.scale)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-14)


def test_one_gaussian_step_equals_scikit_learns(glove):
    x = glove[:2000]
    start = initial_mixture(x, 8, "gaussian", np.random.default_rng(0))
    em = EM(x)
    ours = em.maximisation(em.expectation(start)[0], "gaussian")
    reference = GaussianMixture(
        8, covariance_type="diag", max_iter=1, reg_covar=1e-12, weights_init=start.weights,
        means_init=start.loc, precisions_init=1 / start.scale**2,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reference.fit(x)
    # T is held in float32 (a relative rounding of 6e-8).
    np.testing.assert_allclose(ours.weights, reference.weights_, rtol=1e-6)
    np.testing.assert_allclose(ours.loc, reference.means_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ours.scale**2, reference.covariances_, rtol=1e-6, atol=1e-10)


def scipy_log_densities(mixture, x):
    """log tau_k + sum_d log h_kd(x_id) from SciPy's densities: [N, K]."""
    return np.log(mixture.weights) + np.sum(np.where(
        mixture.laplacian,
        stats.laplace.logpdf(x[:, None], mixture.loc, mixture.scale),
        stats.norm.logpdf(x[:, None], mixture.loc, mixture.scale)), axis=-1)


def test_log_densities_and_the_e_step_are_the_mixed_gaussian_and_laplacian_densities():
    rng = np.random.default_rng(0)
    mixture = Mixture(rng.dirichlet(np.ones(4)), rng.normal(size=(4, 3)), rng.uniform(0.5, 2, size=(4, 3)),
                      rng.integers(0, 2, size=(4, 3)).astype(bool))
    x = rng.normal(size=(6, 3)).astype(np.float32).astype(np.float64)
    expected = np.log(mixture.weights) + np.array([[
        sum(stats.laplace.logpdf(xi[d], mixture.loc[k, d], mixture.scale[k, d]) if mixture.laplacian[k, d]
            else stats.norm.logpdf(xi[d], mixture.loc[k, d], mixture.scale[k, d]) for d in range(3))
        for k in range(4)] for xi in x])
    # The Laplacian terms are summed in float32.
    np.testing.assert_allclose(mixture.log_densities(x), expected, rtol=1e-6)
    t, log_likelihood = EM(x).expectation(mixture)
    np.testing.assert_allclose(t, np.exp(expected - special.logsumexp(expected, axis=1, keepdims=True)), rtol=1e-5)
    assert log_likelihood == pytest.approx(np.sum(special.logsumexp(expected, axis=1)), rel=1e-6)


def numpy_weighted_median(x, weights):
    """Eq. 2 as the released code reads it, sorting every time: per (k, d),
    the first x_.d in (stable) sorted order whose cumulative weight (in
    float64) reaches half the total (up to a 1e-12 relative slack for
    rounding)."""
    median = np.empty((weights.shape[1], x.shape[1]))
    for d in range(x.shape[1]):
        order = np.argsort(x[:, d], kind="stable")
        for k in range(weights.shape[1]):
            cumulative = np.cumsum(weights[order, k], dtype=np.float64)
            half = weights[:, k].sum(dtype=np.float64) / 2
            median[k, d] = np.sort(x[:, d], kind="stable")[np.argmax(cumulative >= half * (1 - 1e-12))]
    return median


@pytest.mark.parametrize("dtype", [np.float32, np.float64])  # of the weights (T is float32)
@pytest.mark.parametrize("block", [1, 2, 7, 256])  # MEDIAN_BLOCK: several blocks, uneven, one
def test_weighted_median_of_the_once_sorted_data_equals_sorting_every_time(monkeypatch, block, dtype):
    monkeypatch.setattr(mixtures, "MEDIAN_BLOCK", block)
    rng = np.random.default_rng(2)
    x = np.round(rng.normal(size=(601, 4)), 1).astype(np.float32)  # many ties; the EM holds float32 data
    weights = rng.dirichlet(np.ones(5), size=601).astype(dtype)
    weights[rng.random(weights.shape) < 0.3] = 0.0  # zero weights
    weights[:, 4] = 0.0  # a component without any weight: the smallest value
    np.testing.assert_array_equal(EM(x).weighted_median(weights), numpy_weighted_median(x, weights))
    assert np.all(EM(x).weighted_median(weights)[4] == x.min(axis=0))


@pytest.mark.parametrize("block", [1, 2, 3, 256])
def test_weighted_median_hand_built_cases(monkeypatch, block):
    """x = 1, 2, 2, 3, 10 (shuffled); the first value at which the
    cumulative weight reaches half the total."""
    monkeypatch.setattr(mixtures, "MEDIAN_BLOCK", block)
    x = np.array([[2.0], [10.0], [1.0], [3.0], [2.0]])
    weights = np.array([  # columns: components; rows follow x
        [1, 0, 0, 1, 0, 1],
        [1, 1, 0, 0, 2, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 0, 1, 1, 0, 1],
        [1, 0, 1, 1, 0, 0],
    ], float)
    # uniform: 2.5 of 5 reached at the second 2; {1, 10}: 1 of 2 at 1 (the
    # lower median); only 1, 2, 3 weighted: 1.5 of 3 at 2; 1, 2, 2, 3: 2 of
    # 4 at the first 2 (a tie); only 10; only 2 and 3, equally: 2.
    np.testing.assert_array_equal(EM(x).weighted_median(weights)[:, 0], [2, 1, 2, 2, 10, 2])
    np.testing.assert_array_equal(EM(x).weighted_median(np.zeros((5, 1)))[:, 0], [1])  # no weight: the smallest


def test_weighted_median_minimises_the_weighted_absolute_deviation():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 3)).astype(np.float32).astype(np.float64)  # as the EM holds data
    weights = rng.uniform(size=(40, 2))
    median = EM(x).weighted_median(weights)
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
                        for c, n in zip(centres, (30, 20, 15))]).astype(np.float32).astype(np.float64)
    start = Mixture(np.array([0.5, 0.3, 0.2]), centres + rng.normal(scale=0.5, size=(3, 4)),
                    rng.uniform(0.7, 1.5, size=(3, 4)), rng.integers(0, 2, size=(3, 4)).astype(bool))
    em = EM(x)
    t, _ = em.expectation(start)
    mixture = em.maximisation(t, policy)
    expected_t, weights, loc, scale, laplacian = numpy_em_step(x, start.weights, start.loc, start.scale,
                                                               start.laplacian, policy)
    # The data as the EM holds them (float32); T in float32, the Laplacian
    # terms summed in float32.
    np.testing.assert_allclose(t, expected_t, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(mixture.laplacian, laplacian)
    np.testing.assert_allclose(mixture.weights, weights, rtol=1e-6)
    np.testing.assert_allclose(mixture.loc, loc, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(mixture.scale, scale, rtol=1e-6)
    if policy == "hybrid":  # the data makes eq. 9 choose both families
        assert 0.2 < laplacian.mean() < 0.8, laplacian

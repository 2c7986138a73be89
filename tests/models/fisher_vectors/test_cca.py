"""The regularised CCA against the former implementation's equations (kept
here in NumPy as the reference), an independent eigenproblem and its
whitening identities."""

import numpy as np
import pytest
from scipy import linalg

from models.fisher_vectors import cca
from models.fisher_vectors.cca import RegularisedCCA


def paired_views(n=400, p=6, q=4, seed=0):
    rng = np.random.default_rng(seed)
    shared = rng.normal(size=(n, 3))
    x = shared @ rng.normal(size=(3, p)) + rng.normal(scale=1.0, size=(n, p)) + 5.0
    y = shared @ rng.normal(size=(3, q)) + rng.normal(scale=1.0, size=(n, q)) - 2.0
    return x, y


def former_cca(x, y, eta):
    """The former `RegularisedCCA(x, y).solve(eta)`, transcribed: centred,
    unbiased covariances, each eigendecomposed, the inverse roots with the
    ridge 1e-8 + eta * lambda_max, the SVD of the whitened cross-covariance.
    Returns (w_x, w_y, correlations)."""
    xc, yc = x - x.mean(axis=0), y - y.mean(axis=0)
    scale = 1.0 / (len(x) - 1)

    def inverse_root(covariance):
        values, vectors = np.linalg.eigh(covariance)
        shifted = np.maximum(values, 0.0) + 1e-8 + eta * max(values.max(), 0.0)
        return (vectors / np.sqrt(shifted)) @ vectors.T

    root_x, root_y = inverse_root(scale * xc.T @ xc), inverse_root(scale * yc.T @ yc)
    u, r, vt = np.linalg.svd(root_x @ (scale * xc.T @ yc) @ root_y, full_matrices=False)
    return root_x @ u, root_y @ vt.T, r


def assert_same_as_former(projection, x, y, eta):
    w_x, w_y, r = former_cca(x, y, eta)
    np.testing.assert_allclose(projection.correlations, r, rtol=1e-9, atol=1e-12)
    signs = np.sign(np.sum(projection.w_y * w_y, axis=0))  # each direction's sign is arbitrary
    for ours, former in ((projection.w_x * signs, w_x), (projection.w_y * signs, w_y)):
        np.testing.assert_allclose(ours, former, rtol=0, atol=1e-8 * np.abs(former).max())
    np.testing.assert_allclose(projection.mean_x, x.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(projection.mean_y, y.mean(axis=0), rtol=1e-12)


@pytest.mark.parametrize(("n", "p", "q"), [
    (400, 30, 8),  # more text columns: the Cholesky solve is on x's side
    (400, 8, 30),  # more image columns: on y's
    (60, 90, 12),  # fewer rows than columns: a singular C_xx made definite by the ridge alone
    (60, 12, 90),
])
@pytest.mark.parametrize("eta", [1e-5, 1e-2, 0.1])
def test_the_same_projections_as_the_former_whitened_svd(n, p, q, eta):
    x, y = paired_views(n, p, q, seed=n + p)
    assert_same_as_former(RegularisedCCA(x, y).solve(eta), x, y, eta)


def test_a_sweep_solves_every_eta_as_a_fresh_fit(monkeypatch):
    # Each solve writes its Cholesky factor over the covariance's lower triangle, tile by tile (tiles of 7 here).
    monkeypatch.setattr(cca, "BLOCK_ROWS", 7)
    x, y = paired_views(n=50, p=30, q=5, seed=3)
    solver = RegularisedCCA(x, y)
    for eta in (0.1, 1e-5, 1e-2, 0.1):
        assert_same_as_former(solver.solve(eta), x, y, eta)


def test_streamed_blocks_of_float32_rows_give_the_fit_of_the_whole_arrays():
    x, y = paired_views(n=300, p=20, q=6, seed=4)
    x = x.astype(np.float32)  # read as it comes; the sums are float64
    cuts = [0, 1, 2, 90, 300]  # a one-row first block sets the shift the sums are taken about
    streamed = RegularisedCCA.from_blocks((x[a:b], y[a:b]) for a, b in zip(cuts, cuts[1:]))
    assert_same_as_former(streamed.solve(1e-3), x.astype(np.float64), y, 1e-3)


def test_far_from_zero_features_are_centred_without_cancellation(monkeypatch):
    monkeypatch.setattr(cca, "BLOCK_ROWS", 7)  # sums about the first 7 rows' mean, not the exact one
    x, y = paired_views(n=300, p=10, q=4, seed=5)
    x, y = x + 1e6, y - 1e6
    assert_same_as_former(RegularisedCCA(x, y).solve(1e-3), x, y, 1e-3)


def test_correlations_are_those_of_the_generalised_eigenproblem_and_of_the_projections():
    x, y = paired_views()
    projection = RegularisedCCA(x, y).solve(0.0)
    # Independent: r^2 are the eigenvalues of C_xx^-1 C_xy C_yy^-1 C_yx.
    c = np.cov(np.hstack([x, y]).T)
    cxx, cyy, cxy = c[:6, :6], c[6:, 6:], c[:6, 6:]
    squared = np.sort(np.real(linalg.eigvals(np.linalg.solve(cxx, cxy) @ np.linalg.solve(cyy, cxy.T))))[::-1]
    np.testing.assert_allclose(projection.correlations**2, squared[:4], rtol=1e-6, atol=1e-9)
    # and the sample correlation of each pair of canonical variables.
    u, v = projection.project_x(x, power=0), projection.project_y(y, power=0)
    sample = [np.corrcoef(u[:, i], v[:, i])[0, 1] for i in range(4)]
    np.testing.assert_allclose(sample, projection.correlations, rtol=1e-6)
    assert np.all(np.diff(projection.correlations) <= 0) and projection.correlations[0] > 0.5


@pytest.mark.parametrize("eta", [0.0, 1e-3, 0.1])
def test_whitening_identities_with_the_ridge_relative_to_the_top_eigenvalue(eta):
    x, y = paired_views(seed=1)
    projection = RegularisedCCA(x, y).solve(eta)
    c = np.cov(np.hstack([x, y]).T)
    cxx, cyy, cxy = c[:6, :6], c[6:, 6:], c[:6, 6:]
    cxx_reg = cxx + (1e-8 + eta * np.linalg.eigvalsh(cxx).max()) * np.eye(6)
    cyy_reg = cyy + (1e-8 + eta * np.linalg.eigvalsh(cyy).max()) * np.eye(4)
    w_x, w_y = projection.w_x, projection.w_y
    np.testing.assert_allclose(w_x.T @ cxx_reg @ w_x, np.eye(4), atol=1e-8)
    np.testing.assert_allclose(w_y.T @ cyy_reg @ w_y, np.eye(4), atol=1e-8)
    np.testing.assert_allclose(w_x.T @ cxy @ w_y, np.diag(projection.correlations), atol=1e-8)
    # Projections are centred and scaled by r**power.
    np.testing.assert_allclose(projection.project_x(x).mean(axis=0), 0, atol=1e-9)
    np.testing.assert_allclose(projection.project_y(y, power=2), projection.project_y(y, power=0) * projection.correlations**2)


def test_more_ridge_shrinks_the_correlations():
    x, y = paired_views(seed=2)
    solver = RegularisedCCA(x, y)
    correlations = [solver.solve(eta).correlations[0] for eta in (0.0, 0.01, 0.1, 1.0)]
    assert all(a > b for a, b in zip(correlations, correlations[1:]))


@pytest.mark.parametrize(("x_rows", "y_rows"), [(5, 4), (1, 1)])
def test_unpaired_or_too_few_rows_are_refused(x_rows, y_rows):
    with pytest.raises(ValueError, match="CCA needs"):
        RegularisedCCA(np.ones((x_rows, 3)), np.ones((y_rows, 2)))

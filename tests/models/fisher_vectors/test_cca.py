"""The regularised CCA against an independent eigenproblem and its
whitening identities."""

import numpy as np
import pytest
from scipy import linalg

from models.fisher_vectors.cca import RegularisedCCA


def paired_views(n=400, p=6, q=4, seed=0):
    rng = np.random.default_rng(seed)
    shared = rng.normal(size=(n, 3))
    x = shared @ rng.normal(size=(3, p)) + rng.normal(scale=1.0, size=(n, p)) + 5.0
    y = shared @ rng.normal(size=(3, q)) + rng.normal(scale=1.0, size=(n, q)) - 2.0
    return x, y


def test_correlations_are_those_of_the_generalised_eigenproblem_and_of_the_projections():
    x, y = paired_views()
    cca = RegularisedCCA(x, y)
    projection = cca.solve(0.0)
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
    cca = RegularisedCCA(x, y)
    projection = cca.solve(eta)
    c = np.cov(np.hstack([x, y]).T)
    cxx, cyy, cxy = c[:6, :6], c[6:, 6:], c[:6, 6:]
    cxx_reg = cxx + (1e-8 + eta * np.linalg.eigvalsh(cxx).max()) * np.eye(6)
    cyy_reg = cyy + (1e-8 + eta * np.linalg.eigvalsh(cyy).max()) * np.eye(4)
    np.testing.assert_allclose(cca.regularised_covariances(eta)[0], cxx_reg, rtol=1e-9, atol=1e-9)
    w_x, w_y = projection.w_x, projection.w_y
    np.testing.assert_allclose(w_x.T @ cxx_reg @ w_x, np.eye(4), atol=1e-8)
    np.testing.assert_allclose(w_y.T @ cyy_reg @ w_y, np.eye(4), atol=1e-8)
    np.testing.assert_allclose(w_x.T @ cxy @ w_y, np.diag(projection.correlations), atol=1e-8)
    # Projections are centred and scaled by r**power.
    np.testing.assert_allclose(projection.project_x(x).mean(axis=0), 0, atol=1e-9)
    np.testing.assert_allclose(projection.project_y(y, power=2), projection.project_y(y, power=0) * projection.correlations**2)


def test_more_ridge_shrinks_the_correlations():
    x, y = paired_views(seed=2)
    cca = RegularisedCCA(x, y)
    correlations = [cca.solve(eta).correlations[0] for eta in (0.0, 0.01, 0.1, 1.0)]
    assert all(a > b for a, b in zip(correlations, correlations[1:]))

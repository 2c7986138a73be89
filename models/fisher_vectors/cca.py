"""Regularised linear CCA (Klein et al. 2015, Sec. 5: "the regularized CCA
algorithm [46]" (Vinod's canonical ridge), "we use linear CCA").

What the paper leaves out, from the authors' released code (`cca_alg.m`):
both views are centred; each view's covariance gets a ridge relative to its
largest eigenvalue, C <- C + (1e-8 + eta * lambda_max(C)) I, the same eta
for both views; all min(p, q) directions are kept; a projection is scaled
by the canonical correlations (then, for retrieval, L2-normalised and
compared by cosine).

The solution is written with the whitened cross-covariance:

    W_x = C_xx^-1/2 U,  W_y = C_yy^-1/2 V,  U diag(r) V^T = svd(C_xx^-1/2 C_xy C_yy^-1/2)

which gives W_x^T C_xx W_x = I, W_y^T C_yy W_y = I (regularised
covariances), W_x^T C_xy W_y = diag(r), correlations sorted and signs
consistent. Each view's covariance is eigendecomposed once, so every eta of
a sweep only rescales eigenvalues.
"""

import dataclasses

import numpy as np
from scipy import linalg

BASE_RIDGE = 1e-8


@dataclasses.dataclass
class CCAProjection:
    """A fitted CCA: `project_x(x) = (x - mean_x) @ w_x * r**power`.

    Attributes:
      mean_x, mean_y: the views' training means, [p] and [q].
      w_x, w_y: canonical directions, [p, d] and [q, d], d = min(p, q).
      correlations: r, [d], descending.
      eta: the ridge it was fitted with.
    """

    mean_x: np.ndarray
    mean_y: np.ndarray
    w_x: np.ndarray
    w_y: np.ndarray
    correlations: np.ndarray
    eta: float

    def project_x(self, x, power=1.0):
        return (np.asarray(x, np.float64) - self.mean_x) @ self.w_x * self.correlations**power

    def project_y(self, y, power=1.0):
        return (np.asarray(y, np.float64) - self.mean_y) @ self.w_y * self.correlations**power


class RegularisedCCA:
    """The covariances of two paired views, ready to solve for any ridge.

    Args:
      x: float [n, p], one view (e.g. sentence vectors).
      y: float [n, q], the other (image features), row-paired with x.
    """

    def __init__(self, x, y):
        x = np.asarray(x, np.float64)
        y = np.asarray(y, np.float64)
        if len(x) != len(y) or len(x) < 2:
            raise ValueError(f"CCA needs at least 2 paired rows; got {len(x)} and {len(y)}")
        self.mean_x, self.mean_y = x.mean(axis=0), y.mean(axis=0)
        xc, yc = x - self.mean_x, y - self.mean_y
        scale = 1.0 / (len(x) - 1)  # unbiased, as MATLAB's cov
        self.cross = scale * (xc.T @ yc)
        self.eig_x = linalg.eigh(scale * (xc.T @ xc))
        self.eig_y = linalg.eigh(scale * (yc.T @ yc))

    def solve(self, eta):
        """The CCA with ridge `eta` (relative to each view's top eigenvalue)."""
        if eta < 0:
            raise ValueError(f"eta must be non-negative, got {eta}")
        inverse_root_x = _inverse_root(*self.eig_x, eta)
        inverse_root_y = _inverse_root(*self.eig_y, eta)
        u, r, vt = linalg.svd(inverse_root_x @ self.cross @ inverse_root_y, full_matrices=False)
        return CCAProjection(self.mean_x, self.mean_y, inverse_root_x @ u, inverse_root_y @ vt.T, r, eta)

    def regularised_covariances(self, eta):
        """(C_xx, C_yy) with the ridge of `eta`, for checks."""
        return tuple(
            (vectors * (values + _ridge(values, eta))) @ vectors.T for values, vectors in (self.eig_x, self.eig_y)
        )


def _ridge(eigenvalues, eta):
    return BASE_RIDGE + eta * max(eigenvalues.max(), 0.0)


def _inverse_root(eigenvalues, eigenvectors, eta):
    """(C + ridge I)^-1/2 from C's eigendecomposition."""
    shifted = np.maximum(eigenvalues, 0.0) + _ridge(eigenvalues, eta)
    return (eigenvectors / np.sqrt(shifted)) @ eigenvectors.T

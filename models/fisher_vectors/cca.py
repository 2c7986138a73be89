"""Regularised linear CCA (Klein et al. 2015, Sec. 5: "the regularized CCA
algorithm [46]" (Vinod's canonical ridge), "we use linear CCA"), at the
paper's sizes on one machine.

What the paper leaves out, from the authors' released code (`cca_alg.m`):
both views are centred; each view's covariance gets a ridge relative to its
largest eigenvalue, C <- C + (1e-8 + eta * lambda_max(C)) I, the same eta
for both views; all min(p, q) directions are kept; a projection is scaled
by the canonical correlations (then, for retrieval, L2-normalised and
compared by cosine).

The solution is that of the whitened cross-covariance,

    W_x = C_xx^-1/2 U,  W_y = C_yy^-1/2 V,  U diag(r) V^T = svd(C_xx^-1/2 C_xy C_yy^-1/2)

(W_x^T C_xx W_x = I, W_y^T C_yy W_y = I with the regularised covariances,
W_x^T C_xy W_y = diag(r), correlations descending), computed without the
larger view's inverse square root. With s the view of fewer columns
(d = min(p, q), the image features at the paper's sizes) and b the other:

    C_ss^-1/2 C_sb C_bb^-1 C_bs C_ss^-1/2 = V diag(r^2) V^T     (eigh, [d, d])
    W_s = C_ss^-1/2 V,   W_b = C_bb^-1 C_bs W_s diag(1/r)

(V are the right singular vectors above, and C_bb^-1/2 U diag(r) = C_bb^-1
C_bs W_s): the same directions up to the sign of each, which the cosine of
the r-scaled projections does not see. The smaller view is eigendecomposed
once, so that every eta of a sweep only rescales its eigenvalues; the
larger one needs one Cholesky solve (C_bb + ridge I) Z = C_bs per eta, and
its lambda_max by Lanczos (ARPACK).

Why this form, at the paper's sizes (2 K D = 18,000-d and 36,000-d
GMM+HGLMM Fisher vectors, 4,096-d image features, 30k-150k rows), measured
on this project's 2-core machine (shared: the ratios, not the seconds) with
`tools.bench_cca` and the same LAPACK calls at 4,000 columns:
- An eigendecomposition (the former code, of both covariances) took about
  40 times a Cholesky factorisation of the same 4,000^2 matrix (its
  tridiagonal reduction is memory-bound): a day per fit at 36,000 columns
  by the cube of the size, and a second 36,000^2 matrix (20.7 GB in all).
- The dual (kernel) form, for rows < columns, took the same time per eta
  as this one at a tenth of 30,000 rows x 36,000 x 4,096 columns (n^3/3 +
  2 n^2 d + 2 n b d flops against b^3/3 + 2 b^2 d), and needs every row in
  memory at once; with 150k rows it does not apply. Not kept.
- The authors' random subsampling of coordinates changes the answer; this
  form is the former one's to rounding (1e-10).
- Float64 throughout (the sums, the Cholesky factor, the eigenproblem):
  float32 BLAS was twice as fast, but a float32 Cholesky moved the cosine
  scores by up to 2e-5 at the sweep's least eta (1e-5) on 2,000-d FV-like
  features, and float32 sums under a float64 Cholesky would need a float32
  and a float64 copy of the covariance (15.6 GB at 36,000). Float64 fits.
Memory: the larger view's covariance lives in the upper triangle of one
[b, b] float64 array, and each eta's Cholesky factor is written into its
lower triangle (the diagonal is kept aside), so a sweep never holds two
b x b matrices (36,000^2 x 8 bytes: 10.4 GB, rather than 20.7); rows are
read in blocks, once, about a shift (the first block's mean), so
`from_blocks` takes features as they are encoded and never holds them all
(`peak_bytes` estimates the peak).
"""

import dataclasses

import numpy as np
from scipy import linalg
from scipy.linalg import blas, lapack
from scipy.sparse.linalg import LinearOperator, eigsh
from threadpoolctl import threadpool_limits

BASE_RIDGE = 1e-8
BLOCK_ROWS = 1024  # rows per accumulated block, and the tile of the triangle copies


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
      x: float [n, p], one view (e.g. sentence vectors), any float dtype:
        it is read BLOCK_ROWS rows at a time, never copied whole.
      y: float [n, q], the other (image features), row-paired with x.

    `RegularisedCCA.from_blocks` takes the rows as a stream of blocks instead.
    """

    def __init__(self, x, y):
        if len(x) != len(y):
            raise ValueError(f"CCA needs paired rows; got {len(x)} and {len(y)}")
        self._accumulate((x[a : a + BLOCK_ROWS], y[a : a + BLOCK_ROWS]) for a in range(0, len(x), BLOCK_ROWS))

    @classmethod
    def from_blocks(cls, blocks):
        """The CCA of paired row blocks, `(x [m, p], y [m, q])` pairs read
        once (e.g. features encoded batch by batch, never all in memory)."""
        cca = cls.__new__(cls)
        cca._accumulate(blocks)
        return cca

    def _accumulate(self, blocks):
        """Means and covariances (unbiased, as MATLAB's cov) in one pass,
        in float64: sums about the first block's mean, which keeps the final
        centring's cancellation small, updated in place by BLAS."""
        n = 0
        for x, y in blocks:
            if len(x) != len(y):
                raise ValueError(f"CCA needs paired rows; got a block of {len(x)} and {len(y)}")
            if not n:
                shift_x, shift_y = np.mean(x, axis=0, dtype=np.float64), np.mean(y, axis=0, dtype=np.float64)
                sum_x, sum_y = np.zeros_like(shift_x), np.zeros_like(shift_y)
                xx = np.zeros((len(shift_x), len(shift_x)), order="F")  # upper triangles only (syrk, syr)
                yy = np.zeros((len(shift_y), len(shift_y)), order="F")
                xy = np.zeros((len(shift_x), len(shift_y)), order="F")
            x = np.asarray(x, np.float64) - shift_x
            y = np.asarray(y, np.float64) - shift_y
            n += len(x)
            sum_x += x.sum(axis=0)
            sum_y += y.sum(axis=0)
            with _one_blas_thread():
                blas.dsyrk(1.0, x.T, beta=1.0, c=xx, overwrite_c=1)
                blas.dsyrk(1.0, y.T, beta=1.0, c=yy, overwrite_c=1)
            blas.dgemm(1.0, x.T, y.T, beta=1.0, c=xy, trans_b=1, overwrite_c=1)
        if n < 2:
            raise ValueError(f"CCA needs at least 2 paired rows; got {n}")
        offset_x, offset_y = sum_x / n, sum_y / n
        self.mean_x, self.mean_y = shift_x + offset_x, shift_y + offset_y
        blas.dsyr(-n, offset_x, a=xx, overwrite_a=1)
        blas.dsyr(-n, offset_y, a=yy, overwrite_a=1)
        blas.dger(-n, offset_x, offset_y, a=xy, overwrite_a=1)
        for scatter in (xx, yy, xy):
            scatter *= 1.0 / (n - 1)
        self.larger_is_x = xx.shape[0] >= yy.shape[0]
        larger, smaller = (xx, yy) if self.larger_is_x else (yy, xx)
        self.larger = _LargerView(larger)
        self.eig_smaller = linalg.eigh(smaller, lower=False)
        self.cross = xy if self.larger_is_x else xy.T  # C_bs, [b, d]

    def solve(self, eta):
        """The CCA with ridge `eta` (relative to each view's top eigenvalue)."""
        if eta < 0:
            raise ValueError(f"eta must be non-negative, got {eta}")
        inverse_root = _inverse_root(*self.eig_smaller, eta)
        directions = self.larger.solve(eta, self.cross)  # C_bb^-1 C_bs, then W_b in place
        squared, v = linalg.eigh(inverse_root @ (self.cross.T @ directions) @ inverse_root)
        correlations = np.sqrt(np.maximum(squared[::-1], 0.0))
        w_smaller = inverse_root @ v[:, ::-1]
        # A zero correlation leaves its direction in the larger view undetermined (0/0): zero, as r**power makes it.
        scale = np.divide(w_smaller, correlations, out=np.zeros_like(w_smaller), where=correlations > 0)
        for a in range(0, len(directions), BLOCK_ROWS):  # W_b = Z W_s / r, in place: no second [b, d] array
            directions[a : a + BLOCK_ROWS] = directions[a : a + BLOCK_ROWS] @ scale
        w_x, w_y = (directions, w_smaller) if self.larger_is_x else (w_smaller, directions)
        return CCAProjection(self.mean_x, self.mean_y, w_x, w_y, correlations, eta)


class _LargerView:
    """The larger view's covariance C, [b, b], in the upper triangle of a
    float64 array whose lower triangle takes each ridge's Cholesky factor
    (the diagonal, which both share, is kept aside)."""

    def __init__(self, covariance):
        self.matrix = covariance
        self.diagonal = covariance.diagonal().copy()
        self.top_eigenvalue = _top_eigenvalue(covariance)

    def solve(self, eta, rhs):
        """(C + ridge I)^-1 rhs, a new [b, k] array."""
        ridge = _ridge(self.top_eigenvalue, eta)
        _lower_from_upper(self.matrix, self.diagonal + ridge)
        with _one_blas_thread():
            factor, info = lapack.dpotrf(self.matrix, lower=1, clean=0, overwrite_a=1)
        if info:
            raise ValueError(f"the regularised covariance is not positive definite at eta={eta}; use a larger eta")
        solution, info = lapack.dpotrs(factor, np.array(rhs, order="F"), lower=1, overwrite_b=1)
        return solution


def peak_bytes(p, q):
    """About the most memory `RegularisedCCA` holds for views of p and q
    columns (with b = max(p, q), d = min(p, q)): the [b, b] covariance, the
    [b, d] cross-covariance and solution, a dozen [d, d] matrices and a
    block of rows of each view in float64 (not the caller's data)."""
    b, d = max(p, q), min(p, q)
    return 8 * (b * b + 2 * b * d + 12 * d * d + 2 * BLOCK_ROWS * (b + d))


def _one_blas_thread():
    """A context for dsyrk and dpotrf, which calls it: with more than one
    thread, the dsyrk of OpenBLAS 0.3.30 and 0.3.31 (SciPy's and NumPy's
    wheels) crashes (SIGSEGV) on its AVX-512 kernels from about 16,000
    columns (this project's machine, with 2 threads); with one it does not."""
    return threadpool_limits(1, user_api="blas")


def _lower_from_upper(matrix, diagonal):
    """Writes the transpose of `matrix`'s strict upper triangle into its
    lower one, and `diagonal` on the diagonal, tile by tile (no [b, b]
    temporary)."""
    for a in range(0, len(matrix), BLOCK_ROWS):
        end = a + BLOCK_ROWS
        matrix[end:, a:end] = matrix[a:end, end:].T
        upper = np.triu(matrix[a:end, a:end], 1)
        matrix[a:end, a:end] = upper + upper.T
    np.fill_diagonal(matrix, diagonal)


def _top_eigenvalue(upper):
    """lambda_max of the symmetric matrix held in `upper`'s upper triangle,
    by Lanczos on its products (symv reads that triangle only)."""
    size = len(upper)
    operator = LinearOperator((size, size), matvec=lambda v: blas.dsymv(1.0, upper, np.ravel(v)), dtype=np.float64)
    return eigsh(operator, k=1, which="LA", v0=np.ones(size), return_eigenvectors=False)[0]


def _ridge(top_eigenvalue, eta):
    return BASE_RIDGE + eta * max(top_eigenvalue, 0.0)


def _inverse_root(eigenvalues, eigenvectors, eta):
    """(C + ridge I)^-1/2 from C's eigendecomposition."""
    shifted = np.maximum(eigenvalues, 0.0) + _ridge(eigenvalues.max(), eta)
    return (eigenvectors / np.sqrt(shifted)) @ eigenvectors.T

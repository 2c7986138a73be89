"""EM for the diagonal mixtures of Klein et al. 2015: Gaussian (GMM),
Laplacian (LMM, Sec. 3) and hybrid Gaussian-Laplacian (HGLMM, Sec. 4).

One EM covers the three: every (component k, dimension d) is either
Gaussian, N(x; mu, sigma^2), or Laplacian, (2s)^-1 exp(-|x - m| / s), as
its switch b_kd says (the hybrid density l^b g^(1-b) of Sec. 4.1; eq. 9
makes every b 0 or 1, so the mixture is always a normalised density):

    E-step     T_ki = tau_k h_k(x_i) / sum_r tau_r h_r(x_i)
    M-step     tau_k = sum_i T_ki / N                                    (1)
               m_kd  = the T-weighted median of x_.d                     (2)
               s_kd  = sum_i T_ki |x_id - m_kd| / sum_i T_ki             (3)
               mu_kd = sum_i T_ki x_id / sum_i T_ki                      (6)
               sigma_kd^2 = sum_i T_ki (x_id - mu_kd)^2 / sum_i T_ki     (7)
    HGLMM      b_kd = 1 if L_kd > G_kd else 0                           (8, 9)
               with L, G the T-weighted log-likelihoods of dimension d of
               component k under the new Laplacian and Gaussian.

`policy` chooses b: "gaussian" (b = 0: a GMM, here to test the shared EM
against scikit-learn's), "laplacian" (b = 1: the LMM) or "hybrid" (eq. 9:
the HGLMM). Each block maximises the expected complete log-likelihood, so
the log-likelihood never decreases (a generalised EM; tested).

Readings where the paper is silent, from the authors' released code:
initialisation with uniform weights, m = mu = K random samples, s the mean
absolute deviation from the global median, sigma^2 the global variance, b
random (HGLMM); 10 iterations for the HGLMM, at most 10 for the LMM
(stopping once the responsibilities move by less than 0.01 in Frobenius
norm); the weighted median is the first sorted sample whose cumulative
weight reaches half the total (so m is a data value). The code's floors
(s, sigma^2 >= 1e-3 on data scaled by 10) are applied here on unit-scale
data: s >= 1e-4, sigma^2 >= 1e-5.

How it runs at the paper's scale (300,000 x 300 vectors, K = 30) on a few
CPU cores (`EM`):
- The data never change, only the responsibilities, so every dimension is
  sorted once, before the first iteration. The weighted medians (eq. 2)
  are then found in that order: the weights' sums over blocks of
  `MEDIAN_BLOCK` consecutive sorted samples give the block in which the
  cumulative weight reaches half the total, and a cumulative sum inside
  that block the sample (the median of a sort and a cumulative sum over all
  N samples, without either).
- The log-likelihood costs nothing: it is the E-step's log-sum-exp, that
  of iteration i + 1 for the mixture of iteration i (one E-step after the
  last iteration gives the last mixture's).
- Rows are processed in chunks of `CHUNK_ROWS` (the medians: in groups of
  dimensions) by one thread per core (NumPy releases the GIL), each with
  BLAS held to one thread: beyond the data, its sort order and T, memory
  holds a few chunks of `CHUNK_ROWS` x D and, per thread, one N x K copy of
  T in a dimension's order.
- Precision: the two large arrays, the data (N x D) and T (N x K), are
  held in float32, which halves their memory and the time of reading T in
  every dimension's order; the arithmetic is float64 (on each chunk). In
  float32 the sums (over the dimensions in the densities, over the samples
  in the M-step) would move some medians, each the sample where a sum of
  weights crosses half the total: on the quick preset's GloVe vectors, the
  LMM's locations move by up to 3e-3 when the |x - m| terms are summed in
  float32, by 1e-8 with the float32 storage alone.
"""

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import threadpool_limits

from common import machine

POLICIES = ("gaussian", "laplacian", "hybrid")
MIN_SCALE = 1e-4  # s, the Laplacian scale
MIN_VARIANCE = 1e-5  # sigma^2
# Rows of the data per task: each holds a few CHUNK_ROWS x D temporaries.
CHUNK_ROWS = 2048
# Sorted samples per partial sum of the weighted median's search.
MEDIAN_BLOCK = 256


@dataclasses.dataclass
class Mixture:
    """A diagonal mixture whose (k, d) entries are Gaussian or Laplacian.

    Attributes:
      weights: tau, float64 [K].
      loc: mu (Gaussian entries) or m (Laplacian entries), float64 [K, D].
      scale: sigma (Gaussian: the standard deviation) or s (Laplacian),
        float64 [K, D].
      laplacian: b, bool [K, D].
    """

    weights: np.ndarray
    loc: np.ndarray
    scale: np.ndarray
    laplacian: np.ndarray

    def log_densities(self, x):
        """log tau_k + log h_k(x_i): float64 [N, K] (besides it, N x D
        temporaries: `EM` calls it on chunks of rows)."""
        x = np.asarray(x, np.float64)
        gaussian = ~self.laplacian
        # Gaussian dimensions by matrix products: sum_d (1 - b) log N(x_d).
        precision = gaussian / self.scale**2
        result = (
            -0.5 * (x**2) @ precision.T
            + x @ (precision * self.loc).T
            - 0.5 * np.sum(precision * self.loc**2 + gaussian * np.log(2 * np.pi * self.scale**2), axis=1)
        )
        result -= np.sum(self.laplacian * np.log(2 * self.scale), axis=1)
        inverse = self.laplacian / self.scale
        for k in np.flatnonzero(self.laplacian.any(axis=1)):
            result[:, k] -= np.abs(x - self.loc[k]) @ inverse[k]
        return result + np.log(self.weights)


class EM:
    """The E- and M-steps on fixed data, which are sorted once.

    Args:
      x: float [N, D] data (held as float32; see the module docstring).
      workers: threads (None: the cores this process may use).
    """

    def __init__(self, x, workers=None):
        self.x = np.asarray(x, np.float32)
        self.workers = workers or machine.cores()
        self.row_chunks = [slice(a, a + CHUNK_ROWS) for a in range(0, len(self.x), CHUNK_ROWS)]
        self.dimension_groups = np.array_split(np.arange(self.x.shape[1]), min(self.x.shape[1], 4 * self.workers))
        # Every dimension's stable sort order, [D, N] (int32 halves it).
        self.order = np.concatenate(self._map(
            lambda dims: np.argsort(self.x[:, dims], axis=0, kind="stable").T.astype(np.int32),
            self.dimension_groups))

    def expectation(self, mixture):
        """The E-step: (T float32 [N, K], the log-likelihood sum_i log p(x_i))."""

        def rows(chunk):
            log_p = mixture.log_densities(self.x[chunk])
            top = log_p.max(axis=1, keepdims=True)
            log_sum = top + np.log(np.sum(np.exp(log_p - top), axis=1, keepdims=True))
            return np.exp(log_p - log_sum).astype(np.float32), np.sum(log_sum)

        parts = self._map(rows, self.row_chunks)
        return np.concatenate([t for t, _ in parts]), float(sum(log_sum for _, log_sum in parts))

    def maximisation(self, t, policy):
        """The M-step from the E-step's T [N, K]: the new `Mixture`."""
        median = self.weighted_median(t) if policy != "gaussian" else None

        def rows(chunk):
            x, responsibilities = self.x[chunk].astype(np.float64), t[chunk].astype(np.float64)
            sums = [responsibilities.sum(axis=0), responsibilities.T @ x, responsibilities.T @ x**2]
            if median is not None:  # sum_i T_ki |x_id - m_kd|
                sums.append(np.stack([responsibilities[:, k] @ np.abs(x - m) for k, m in enumerate(median)]))
            return sums

        counts, weighted_sum, weighted_square_sum, *absolute_sum = (
            sum(parts) for parts in zip(*self._map(rows, self.row_chunks)))
        counts = np.maximum(counts, 1e-12)  # sum_i T_ki
        weights = counts / len(self.x)  # (1)
        mean = weighted_sum / counts[:, None]  # (6)
        squared_deviation = np.maximum(weighted_square_sum / counts[:, None] - mean**2, 0.0)
        variance = np.maximum(squared_deviation, MIN_VARIANCE)  # (7)
        if median is None:
            median, absolute_deviation = mean, np.ones_like(mean)
        else:
            absolute_deviation = absolute_sum[0] / counts[:, None]
        laplace_scale = np.maximum(absolute_deviation, MIN_SCALE)  # (3)
        if policy == "hybrid":
            # Eqs. 8-9 with the new parameters and this iteration's T:
            # sum_i T_ki log l(x_id) and sum_i T_ki log g(x_id).
            laplace_ll = -counts[:, None] * (np.log(2 * laplace_scale) + absolute_deviation / laplace_scale)
            gauss_ll = -counts[:, None] * (0.5 * np.log(2 * np.pi * variance) + squared_deviation / (2 * variance))
            laplacian = laplace_ll > gauss_ll
        else:
            laplacian = np.full(mean.shape, policy == "laplacian")
        loc = np.where(laplacian, median, mean)  # (2) or (6)
        scale = np.where(laplacian, laplace_scale, np.sqrt(variance))
        return Mixture(weights, loc, scale, laplacian)

    def weighted_median(self, weights):
        """m_kd of eq. 2: for every component k (weights [N, K]) and
        dimension d, the first sorted x_.d whose cumulative weight reaches
        half the total: a minimiser of sum_i w_ik |x_id - m|. float64 [K, D]."""
        weights = np.asarray(weights)
        n, k_count = weights.shape
        blocks = -(-n // MEDIAN_BLOCK)
        threshold = weights.sum(axis=0, dtype=np.float64) / 2 * (1 - 1e-12)  # the slack absorbs the sums' rounding
        components = np.arange(k_count)

        def medians(dims):
            # The weights in a dimension's order, the last block padded with zeros.
            ordered = np.zeros((blocks * MEDIAN_BLOCK, k_count), weights.dtype)
            result = np.empty((k_count, len(dims)))
            for j, d in enumerate(dims):
                np.take(weights, self.order[d], axis=0, out=ordered[:n])
                by_block = ordered.reshape(blocks, MEDIAN_BLOCK, k_count)
                reached = np.cumsum(by_block.sum(axis=1, dtype=np.float64), axis=0)  # at each block's end
                block = np.sum(reached < threshold, axis=0)  # [K]: the block where half is reached
                before = np.concatenate([np.zeros((1, k_count)), reached])[block, components]
                inside = before[:, None] + np.cumsum(by_block[block, :, components], axis=1, dtype=np.float64)
                below = np.sum(inside < threshold[:, None], axis=1)
                # Rounding may leave a block's cumulative sum short of its
                # total: then the block's last (real) sample.
                position = np.minimum(block * MEDIAN_BLOCK + np.minimum(below, MEDIAN_BLOCK - 1), n - 1)
                result[:, j] = self.x[self.order[d, position], d]
            return result

        return np.concatenate(self._map(medians, self.dimension_groups), axis=1)

    def _map(self, function, items):
        """[function(item) for item in items], over the threads, each
        with a one-thread BLAS."""
        with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(function, items))


def initial_mixture(x, num_components, policy, rng):
    """The released code's initialisation (see the module docstring)."""
    x = np.asarray(x)
    n, dim = x.shape
    loc = x[rng.choice(n, size=num_components, replace=False)].astype(np.float64)
    median_deviation = np.mean(np.abs(x - np.median(x, axis=0)), axis=0, dtype=np.float64)
    variance = x.var(axis=0, dtype=np.float64)
    laplacian = {
        "gaussian": np.zeros((num_components, dim), bool),
        "laplacian": np.ones((num_components, dim), bool),
        "hybrid": rng.integers(0, 2, size=(num_components, dim)).astype(bool),
    }[policy]
    scale = np.where(laplacian, np.maximum(median_deviation, MIN_SCALE), np.sqrt(np.maximum(variance, MIN_VARIANCE)))
    return Mixture(np.full(num_components, 1.0 / num_components), loc, scale, laplacian)


def fit_mixture(x, num_components=30, policy="hybrid", iterations=10, tolerance=None, seed=0, callback=None,
                workers=None):
    """EM from the released code's initialisation.

    Args:
      x: float [N, D] data (word vectors).
      num_components: K (30).
      policy: "gaussian", "laplacian" (LMM) or "hybrid" (HGLMM).
      iterations: at most this many EM iterations (10).
      tolerance: stop once the responsibilities move by less than this in
        Frobenius norm (the LMM's 0.01; None = run every iteration).
      seed: seeds the initialisation.
      callback: called as `callback(iteration, mixture, log_likelihood)`
        after each iteration (e.g. for TensorBoard).
      workers: threads (None: the cores this process may use).

    Returns:
      The fitted `Mixture`.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if len(x) < num_components:
        raise ValueError(f"{len(x)} samples cannot fit {num_components} components")
    em = EM(x, workers)
    mixture = initial_mixture(em.x, num_components, policy, np.random.default_rng(seed))
    t, _ = em.expectation(mixture)
    previous = None
    for iteration in range(iterations):
        mixture = em.maximisation(t, policy)
        converged = tolerance is not None and previous is not None and np.linalg.norm(t - previous) < tolerance
        previous = t
        # The next iteration's E-step, and the log-likelihood of this one's mixture.
        t, log_likelihood = em.expectation(mixture)
        if callback is not None:
            callback(iteration, mixture, log_likelihood)
        if converged:
            break
    return mixture

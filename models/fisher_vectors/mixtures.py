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
"""

import dataclasses

import numpy as np

POLICIES = ("gaussian", "laplacian", "hybrid")
MIN_SCALE = 1e-4  # s, the Laplacian scale
MIN_VARIANCE = 1e-5  # sigma^2
# Samples x components x dimensions held at once by the Laplacian terms.
CHUNK_ELEMENTS = 2**24


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
        """log tau_k + log h_k(x_i): float64 [N, K]."""
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
        if self.laplacian.any():
            inverse = self.laplacian / self.scale
            step = _chunk_rows(self.loc.shape)
            result -= np.concatenate([
                np.einsum("nkd,kd->nk", np.abs(x[a : a + step, None] - self.loc), inverse)
                for a in range(0, len(x), step)
            ])
        return result + np.log(self.weights)

    def log_likelihood(self, x):
        """sum_i log p(x_i): the data's log-likelihood."""
        return float(np.sum(_logsumexp(self.log_densities(x))))

    def responsibilities(self, x):
        """T: float64 [N, K], rows summing to 1."""
        log_p = self.log_densities(x)
        return np.exp(log_p - _logsumexp(log_p)[:, None])


def initial_mixture(x, num_components, policy, rng):
    """The released code's initialisation (see the module docstring)."""
    x = np.asarray(x, np.float64)
    n, dim = x.shape
    loc = x[rng.choice(n, size=num_components, replace=False)]
    median_deviation = np.mean(np.abs(x - np.median(x, axis=0)), axis=0)
    laplacian = {
        "gaussian": np.zeros((num_components, dim), bool),
        "laplacian": np.ones((num_components, dim), bool),
        "hybrid": rng.integers(0, 2, size=(num_components, dim)).astype(bool),
    }[policy]
    scale = np.where(laplacian, np.maximum(median_deviation, MIN_SCALE), np.sqrt(np.maximum(x.var(axis=0), MIN_VARIANCE)))
    return Mixture(np.full(num_components, 1.0 / num_components), loc, scale, laplacian)


def em_step(x, mixture, policy, responsibilities=None):
    """One E-step (unless `responsibilities` are given) and M-step.

    Returns:
      (the new Mixture, the E-step's responsibilities T [N, K]).
    """
    x = np.asarray(x, np.float64)
    t = mixture.responsibilities(x) if responsibilities is None else responsibilities
    counts = np.maximum(t.sum(axis=0), 1e-12)  # sum_i T_ki
    weights = counts / len(x)  # (1)
    mean = (t.T @ x) / counts[:, None]  # (6)
    squared_deviation = np.maximum((t.T @ x**2) / counts[:, None] - mean**2, 0.0)
    variance = np.maximum(squared_deviation, MIN_VARIANCE)  # (7)
    median = weighted_median(x, t) if policy != "gaussian" else mean  # (2)
    absolute_deviation = np.ones_like(mean)
    if policy != "gaussian":
        step = _chunk_rows(median.shape)
        absolute_deviation = sum(
            np.einsum("nk,nkd->kd", t[a : a + step], np.abs(x[a : a + step, None] - median))
            for a in range(0, len(x), step)
        ) / counts[:, None]
    laplace_scale = np.maximum(absolute_deviation, MIN_SCALE)  # (3)
    if policy == "hybrid":
        # Eqs. 8-9 with the new parameters and this iteration's T:
        # sum_i T_ki log l(x_id) and sum_i T_ki log g(x_id).
        laplace_ll = -counts[:, None] * (np.log(2 * laplace_scale) + absolute_deviation / laplace_scale)
        gauss_ll = -counts[:, None] * (0.5 * np.log(2 * np.pi * variance) + squared_deviation / (2 * variance))
        laplacian = laplace_ll > gauss_ll
    else:
        laplacian = np.full(mean.shape, policy == "laplacian")
    loc = np.where(laplacian, median, mean)
    scale = np.where(laplacian, laplace_scale, np.sqrt(variance))
    return Mixture(weights, loc, scale, laplacian), t


def fit_mixture(x, num_components=30, policy="hybrid", iterations=10, tolerance=None, seed=0, callback=None):
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

    Returns:
      The fitted `Mixture`.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    x = np.asarray(x, np.float64)
    if len(x) < num_components:
        raise ValueError(f"{len(x)} samples cannot fit {num_components} components")
    mixture = initial_mixture(x, num_components, policy, np.random.default_rng(seed))
    previous = None
    for iteration in range(iterations):
        mixture, t = em_step(x, mixture, policy)
        if callback is not None:
            callback(iteration, mixture, mixture.log_likelihood(x))
        if tolerance is not None and previous is not None and np.linalg.norm(t - previous) < tolerance:
            break
        previous = t
    return mixture


def weighted_median(x, weights):
    """m_kd of eq. 2: for every component k (weights [N, K]) and dimension
    d, the first sorted x_.d whose cumulative weight reaches half the
    total: a minimiser of sum_i w_ik |x_id - m|. float64 [K, D]."""
    x = np.asarray(x, np.float64)
    half = weights.sum(axis=0) / 2  # [K]
    median = np.empty((weights.shape[1], x.shape[1]))
    for d in range(x.shape[1]):
        order = np.argsort(x[:, d], kind="stable")
        cumulative = np.cumsum(weights[order], axis=0)  # [N, K]
        first = np.argmax(cumulative >= half * (1 - 1e-12), axis=0)
        median[:, d] = x[order[first], d]
    return median


def _logsumexp(a):
    top = a.max(axis=1)
    return top + np.log(np.sum(np.exp(a - top[:, None]), axis=1))


def _chunk_rows(component_shape):
    """Rows of x per chunk of the [rows, K, D] Laplacian terms."""
    return max(1, CHUNK_ELEMENTS // int(np.prod(component_shape)))

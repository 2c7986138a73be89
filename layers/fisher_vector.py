"""The Fisher vector of a set of word vectors under a GMM, LMM or HGLMM."""

import math

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class FisherVector(keras.layers.Layer):
    """Fisher vector of a sentence's word vectors (Klein et al. 2015, Secs.
    3.2 and 4.2), under a diagonal mixture whose (k, d) entries are Gaussian
    or Laplacian (`laplacian`: a GMM when all 0, an LMM when all 1, an HGLMM
    as eq. 9 fitted it). With T_ki the words' posteriors and N the number of
    words, the (k, d) entries are the log-likelihood's gradients normalised
    by the diagonal Fisher information:

        Gaussian:  (N tau_k)^-1/2  sum_i T_ki (x_id - mu_kd) / sigma_kd            (10)
                   (2N tau_k)^-1/2 sum_i T_ki ((x_id - mu_kd)^2 / sigma_kd^2 - 1)  (11)
        Laplacian: (N tau_k)^-1/2  sum_i T_ki sgn(x_id - m_kd)                     (4)
                   (N tau_k)^-1/2  sum_i T_ki (|x_id - m_kd| / s_kd - 1)           (5)

    laid out as [location block (K x D, k-major); scale block (K x D)], then
    (with `normalize`) the power normalisation sign(z)|z|^0.5 and L2 (Sec.
    5). sgn(0) = +1, as the authors' code (m is a data value, so a word can
    equal it). There is no gradient with respect to tau (2KD entries).

    The mixture is fitted outside the graph (`models.fisher_vectors.mixtures`)
    and set with `set_mixture`; its weights are not trainable.

    Args:
      num_components: K.
      dim: D, the word vector size.
      normalize: apply the power and L2 normalisations (True; False gives
        the normalised gradient itself).

    Call args:
      inputs: float [B, L, D] word vectors.
      mask: [B, L], 1 at real words. A sentence without any gives zeros.

    Returns:
      float [B, 2 K D].
    """

    def __init__(self, num_components, dim, normalize=True, **kwargs):
        super().__init__(**kwargs)
        self.num_components = num_components
        self.dim = dim
        self.normalize = normalize
        shape = (num_components, dim)
        self.log_weights = self.add_weight(
            name="log_weights", shape=(num_components,), trainable=False,
            initializer=keras.initializers.Constant(-math.log(num_components)),
        )
        self.loc = self.add_weight(name="loc", shape=shape, trainable=False, initializer="zeros")
        self.scale = self.add_weight(name="scale", shape=shape, trainable=False, initializer="ones")
        self.laplacian = self.add_weight(name="laplacian", shape=shape, trainable=False, initializer="zeros")

    def set_mixture(self, mixture):
        """Sets a `models.fisher_vectors.mixtures.Mixture` (weights, loc,
        scale, laplacian)."""
        self.log_weights.assign(ops.log(ops.convert_to_tensor(mixture.weights, "float32")))
        self.loc.assign(ops.convert_to_tensor(mixture.loc, "float32"))
        self.scale.assign(ops.convert_to_tensor(mixture.scale, "float32"))
        self.laplacian.assign(ops.convert_to_tensor(mixture.laplacian, "float32"))

    def call(self, inputs, mask):
        mask = ops.cast(mask, inputs.dtype)  # [B, L]
        b, gauss = self.laplacian, 1.0 - self.laplacian  # [K, D]
        centred = inputs[:, :, None, :] - self.loc  # [B, L, K, D]
        standardised = centred / self.scale
        absolute = ops.abs(standardised)
        # log tau_k + sum_d log h_kd(x_d), per word: [B, L, K].
        log_density = ops.sum(
            gauss * (-0.5 * ops.log(2 * math.pi * self.scale**2) - 0.5 * standardised**2)
            + b * (-ops.log(2 * self.scale) - absolute),
            axis=-1,
        ) + self.log_weights
        posteriors = ops.softmax(log_density, axis=-1) * mask[..., None]  # T [B, L, K]
        sign = ops.cast(ops.where(centred >= 0, 1.0, -1.0), centred.dtype)  # the compute dtype
        location = ops.einsum("blk,blkd->bkd", posteriors, gauss * standardised + b * sign)
        scale = ops.einsum("blk,blkd->bkd", posteriors, gauss * (standardised**2 - 1) + b * (absolute - 1))
        words = ops.sum(mask, axis=1)[:, None, None]  # N
        norm = ops.sqrt(ops.maximum(words, 1.0) * ops.exp(self.log_weights)[:, None])  # (N tau_k)^1/2
        location = location / norm
        scale = scale / (norm * (gauss * math.sqrt(2.0) + b))
        vector = ops.concatenate([ops.reshape(location, (-1, self.num_components * self.dim)),
                                  ops.reshape(scale, (-1, self.num_components * self.dim))], axis=-1)
        if not self.normalize:
            return vector
        # sign(0) = 0 keeps zeros exact; the 1e-12 keeps the gradient finite.
        vector = ops.sign(vector) * ops.sqrt(ops.abs(vector) + 1e-12)
        return vector / ops.maximum(ops.norm(vector, axis=-1, keepdims=True), 1e-12)

    def compute_output_shape(self, inputs_shape, mask_shape=None):
        return (inputs_shape[0], 2 * self.num_components * self.dim)

    def get_config(self):
        return {**super().get_config(), "num_components": self.num_components, "dim": self.dim,
                "normalize": self.normalize}

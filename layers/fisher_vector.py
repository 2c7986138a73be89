"""The Fisher vector of a set of word vectors under a GMM, LMM or HGLMM."""

import math

import keras
import tensorflow as tf
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

    Memory: the per-(word, component, dimension) terms are computed for
    `component_block` components at a time, one block after the other, in
    two passes (the posteriors, which need every component's density, then
    the gradients), so that no intermediate exceeds B x L x component_block
    x D values and only one block's are held at a time (at the paper's
    sizes, K = 30, D = 300, a batch of 128 captions of 30 words in float32:
    18 MB for 4 components instead of 138 MB for all 30), besides the
    posteriors [B, L, K] and the output. The output does not depend on it
    beyond rounding.

    Args:
      num_components: K.
      dim: D, the word vector size.
      normalize: apply the power and L2 normalisations (True; False gives
        the normalised gradient itself).
      component_block: components per block (4; at most K are used).

    Call args:
      inputs: float [B, L, D] word vectors.
      mask: [B, L], 1 at real words. A sentence without any gives zeros.

    Returns:
      float [B, 2 K D].
    """

    def __init__(self, num_components, dim, normalize=True, component_block=4, **kwargs):
        super().__init__(**kwargs)
        if component_block < 1:
            raise ValueError(f"component_block must be at least 1, got {component_block}")
        self.num_components = num_components
        self.dim = dim
        self.normalize = normalize
        self.component_block = component_block
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
        blocks = [slice(a, a + self.component_block) for a in range(0, self.num_components, self.component_block)]
        # log tau_k + sum_d log h_kd(x_d), per word: [B, L, K].
        log_density = ops.concatenate(_in_sequence(lambda block: self._log_density(inputs, block), blocks), axis=-1)
        posteriors = ops.softmax(log_density, axis=-1) * mask[..., None]  # T [B, L, K]
        location, scale = (ops.concatenate(parts, axis=1) for parts in zip(*_in_sequence(
            lambda block: self._gradients(inputs, posteriors[:, :, block], block), blocks)))  # [B, K, D]
        b, gauss = self.laplacian, 1.0 - self.laplacian  # [K, D]
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

    def _standardised(self, inputs, block):
        """(x - loc) / scale of the block's components: [B, L, block, D];
        and their laplacian b, [block, D]."""
        return (inputs[:, :, None, :] - self.loc[block]) / self.scale[block], self.laplacian[block]

    def _log_density(self, inputs, block):
        """log tau_k + sum_d log h_kd(x_d) of the block's components: [B, L, block]."""
        standardised, b = self._standardised(inputs, block)
        scale = self.scale[block]
        return ops.sum(
            (1.0 - b) * (-0.5 * ops.log(2 * math.pi * scale**2) - 0.5 * standardised**2)
            + b * (-ops.log(2 * scale) - ops.abs(standardised)),
            axis=-1,
        ) + self.log_weights[block]

    def _gradients(self, inputs, posteriors, block):
        """The sums over words of eqs. 4/10 and 5/11 (before their
        normalisation) of the block's components: 2 x [B, block, D]."""
        standardised, b = self._standardised(inputs, block)
        # sgn(x - m) with sgn(0) = +1, in the compute dtype.
        sign = ops.cast(ops.where(inputs[:, :, None, :] >= self.loc[block], 1.0, -1.0), standardised.dtype)
        absolute = ops.abs(standardised)
        location = ops.einsum("blk,blkd->bkd", posteriors, (1.0 - b) * standardised + b * sign)
        scale = ops.einsum("blk,blkd->bkd", posteriors, (1.0 - b) * (standardised**2 - 1) + b * (absolute - 1))
        return location, scale

    def compute_output_shape(self, inputs_shape, mask_shape=None):
        return (inputs_shape[0], 2 * self.num_components * self.dim)

    def get_config(self):
        return {**super().get_config(), "num_components": self.num_components, "dim": self.dim,
                "normalize": self.normalize, "component_block": self.component_block}


def _in_sequence(function, blocks):
    """[function(block) for block in blocks], each block's ops after the
    previous block's results (in a graph, TensorFlow would otherwise run the
    blocks side by side and hold all their intermediates at once)."""
    results = []
    for block in blocks:
        with tf.control_dependencies(keras.tree.flatten(results[-1:])):
            results.append(function(block))
    return results

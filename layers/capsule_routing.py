"""Routing by agreement between the capsules of a recurrent capsule network."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class CapsuleRouting(keras.layers.Layer):
    """Mixes the capsules' masks and embeddings by their agreement
    (Francis et al. 2018, eqs. 7-10).

    With `<v_i|v_j>` the dot product of capsule embeddings i and j:

        alpha_ij = <v_i|v_j> / sum_k <v_i|v_k>                          (9)
        beta_ij  = <v_i|v_j> / sum_k sum_l <v_k|v_l>                    (10)
        m_i      = sum_j alpha_ij m~_j                                  (7)
        v        = sum_i sum_j beta_ij v_i                              (8)

    Numerical safety, keeping the formula: the denominator of eq. 10 is
    `||sum_k v_k||^2 >= 0`, but that of eq. 9 is `<v_i | sum_k v_k>` and can
    have either sign or cancel to zero. A denominator `d` with
    `|d| < epsilon` is replaced by `epsilon` with the sign of `d` (+ for 0),
    so the coefficients stay finite (at most |numerator| / epsilon) and
    every denominator away from zero is used exactly as written. The
    dot products are of tanh-bounded GRU states, O(1) to O(units), so the
    default `epsilon` only acts on a near-exact cancellation.

    Args:
      epsilon: smallest magnitude of a denominator of eqs. 9-10.

    Call args:
      embeddings: float [B, N, H], the capsules' embeddings v_i (eq. 5).
      candidate_masks: optional float [B, N, V], the capsules' masks m~_i
        (eq. 6).

    Returns:
      The sentence embedding v, float [B, H] (eq. 8); with
      `candidate_masks`, the pair (v, routed masks m_i [B, N, V] (eq. 7)).
    """

    def __init__(self, epsilon=1e-4, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def call(self, embeddings, candidate_masks=None):
        agreement = ops.einsum("bih,bjh->bij", embeddings, embeddings)  # <v_i|v_j>
        beta = agreement / self._safe(ops.sum(agreement, axis=(1, 2), keepdims=True))  # eq. 10
        embedding = ops.einsum("bij,bih->bh", beta, embeddings)  # eq. 8
        if candidate_masks is None:
            return embedding
        alpha = agreement / self._safe(ops.sum(agreement, axis=2, keepdims=True))  # eq. 9
        masks = ops.einsum("bij,bjv->biv", alpha, candidate_masks)  # eq. 7
        return embedding, masks

    def _safe(self, denominator):
        sign = ops.where(denominator < 0, -1.0, 1.0)
        return ops.where(ops.abs(denominator) < self.epsilon, sign * self.epsilon, denominator)

    def compute_output_shape(self, embeddings_shape, candidate_masks_shape=None):
        embedding_shape = (embeddings_shape[0], embeddings_shape[2])
        if candidate_masks_shape is None:
            return embedding_shape
        return embedding_shape, tuple(candidate_masks_shape)

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}

"""Routing by agreement between the capsules of a recurrent capsule network."""

import keras
from keras import ops

from common import diagnostics


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
    default `epsilon` only acts on a near-exact cancellation. Training can
    drive the capsules there, though (their embeddings anti-align so that
    sum_k v_k shrinks; see docs/rcn.md): the denominators, the range of
    alpha and of the routed masks are published as training diagnostics.

    Non-negative variant (`nonnegative=True`, a deviation from the letter of
    eqs. 9-10): agreements are `max(0, <v_i|v_j>)`. The paper's prose
    describes routing that way ("a capsule contributes to the derivation of
    the mask of another capsule only if both capsules output a similar
    embedding"; a capsule whose embedding "is very different from other
    embeddings" has a "participation [that] remains marginal"; masks
    "composed of positive numbers"), which the signed formula does not
    guarantee. With it, every denominator is at least ||v_i||^2 (the
    diagonal), eq. 7 is a convex combination of the capsules' masks (so the
    sigmoid-GRU masks stay in (0, 1)) and eq. 8 a convex combination of
    the embeddings (capsules cannot cancel one another).

    Args:
      epsilon: smallest magnitude of a denominator of eqs. 9-10.
      nonnegative: clip the agreements at 0 (see above).

    Call args:
      embeddings: float [B, N, H], the capsules' embeddings v_i (eq. 5).
      candidate_masks: optional float [B, N, V], the capsules' masks m~_i
        (eq. 6).
      record_as: optional name prefix under which, during training, the
        smallest |denominator| of eq. 9 in the batch (also relative to
        ||v_i||^2: 1 for orthogonal capsules, 0 at a cancellation, negative
        past it), the range of alpha and of the routed masks are published
        (`common.diagnostics.record`).

    Returns:
      The sentence embedding v, float [B, H] (eq. 8); with
      `candidate_masks`, the pair (v, routed masks m_i [B, N, V] (eq. 7)).
    """

    def __init__(self, epsilon=1e-4, nonnegative=False, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon
        self.nonnegative = nonnegative

    def call(self, embeddings, candidate_masks=None, record_as=None):
        agreement = ops.einsum("bih,bjh->bij", embeddings, embeddings)  # <v_i|v_j>
        if self.nonnegative:
            agreement = ops.relu(agreement)
        beta = agreement / self._safe(ops.sum(agreement, axis=(1, 2), keepdims=True))  # eq. 10
        embedding = ops.einsum("bij,bih->bh", beta, embeddings)  # eq. 8
        if candidate_masks is None:
            return embedding
        denominator = ops.sum(agreement, axis=2, keepdims=True)
        alpha = agreement / self._safe(denominator)  # eq. 9
        masks = ops.einsum("bij,bjv->biv", alpha, candidate_masks)  # eq. 7
        if record_as is not None:
            squared_norms = ops.diagonal(agreement, axis1=1, axis2=2)[:, :, None]
            diagnostics.record(f"{record_as}/eq9_min_abs_denominator", ops.min(ops.abs(denominator)), "min")
            diagnostics.record(
                f"{record_as}/eq9_min_relative_denominator",
                ops.min(denominator / ops.maximum(squared_norms, self.epsilon)),
                "min",
            )
            diagnostics.record(f"{record_as}/alpha_min", ops.min(alpha), "min")
            diagnostics.record(f"{record_as}/alpha_max", ops.max(alpha), "max")
            diagnostics.record(f"{record_as}/mask_min", ops.min(masks), "min")
            diagnostics.record(f"{record_as}/mask_max", ops.max(masks), "max")
        return embedding, masks

    def _safe(self, denominator):
        # In the denominator's dtype (float16/bfloat16 under mixed precision).
        sign = ops.cast(ops.where(denominator < 0, -1.0, 1.0), denominator.dtype)
        return ops.where(ops.abs(denominator) < self.epsilon, sign * self.epsilon, denominator)

    def compute_output_shape(self, embeddings_shape, candidate_masks_shape=None):
        embedding_shape = (embeddings_shape[0], embeddings_shape[2])
        if candidate_masks_shape is None:
            return embedding_shape
        return embedding_shape, tuple(candidate_masks_shape)

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon, "nonnegative": self.nonnegative}

"""The RCN's regulariser on the capsules' masks (Francis et al. 2018, eq. 14)."""

import keras
from keras import ops


def mask_variety_penalty(masks, epsilon=1e-6):
    """Eq. 14 of Francis et al. 2018 for each sentence:

        V = ( sum_i ||m_i - m_bar||^2 / (N ||m_bar||^2) * min_i ||m_i|| )^-1

    large when the N capsules' masks are alike (small spread around their
    mean m_bar) or when one capsule's mask is near zero.

    Written as `N ||m_bar||^2 / (sum_i ||m_i - m_bar||^2 * min_i ||m_i||)`,
    with the norms and the denominator kept at or above `epsilon` so that
    identical or zero masks give a large finite penalty, not inf or NaN.

    Args:
      masks: float [B, N, V], the masks m_i of each sentence's N capsules.
      epsilon: floor of the norms and of the denominator.

    Returns:
      float [B], V of each sentence.
    """
    num_capsules = ops.cast(ops.shape(masks)[1], masks.dtype)
    mean_mask = ops.mean(masks, axis=1, keepdims=True)
    spread = ops.sum(ops.square(masks - mean_mask), axis=(1, 2))
    mean_norm_squared = ops.sum(ops.square(mean_mask), axis=(1, 2))
    # sqrt of a floored square: no infinite gradient at an all-zero mask.
    smallest_norm = ops.min(ops.sqrt(ops.maximum(ops.sum(ops.square(masks), axis=2), epsilon**2)), axis=1)
    return num_capsules * mean_norm_squared / ops.maximum(spread * smallest_norm, epsilon)


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class CapsuleMaskRegularization(keras.layers.Layer):
    """Adds `weight * V` (eq. 15, `L' = L + lambda V`) to the model's losses.

    V (eq. 14, `mask_variety_penalty`) is computed per sentence and averaged
    over the batch (the paper's loss terms, eqs. 11-12, are batch means
    too). The layer passes its input through unchanged, like Keras'
    `ActivityRegularization`; the trainer adds `model.losses` to the
    ranking loss.

    Args:
      weight: lambda of eq. 15 (0.05 in the paper).

    Call args:
      masks: float [B, N, V], N >= 2 capsules' masks.

    Returns:
      `masks`, unchanged.
    """

    def __init__(self, weight=0.05, **kwargs):
        super().__init__(**kwargs)
        self.weight = weight

    def call(self, masks):
        # In float32 under mixed precision, as the ranking loss it joins.
        self.add_loss(self.weight * ops.mean(mask_variety_penalty(ops.cast(masks, "float32"))))
        return masks

    def compute_output_shape(self, masks_shape):
        return masks_shape

    def get_config(self):
        return {**super().get_config(), "weight": self.weight}

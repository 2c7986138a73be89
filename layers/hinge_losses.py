"""Bidirectional hinge (triplet) ranking losses over a batch's similarities.

For a batch of B matching image-caption pairs, `sims[k, l] = s(i_k, c_l)` and
the diagonal holds the matching pairs. For margin alpha, the violations are

    image side:   [alpha - s(i_k, c_k) + s(i_k, c_l)]_+   for every l != k
    caption side: [alpha - s(i_k, c_k) + s(i_l, c_k)]_+   for every l != k

- `SumOfHinges` adds every violation: Kiros et al. 2014; Vilalta et al. 2018,
  eq. 1 ("SH"); VSE++'s VSE0.
- `MaxOfHinges` keeps only the hardest negative of each pair in each
  direction: Faghri et al. (VSE++), Vilalta et al. 2018, eq. 4 ("MH");
  Francis et al. 2018, eqs. 11-13.

Francis et al. write eq. 11 as `max(-eps, -cos(u_k, v_k) + cos(u_l, v_k))`;
that is the hinge above minus the constant eps, so it has the same gradients
and the same minimiser. We report the hinge form (0 for a perfect model).

Deliberate deviation from VSE++'s code: a batch may hold two captions of the
same image (when every caption is sampled once per epoch). VSE++ then treats
the other caption as a negative of the image; the papers define the negatives
as non-matching pairs, so pairs that share an image (`image_index`) are
excluded from the negatives here. With one caption per image per batch (the
FNE protocol) the two readings coincide.
"""

import abc

import keras
from keras import ops


class _HingeLoss(abc.ABC):
    """Shared parts: the violation matrices and the reduction over the batch.

    Args:
      margin: the hinge margin alpha (0.2 in VSE++ and the RCN paper).
      reduction: "sum" adds the losses of the B pairs (VSE++); "mean" divides
        them by B (Francis et al. 2018, eqs. 11-12).
    """

    def __init__(self, margin=0.2, reduction="sum"):
        if reduction not in ("sum", "mean"):
            raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")
        self.margin = margin
        self.reduction = reduction

    def __call__(self, sims, image_index=None):
        """Loss of a batch.

        Args:
          sims: float [B, B]; `sims[k, l]` is the similarity of image k and
            caption l, the diagonal holds the matching pairs.
          image_index: optional int [B], the dataset image of each pair;
            off-diagonal pairs with the same image are not negatives.

        Returns:
          A float scalar.
        """
        positive = ops.diagonal(sims)
        batch = ops.shape(sims)[0]
        if image_index is None:
            is_negative = ~ops.eye(batch, dtype="bool")
        else:
            is_negative = image_index[:, None] != image_index[None, :]
        caption_violations = ops.relu(self.margin - positive[:, None] + sims)
        image_violations = ops.relu(self.margin - positive[None, :] + sims)
        zeros = ops.zeros_like(sims)
        per_pair = self.aggregate(
            ops.where(is_negative, caption_violations, zeros), axis=1
        ) + self.aggregate(ops.where(is_negative, image_violations, zeros), axis=0)
        total = ops.sum(per_pair)
        if self.reduction == "mean":
            total = total / ops.cast(batch, total.dtype)
        return total

    @abc.abstractmethod
    def aggregate(self, violations, axis):
        """Reduces the violations of each pair over its negatives."""

    @abc.abstractmethod
    def terms_per_pair(self, batch):
        """How many hinges of one direction a pair contributes (float)."""

    def scale(self, batch):
        """How many times larger this loss is than the batch mean of the
        hardest negative's hinges (VSE++'s max of hinges averaged over the
        batch, Francis et al. eq. 13) when all negatives violate equally:
        the hinges per pair (B - 1 for the sum, 1 for the max), times B
        for the sum over the batch. A term weighted against the paper's
        loss (e.g. lambda of Francis et al. eq. 15) is multiplied by it so
        that its weight means the same under every loss.

        Args:
          batch: B, the number of pairs (int or int scalar tensor).
        """
        batch = ops.cast(batch, "float32")
        return self.terms_per_pair(batch) * (batch if self.reduction == "sum" else 1.0)

    def get_config(self):
        return {"margin": self.margin, "reduction": self.reduction}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class SumOfHinges(_HingeLoss):
    """Hinges summed over all negatives of the batch (eq. 1 of Vilalta et al.)."""

    def aggregate(self, violations, axis):
        return ops.sum(violations, axis=axis)

    def terms_per_pair(self, batch):
        return batch - 1.0


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class MaxOfHinges(_HingeLoss):
    """Hinge of the hardest negative only (VSE++; eq. 4 of Vilalta et al.)."""

    def aggregate(self, violations, axis):
        return ops.max(violations, axis=axis)

    def terms_per_pair(self, batch):
        return 1.0

import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.hinge_losses import MaxOfHinges, SumOfHinges


def reference_loss(sims, margin, hardest, image_index=None):
    """A loop-by-loop transcription of the hinge losses (VSE++ / Vilalta eq. 1 and 4)."""
    n = len(sims)
    image_index = np.arange(n) if image_index is None else image_index
    total = 0.0
    for k in range(n):
        caption_side = [max(0.0, margin - sims[k, k] + sims[k, l]) for l in range(n) if image_index[l] != image_index[k]]
        image_side = [max(0.0, margin - sims[k, k] + sims[l, k]) for l in range(n) if image_index[l] != image_index[k]]
        for violations in (caption_side, image_side):
            total += (max(violations, default=0.0) if hardest else sum(violations))
    return total


@pytest.mark.parametrize("cls,hardest", [(SumOfHinges, False), (MaxOfHinges, True)])
def test_matches_loop_transcription(cls, hardest):
    sims = np.random.default_rng(0).uniform(-1, 1, size=(6, 6))
    loss = cls(margin=0.2)(tf.constant(sims))
    np.testing.assert_allclose(loss, reference_loss(sims, 0.2, hardest), rtol=1e-6)


@pytest.mark.parametrize("cls,hardest", [(SumOfHinges, False), (MaxOfHinges, True)])
def test_pairs_sharing_an_image_are_not_negatives(cls, hardest):
    sims = np.random.default_rng(1).uniform(-1, 1, size=(6, 6))
    image_index = np.array([0, 1, 1, 2, 3, 3])
    loss = cls(margin=0.2)(tf.constant(sims), tf.constant(image_index))
    np.testing.assert_allclose(loss, reference_loss(sims, 0.2, hardest, image_index), rtol=1e-6)
    assert not np.isclose(loss, reference_loss(sims, 0.2, hardest))


def test_mean_reduction_divides_by_batch_and_perfect_model_costs_zero():
    sims = np.random.default_rng(2).uniform(-1, 1, size=(5, 5))
    total = MaxOfHinges(0.2)(tf.constant(sims))
    np.testing.assert_allclose(MaxOfHinges(0.2, reduction="mean")(tf.constant(sims)), total / 5, rtol=1e-6)
    perfect = np.eye(4) - (1 - np.eye(4))
    assert float(SumOfHinges(0.2)(tf.constant(perfect))) == 0.0


def test_max_of_hinges_gradient_reaches_only_the_hardest_negative():
    sims = tf.Variable([[0.5, 0.4, 0.0], [0.1, 0.5, 0.0], [0.0, 0.0, 0.9]])
    with tf.GradientTape() as tape:
        loss = MaxOfHinges(0.2)(tf.convert_to_tensor(sims))
    grad = tape.gradient(loss, sims).numpy()
    assert grad[0, 2] == 0.0 and grad[0, 1] > 0


def test_config_round_trip():
    loss = MaxOfHinges(margin=0.3, reduction="mean")
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(loss))
    assert isinstance(clone, MaxOfHinges) and clone.get_config() == loss.get_config()
    with pytest.raises(ValueError):
        SumOfHinges(reduction="median")


@pytest.mark.parametrize("cls, reduction, expected", [
    (MaxOfHinges, "mean", 1.0), (MaxOfHinges, "sum", 8.0), (SumOfHinges, "mean", 7.0), (SumOfHinges, "sum", 56.0),
])
def test_scale_against_the_batch_mean_of_hardest_negatives(cls, reduction, expected):
    """With every negative violating by the same amount, a loss is `scale`
    times the max of hinges averaged over the batch."""
    batch = 8
    sims = np.full((batch, batch), 0.5, np.float32)
    np.fill_diagonal(sims, 0.4)  # every hinge is 0.2 - 0.4 + 0.5 = 0.3
    reference = MaxOfHinges(reduction="mean")(sims)
    loss = cls(reduction=reduction)(sims)
    assert float(cls(reduction=reduction).scale(batch)) == expected
    np.testing.assert_allclose(loss, expected * reference, rtol=1e-6)


def test_default_margin_is_vsepps_0_2():
    # Every negative violates by margin - 0.4 + 0.5: 0.3 at the margin 0.2.
    sims = np.full((3, 3), 0.5, np.float32)
    np.fill_diagonal(sims, 0.4)
    # Per pair: the hardest negative of each direction, 2 x 0.3.
    np.testing.assert_allclose(MaxOfHinges(reduction="mean")(sims), 2 * 0.3, rtol=1e-6)
    # 3 pairs x 2 directions x 2 negatives x 0.3.
    np.testing.assert_allclose(SumOfHinges()(sims), 12 * 0.3, rtol=1e-6)

"""Each similarity layer's `pairs` (aligned pairs, what a re-ranking second
stage scores) against the diagonal of its all-pairs call."""

import numpy as np
import pytest

from layers.cosine_similarity import CosineSimilarity
from layers.dot_product_similarity import DotProductSimilarity
from layers.negative_mse_similarity import NegativeMSESimilarity
from layers.order_violation_similarity import OrderViolationSimilarity


@pytest.mark.parametrize("layer", [CosineSimilarity, DotProductSimilarity, NegativeMSESimilarity,
                                   OrderViolationSimilarity])
def test_pairs_are_the_diagonal_of_all_pairs(layer):
    rng = np.random.default_rng(0)
    images, texts = (rng.normal(size=(9, 16)).astype(np.float32) for _ in range(2))
    similarity = layer(dtype="float32")
    diagonal = np.diag(np.asarray(similarity(images, texts)))
    # float32 sums of 16 terms of size ~1, in another order: within a few ulps of their size.
    np.testing.assert_allclose(np.asarray(similarity.pairs(images, texts)), diagonal, rtol=1e-5, atol=1e-5)

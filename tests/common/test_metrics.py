import numpy as np
import pytest

from common import metrics

# Two images, 5 captions each (captions 0-4 -> image 0, 5-9 -> image 1).
CAPTION_IMAGE = np.repeat([0, 1], 5)


def test_perfect_scores_give_rank_one_everywhere():
    sims = np.where(CAPTION_IMAGE[None, :] == np.arange(2)[:, None], 1.0, 0.0)
    result = metrics.retrieval_metrics(sims, CAPTION_IMAGE)
    for direction in ("i2t", "t2i"):
        assert result[f"{direction}_r1"] == 100.0
        assert result[f"{direction}_medr"] == 1.0
        assert result[f"{direction}_meanr"] == 1.0
    assert result["rsum"] == 600.0


def test_image_annotation_uses_the_best_ranked_true_caption():
    # Image 0: its best caption (column 3, 0.9) is beaten by column 7 (0.95)
    # only, so its rank is 2. Image 1: caption 9 is first -> rank 1.
    sims = np.zeros((2, 10))
    sims[0] = [0.1, 0.2, 0.3, 0.9, 0.0, 0.5, 0.5, 0.95, 0.5, 0.5]
    sims[1] = [0.0] * 9 + [1.0]
    np.testing.assert_array_equal(metrics.image_annotation_ranks(sims, CAPTION_IMAGE), [2, 1])


def test_image_retrieval_ranks_each_caption_among_images():
    sims = np.array([[0.9, 0.1, 0.5, 0.5, 0.5, 0.2, 0.8, 0.0, 0.0, 0.0],
                     [0.1, 0.9, 0.4, 0.6, 0.4, 0.9, 0.1, 0.1, 0.1, 0.1]])
    ranks = metrics.image_retrieval_ranks(sims, CAPTION_IMAGE)
    # Caption 1 (image 0) loses to image 1; caption 3 loses to image 1;
    # caption 6 (image 1) loses to image 0.
    np.testing.assert_array_equal(ranks, [1, 2, 1, 2, 1, 1, 2, 1, 1, 1])


def test_ties_are_ordered_as_vsepp_numpy_argsort_reversed():
    # VSE++ ranks by numpy.argsort(scores)[::-1]; for a small tie numpy's
    # sort keeps index order, so reversed, the later index comes first.
    sims = np.zeros((2, 10))
    np.testing.assert_array_equal(metrics.image_annotation_ranks(sims, CAPTION_IMAGE), [6, 1])
    np.testing.assert_array_equal(metrics.image_retrieval_ranks(sims, CAPTION_IMAGE), [2] * 5 + [1] * 5)


def test_a_nan_score_ranks_first_as_in_vsepp_numpy_argsort_reversed():
    # numpy.argsort puts NaN last, so reversed it comes first: above every score, though no score is below it.
    caption_image = np.array([0, 1, 1])
    sims = np.array([[0.5, np.nan, 0.9], [0.2, 0.1, 0.3]])
    np.testing.assert_array_equal(metrics.image_annotation_ranks(sims, caption_image), [3, 1])
    np.testing.assert_array_equal(metrics.image_retrieval_ranks(sims, caption_image), [1, 2, 2])


def test_duplicate_captions_rank_as_in_vsepp_code():
    rng = np.random.default_rng(3)
    caption_image = np.repeat(np.arange(50), 5)
    texts = rng.normal(size=(250, 8)).astype(np.float32)
    texts[17] = texts[203]  # two identical captions of different images
    sims = rng.normal(size=(50, 8)).astype(np.float32) @ texts.T
    expected = [min(np.where(np.argsort(sims[i])[::-1] == j)[0][0] for j in range(5 * i, 5 * i + 5)) + 1
                for i in range(50)]
    np.testing.assert_array_equal(metrics.image_annotation_ranks(sims, caption_image), expected)


def test_rank_summary_matches_vsepp_conventions():
    ranks = np.array([1, 2, 6, 11, 3, 20])
    summary = metrics.rank_summary(ranks)
    assert summary["r1"] == pytest.approx(100 / 6)
    assert summary["r5"] == pytest.approx(300 / 6)
    assert summary["r10"] == pytest.approx(400 / 6)
    # 0-based ranks 0,1,2,5,10,19: median 3.5 -> floor + 1 = 4.
    assert summary["medr"] == 4.0
    assert summary["meanr"] == pytest.approx(43 / 6)


def test_blocks_of_rows_and_columns_give_the_same_ranks():
    rng = np.random.default_rng(0)
    caption_image = np.repeat(np.arange(20), 5)
    sims = rng.normal(size=(20, 100))
    i2t = metrics.image_annotation_ranks(sims, caption_image)
    blocks = [metrics.image_annotation_ranks(sims[a:a + 7], caption_image, np.arange(a, min(a + 7, 20)))
              for a in range(0, 20, 7)]
    np.testing.assert_array_equal(np.concatenate(blocks), i2t)
    t2i = metrics.image_retrieval_ranks(sims, caption_image)
    columns = [metrics.image_retrieval_ranks(sims[:, a:a + 33], caption_image[a:a + 33]) for a in range(0, 100, 33)]
    np.testing.assert_array_equal(np.concatenate(columns), t2i)


def test_ranks_agree_with_argsort_definition_on_random_scores():
    rng = np.random.default_rng(1)
    caption_image = np.repeat(np.arange(30), 5)
    sims = rng.normal(size=(30, 150))
    expected_i2t = [
        1 + min(np.where(np.argsort(-sims[i]) == j)[0][0] for j in np.where(caption_image == i)[0])
        for i in range(30)
    ]
    expected_t2i = [1 + np.where(np.argsort(-sims[:, j]) == caption_image[j])[0][0] for j in range(150)]
    np.testing.assert_array_equal(metrics.image_annotation_ranks(sims, caption_image), expected_i2t)
    np.testing.assert_array_equal(metrics.image_retrieval_ranks(sims, caption_image), expected_t2i)


def test_metric_names_and_average():
    sims = np.eye(2).repeat(5, axis=1)
    result = metrics.retrieval_metrics(sims, CAPTION_IMAGE)
    assert tuple(sorted(result)) == tuple(sorted(metrics.METRIC_NAMES))
    worse = dict(result, rsum=0.0)
    assert metrics.average_metrics([result, worse])["rsum"] == 300.0


def test_average_precision_on_a_hand_built_ranking():
    # Image 0's true captions (0-4) are ranked at positions 1, 3, 4, 8, 10
    # of its ranking: AP = (1/1 + 2/3 + 3/4 + 4/8 + 5/10) / 5.
    scores = np.zeros(10)
    order = [0, 5, 1, 2, 6, 7, 8, 3, 9, 4]  # caption index at each position
    scores[order] = np.arange(10, 0, -1)
    sims = np.stack([scores, scores[::-1]])
    ap = metrics.image_annotation_average_precision(sims, CAPTION_IMAGE)
    assert ap[0] == pytest.approx((1 + 2 / 3 + 3 / 4 + 4 / 8 + 5 / 10) / 5)
    perfect = np.where(CAPTION_IMAGE[None, :] == np.arange(2)[:, None], 1.0, 0.0)
    np.testing.assert_allclose(metrics.image_annotation_average_precision(perfect, CAPTION_IMAGE), [1.0, 1.0])


def test_average_precision_of_positions_on_the_hand_built_ranking_and_a_padded_row():
    # The hand-built ranking above (0-based positions 0, 2, 3, 7, 9, given out of order), and an item with one
    # true caption at position 1 in a row padded to five.
    positions = np.array([[7, 0, 9, 2, 3], [1, 0, 0, 0, 0]])
    is_true = np.array([[True] * 5, [True, False, False, False, False]])
    np.testing.assert_allclose(metrics.average_precision_of_positions(positions, is_true),
                               [(1 + 2 / 3 + 3 / 4 + 4 / 8 + 5 / 10) / 5, 1 / 2])


def test_average_precision_against_its_definition_with_uneven_captions_and_blocks():
    # Items with 1 to 40 captions, as video datasets have.
    rng = np.random.default_rng(2)
    caption_image = np.repeat(np.arange(12), rng.integers(1, 41, size=12))
    sims = rng.normal(size=(12, len(caption_image)))
    expected = []
    for i in range(12):
        ranked_true = caption_image[np.argsort(sims[i])[::-1]] == i
        hits = np.cumsum(ranked_true)
        expected.append(np.mean(hits[ranked_true] / (np.flatnonzero(ranked_true) + 1)))
    ap = metrics.image_annotation_average_precision(sims, caption_image)
    np.testing.assert_allclose(ap, expected)
    blocks = [metrics.image_annotation_average_precision(sims[a:a + 5], caption_image, np.arange(a, min(a + 5, 12)))
              for a in range(0, 12, 5)]
    np.testing.assert_allclose(np.concatenate(blocks), ap)


def test_mean_inverted_rank_and_map_in_the_metric_dictionary():
    # One caption per item (the TrecVid setting): image 0's caption is
    # ranked 2nd, image 1's and image 2's 1st -> MIR = (1/2 + 1 + 1) / 3,
    # and with one true caption AP = 1 / rank, so mAP = MIR.
    sims = np.array([[0.5, 0.9, 0.1], [0.1, 0.8, 0.2], [0.0, 0.1, 0.7]])
    result = metrics.retrieval_metrics(sims, np.arange(3))
    assert result["i2t_mir"] == pytest.approx((0.5 + 1 + 1) / 3)
    assert result["i2t_map"] == pytest.approx(result["i2t_mir"])
    assert "i2t_map" in metrics.SELECTION_METRICS and "i2t_medr" not in metrics.SELECTION_METRICS


def test_sentence_similarity_ranks_leave_the_query_out():
    # Captions 0-2 describe image 0, 3-4 image 1.
    caption_image = np.array([0, 0, 0, 1, 1])
    sims = np.array([
        [9.0, 1.0, 2.0, 5.0, 0.0],  # best co-caption (2) after caption 3: rank 2 (itself left out)
        [0.0, 9.0, 8.0, 0.0, 0.0],  # caption 2 first: rank 1
        [3.0, 4.0, 9.0, 7.0, 6.0],  # 1 after 3 and 4: rank 3
        [0.0, 0.0, 0.0, 9.0, 1.0],  # caption 4 first: rank 1
        [5.0, 5.0, 5.0, 4.0, 9.0],  # 3 after 0, 1, 2: rank 4
    ])
    np.testing.assert_array_equal(metrics.sentence_similarity_ranks(sims, caption_image), [2, 1, 3, 1, 4])
    np.testing.assert_array_equal(
        metrics.sentence_similarity_ranks(sims[3:], caption_image, text_index=np.array([3, 4])), [1, 4])
    with pytest.raises(ValueError, match="only one"):
        metrics.sentence_similarity_ranks(np.ones((2, 2)), np.array([0, 1]))


# --- one caption per item (TrecVid video-to-text) ------------------------------


def test_captions_with_partners_marks_captions_that_share_their_image():
    # Images 0 and 2 have one caption each; image 1 two; image 3 three; in any order.
    caption_image = np.array([0, 1, 2, 1, 3, 3, 3])
    np.testing.assert_array_equal(metrics.captions_with_partners(caption_image),
                                  [False, True, False, True, True, True, True])
    assert not metrics.captions_with_partners(np.arange(4)).any()


def test_sentence_similarity_over_the_captions_with_partners():
    """Image 0 has captions 0 and 2, image 1 caption 1 only (a candidate,
    not a query), image 2 caption 3 only."""
    caption_image = np.array([0, 1, 0, 2])
    sims = np.array([
        [9.0, 5.0, 3.0, 1.0],  # caption 2 after caption 1: rank 2
        [0.0, 9.0, 0.0, 0.0],  # (not a query)
        [4.0, 6.0, 9.0, 7.0],  # caption 0 after 3 and 1: rank 3
        [0.0, 0.0, 0.0, 9.0],  # (not a query)
    ])
    queries = np.flatnonzero(metrics.captions_with_partners(caption_image))
    np.testing.assert_array_equal(queries, [0, 2])
    np.testing.assert_array_equal(metrics.sentence_similarity_ranks(sims[queries], caption_image, queries), [2, 3])
    with pytest.raises(ValueError, match="caption 1 is the only one of its image"):
        metrics.sentence_similarity_ranks(sims, caption_image)


def test_retrieval_metrics_of_one_caption_per_image():
    """Three images, one caption each: i2t ranks [1, 2, 1], t2i ranks [1, 1, 2]."""
    sims = np.array([
        [0.9, 0.1, 0.8],  # image 0: caption 0 first
        [0.8, 0.7, 0.0],  # image 1: caption 1 after caption 0
        [0.1, 0.2, 0.6],  # image 2: caption 2 first
    ])  # columns: caption 0 -> image 0 first, caption 1 -> image 1 first, caption 2 -> image 2 after image 0
    result = metrics.retrieval_metrics(sims, np.arange(3))
    assert result["i2t_meanr"] == pytest.approx(4 / 3) and result["i2t_r1"] == pytest.approx(200 / 3)
    assert result["t2i_meanr"] == pytest.approx(4 / 3) and result["t2i_r1"] == pytest.approx(200 / 3)
    assert result["i2t_map"] == pytest.approx((1 + 1 / 2 + 1) / 3)  # AP of one true caption = 1 / its rank
    assert result["i2t_mir"] == pytest.approx((1 + 1 / 2 + 1) / 3)


def test_average_metrics_averages_each_metric_over_the_results_that_have_it():
    results = [{"rsum": 100.0, "t2t_meanr": 4.0, "notes": {}}, {"rsum": 200.0, "notes": {"t2t_meanr": "left out"}}]
    assert metrics.average_metrics(results) == {"rsum": 150.0, "t2t_meanr": 4.0}


@pytest.mark.parametrize("seed", range(3))
def test_recall_sum_counts_what_the_sorted_ranking_gives_without_ties(seed):
    rng = np.random.default_rng(seed)
    caption_image = rng.permutation(np.repeat(np.arange(40), 5))
    # Scores that favour the true pairs a little, so every recall level is reached sometimes.
    sims = rng.normal(size=(40, 200)) + 1.5 * (caption_image[None, :] == np.arange(40)[:, None])
    assert metrics.recall_sum(sims, caption_image) == pytest.approx(metrics.retrieval_metrics(sims, caption_image)["rsum"])


def test_recall_sum_counts_ties_in_the_querys_favour():
    # Two images, one caption each; every score ties: each query's true
    # candidate has nothing scored strictly above it, rank 1 in both directions.
    assert metrics.recall_sum(np.zeros((2, 2)), np.array([0, 1])) == 600.0
    # Image 0 prefers caption 1 (wrong): i2t rank 2 for image 0, 1 for image 1.
    sims = np.array([[0.0, 1.0], [0.0, 2.0]])
    # i2t R@1 50, R@5 100, R@10 100; t2i: caption 0's image 0 ties image 1
    # (rank 1), caption 1's image 1 is above image 0 (rank 1): 300.
    assert metrics.recall_sum(sims, np.array([0, 1])) == 550.0

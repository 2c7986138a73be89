"""Two-stage ranking (`common.reranking`) against a plain re-ranking loop
and on hand-built cases of ties and of a right answer outside the list."""

import numpy as np
import pytest

from common import metrics, reranking


def loop_ranking(first, second, k):
    """Each query's two-stage ranking, written out: the k best by the first
    stage (equal scores: lower index first), re-ordered by the second stage,
    then the rest in the first stage's order. For scores without ties in a
    list."""
    rankings = []
    for f, s in zip(first, second):
        proposed = sorted(range(len(f)), key=lambda c: (-f[c], c))
        listed, tail = proposed[:k], proposed[k:]
        rankings.append(sorted(listed, key=lambda c: -s[c]) + tail)
    return rankings


def loop_metrics(first, second, caption_image, k):
    """R@1/5/10 of both directions and the lists' recalls from `loop_ranking`."""
    i2t = [1 + min(r.index(c) for c in np.flatnonzero(caption_image == i))
           for i, r in enumerate(loop_ranking(first, second, k))]
    t2i = [1 + r.index(caption_image[j]) for j, r in enumerate(loop_ranking(first.T, second.T, k))]
    result = {f"{d}_r{n}": 100.0 * np.mean(np.asarray(ranks) <= n) for d, ranks in (("i2t", i2t), ("t2i", t2i))
              for n in (1, 5, 10)}
    result["i2t_list_recall"] = 100.0 * np.mean([
        any(caption_image[c] == i for c in sorted(range(first.shape[1]), key=lambda c: (-first[i, c], c))[:k])
        for i in range(first.shape[0])])
    result["t2i_list_recall"] = 100.0 * np.mean([
        caption_image[j] in sorted(range(first.shape[0]), key=lambda i: (-first[i, j], i))[:k]
        for j in range(first.shape[1])])
    return result, i2t, t2i


@pytest.mark.parametrize("k", [1, 3, 7, 12])
def test_random_matrices_equal_a_loop_re_ranking_of_the_first_stage_lists(k):
    rng = np.random.default_rng(k)
    caption_image = np.repeat(np.arange(12), 3)
    first, second = rng.normal(size=(12, 36)), rng.normal(size=(12, 36)).astype(np.float32)
    expected, i2t, t2i = loop_metrics(first, second, caption_image, k)
    result = reranking.two_stage_metrics(first, second, caption_image, k)
    assert {name: result[name] for name in expected} == pytest.approx(expected, abs=1e-9)
    assert result["i2t_meanr"] == pytest.approx(np.mean(i2t)) and result["t2i_meanr"] == pytest.approx(np.mean(t2i))


def test_a_right_answer_outside_the_list_comes_after_every_listed_candidate():
    # One image, captions 0..4, caption 4 the right one: the best of the
    # second stage, the worst of the first.
    first = np.array([[0.9, 0.8, 0.7, 0.6, 0.1]])
    second = np.array([[0.0, 0.1, 0.2, 0.3, 9.0]])
    order = reranking.first_stage_order(first)
    for k, rank in ((1, 5), (2, 5), (4, 5), (5, 1)):
        scores = reranking.two_stage_scores(order, np.take_along_axis(second, order[:, :k], axis=1))
        assert metrics.image_annotation_ranks(scores, np.array([1, 1, 1, 1, 0]))[0] == rank
    # k = 2: captions 1, 0 re-ranked (by the second stage), then 2, 3, 4 as the first stage ranks them.
    scores = reranking.two_stage_scores(order, np.take_along_axis(second, order[:, :2], axis=1))
    assert list(np.argsort(-scores[0])) == [1, 0, 2, 3, 4]


def test_equal_first_stage_scores_at_the_cut_and_in_the_tail_go_by_lower_index():
    first = np.array([[0.5, 0.9, 0.5, 0.1, 0.5]])
    second = np.array([[3.0, 1.0, 2.0, 5.0, 4.0]])
    order = reranking.first_stage_order(first)
    assert list(order[0]) == [1, 0, 2, 4, 3]
    # k = 2: of the three at 0.5, caption 0 is listed; 2 and 4 keep their index order in the tail.
    scores = reranking.two_stage_scores(order, np.take_along_axis(second, order[:, :2], axis=1))
    assert list(np.argsort(-scores[0])) == [0, 1, 2, 4, 3]


def test_equal_second_stage_scores_in_a_list_are_ordered_as_the_metrics_order_equal_scores():
    first = np.array([[0.1, 0.9, 0.8, 0.7, 0.2, 0.3]])
    second = np.array([[0.0, 0.5, 0.5, 0.5, 0.0, 0.0]], np.float32)
    order = reranking.first_stage_order(first)
    scores = reranking.two_stage_scores(order, np.take_along_axis(second, order[:, :3], axis=1))
    # The list {1, 2, 3}, all at 0.5: in the order `metrics.ranking_positions` gives them in index order.
    within = metrics.ranking_positions(second[:, 1:4])[0]
    assert [-scores[0, c] for c in (1, 2, 3)] == list(within)
    # Then the tail 5, 4, 0 by the first stage.
    assert [-scores[0, c] for c in (5, 4, 0)] == [3, 4, 5]


@pytest.mark.parametrize("extra", [0, 5])
def test_lists_of_every_candidate_give_exactly_the_second_stage_metrics(extra):
    rng = np.random.default_rng(1)
    caption_image = np.repeat(np.arange(8), 5)
    first = rng.normal(size=(8, 40))
    second = rng.normal(size=(8, 40)).astype(np.float32)
    second[:, 7] = second[:, 3]  # equal captions: ties in both directions
    second[2] = second[5]
    result = reranking.two_stage_metrics(first, second, caption_image, 40 + extra)
    assert {name: result[name] for name in metrics.METRIC_NAMES} == metrics.retrieval_metrics(second, caption_image)
    assert result["i2t_list_recall"] == result["t2i_list_recall"] == 100.0


def test_the_served_ranking_keeps_the_listed_scores_and_puts_the_tail_below_them_in_order():
    # Candidates 0..3; the first stage ranks 2, 0, 3, 1; lists of 2 hold 2 and 0.
    order = np.array([[2, 0, 3, 1], [2, 0, 3, 1]])
    second = np.array([[0.5, 0.9], [0.7, 0.7]])
    ranking, scores = reranking.two_stage_ranking(order, second)
    # Row 0: 0 (0.9) above 2 (0.5), then 3 and 1 at 0.5 - 1 - j.
    assert ranking[0].tolist() == [0, 2, 3, 1]
    np.testing.assert_allclose(scores[0], [0.9, 0.5, -0.5, -1.5])
    # Row 1: a tie, ordered as common.metrics orders equal scores (argsort(...)[::-1] on the list in candidate
    # order: the higher candidate first), then the tail below the tie.
    assert ranking[1].tolist() == [2, 0, 3, 1]
    np.testing.assert_allclose(scores[1], [0.7, 0.7, -0.3, -1.3])
    np.testing.assert_allclose(reranking.tail_scores(second, 3), [[-0.5, -1.5, -2.5], [-0.3, -1.3, -2.3]])


def tied_scores(rng, shape, levels):
    """Scores of a few distinct values: ties everywhere, at each list's cut too."""
    return rng.integers(0, levels, size=shape).astype(np.float32)


@pytest.mark.parametrize("k", [1, 3, 8, 20, 30])
def test_first_stage_lists_are_the_first_k_of_the_first_stage_order_in_index_order(k):
    first = tied_scores(np.random.default_rng(k), (9, 20), 4)
    expected = np.sort(reranking.first_stage_order(first)[:, :k], axis=1)
    np.testing.assert_array_equal(reranking.first_stage_lists(first, k), expected)


@pytest.mark.parametrize("k", [1, 4, 20])
def test_two_stage_positions_are_the_positions_of_the_two_stage_ranking(k):
    # Ties in both stages; the positions of every candidate, listed or not, against two_stage_scores'
    # ranking (which sorts).
    rng = np.random.default_rng(k)
    first, second = tied_scores(rng, (7, 20), 3), tied_scores(rng, (7, 20), 3)
    order = reranking.first_stage_order(first)
    expected = -reranking.two_stage_scores(order, np.take_along_axis(second, order[:, :k], axis=1))
    listed = reranking.first_stage_lists(first, k)
    candidates = np.tile(rng.permutation(20), (7, 1))
    positions = reranking.two_stage_positions(first, listed, np.take_along_axis(second, listed, axis=1), candidates)
    np.testing.assert_array_equal(positions, np.take_along_axis(expected, candidates, axis=1))

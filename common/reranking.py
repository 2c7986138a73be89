"""Two-stage ranking: pure NumPy functions of a first stage's scores and a
second stage's scores of the first stage's proposals.

A query (an image in image annotation, a caption in image retrieval) is
ranked against its candidates in two stages (`models.rerank`):

1. the first stage scores every candidate; its ranking is the candidates
   by descending score, equal scores in index order (a stable sort:
   `first_stage_order`); its k first candidates are the query's list;
2. the second stage scores only the k listed pairs. The query's two-stage
   ranking is the list by descending second-stage score, then every other
   candidate (the tail) in the first stage's ranking: a listed candidate is
   always above an unlisted one. Equal second-stage scores within the list
   are ordered as `common.metrics` orders equal scores of any matrix
   (`metrics.ranking_positions`, VSE++'s argsort order), applied to the
   list taken in candidate-index order: a list of every candidate is then
   ranked exactly as the second stage ranks the whole row.

The evaluation (`engine.evaluation.rank_two_stage`) needs only the
positions of each query's right answers, so it finds the lists by
partitioning each row (`first_stage_lists`) and counts those positions
(`two_stage_positions`) instead of sorting every row.

`two_stage_scores` writes a ranking as a score matrix (minus each
candidate's 0-based position, all distinct), so every function of
`common.metrics` ranks it as it stands. What a two-stage SavedModel's
`score`, `python -m search` and `tools.show_retrievals` give instead keeps
the second stage's scores of the list and puts the tail below them
(`tail_scores`, `two_stage_ranking`).
"""

import numpy as np

from common import metrics


def first_stage_order(first):
    """int [n_queries, n_candidates]: each query's candidates by descending
    first-stage score [n_queries, n_candidates], equal scores by lower
    index first."""
    return np.argsort(-np.asarray(first), axis=1, kind="stable")


def first_stage_lists(first, k):
    """int [n_queries, k]: each query's list, the candidates of
    `first_stage_order(first)[:, :k]`, in index order; found by
    partitioning each row of scores [n_queries, n_candidates] at its k-th
    best score, not by sorting it (finite scores)."""
    first = np.asarray(first)
    n_queries, n_candidates = first.shape
    if k >= n_candidates:
        return np.broadcast_to(np.arange(n_candidates), first.shape)
    kth = np.partition(first, n_candidates - k, axis=1)[:, n_candidates - k, None]
    listed = first > kth
    # The candidates scored at the k-th best (few) fill the list's rest, lowest index first.
    rows, columns = np.nonzero(first == kth)
    room = k - np.count_nonzero(listed, axis=1)
    rank_in_row = np.arange(len(rows)) - np.searchsorted(rows, rows)
    keep = rank_in_row < room[rows]
    listed[rows[keep], columns[keep]] = True
    return np.nonzero(listed)[1].reshape(n_queries, k)


def two_stage_positions(first, listed, second, candidates):
    """int64 [n_queries, m]: the 0-based positions of some candidates in
    their queries' two-stage rankings (those `two_stage_scores` gives them),
    counted rather than sorted: a listed candidate's in its list ranked by
    the second stage, an unlisted one's in the first stage's ranking (the
    candidates scored above it, and those scored equal with a lower index),
    which puts it behind the list.

    Args:
      first: float [n_queries, n_candidates], the first stage's scores.
      listed: int [n_queries, k], each query's list in index order
        (`first_stage_lists`).
      second: float [n_queries, k], the second stage's scores of the listed
        pairs, aligned with `listed`.
      candidates: int [n_queries, m], the candidates of each query whose
        positions are wanted.
    """
    first, listed, candidates = np.asarray(first), np.asarray(listed), np.asarray(candidates)
    in_list = metrics.ranking_positions(np.asarray(second))
    rows, columns = np.arange(len(first))[:, None], np.arange(first.shape[1])[None, :]
    positions = np.empty(candidates.shape, np.int64)
    for j in range(candidates.shape[1]):
        candidate = candidates[:, j, None]
        score = first[rows, candidate]
        positions[:, j] = np.count_nonzero((first > score) | ((first == score) & (columns < candidate)), axis=1)
    match = listed[:, None, :] == candidates[:, :, None]  # [n_queries, m, k]
    return np.where(match.any(axis=2), np.where(match, in_list[:, None, :], 0).sum(axis=2), positions)


def two_stage_scores(order, second):
    """The two-stage ranking of each query as a score matrix.

    Args:
      order: int [n_queries, n_candidates], the first stage's ranking
        (`first_stage_order`); each query's list is its first k entries.
      second: float [n_queries, k], the second stage's scores of the
        listed pairs, aligned with `order[:, :k]`.

    Returns:
      float64 [n_queries, n_candidates]: minus each candidate's 0-based
      position in its query's two-stage ranking (the module docstring): the
      listed candidates at 0 .. -(k - 1), the tail below them in the first
      stage's order.
    """
    order, second = np.asarray(order), np.asarray(second)
    n_queries, n_candidates = order.shape
    k = second.shape[1]
    listed = order[:, :k]
    by_index = np.argsort(listed, axis=1)
    rows = np.arange(n_queries)[:, None]
    positions = np.empty((n_queries, n_candidates), np.int64)
    positions[rows, order[:, k:]] = np.arange(k, n_candidates)[None, :]
    positions[rows, np.take_along_axis(listed, by_index, axis=1)] = metrics.ranking_positions(
        np.take_along_axis(second, by_index, axis=1))
    return -positions.astype(np.float64)


def image_lists_hit(listed, caption_image, image_index):
    """bool [n_rows]: whether each image's list of captions (int [n_rows,
    k]) holds one of its captions; `image_index` [n_rows]: which image each
    row is. Their mean is the first stage's i2t recall@k: the images a
    re-ranker can put a right caption at the top for."""
    return (np.asarray(caption_image)[listed] == np.asarray(image_index)[:, None]).any(axis=1)


def caption_lists_hit(listed, row_image):
    """bool [n_rows]: whether each caption's list of images (int [n_rows,
    k]) holds its image `row_image` [n_rows]: the first stage's t2i
    recall@k, as `image_lists_hit`."""
    return (np.asarray(listed) == np.asarray(row_image)[:, None]).any(axis=1)


def two_stage_metrics(first, second, caption_image, k):
    """The zoo's metrics (`common.metrics.metrics_from_ranks`) of ranking by
    two stages with lists of `k` in both directions, from the full matrices
    of both stages' scores [n_images, n_captions] (an independent route:
    the evaluation scores only the listed pairs), plus each direction's
    list recall (`i2t_list_recall`, `t2i_list_recall`, in %: the
    queries whose list holds a right answer, the ceiling of a re-ranker's
    R@k)."""
    first, second = np.asarray(first), np.asarray(second)
    caption_image = np.asarray(caption_image)
    n_images, n_captions = first.shape
    i2t_order = first_stage_order(first)
    i2t_list = i2t_order[:, : min(k, n_captions)]
    i2t = two_stage_scores(i2t_order, np.take_along_axis(second, i2t_list, axis=1))
    t2i_order = first_stage_order(first.T)
    t2i_list = t2i_order[:, : min(k, n_images)]
    t2i = two_stage_scores(t2i_order, np.take_along_axis(second.T, t2i_list, axis=1))
    result = metrics.metrics_from_ranks(
        metrics.image_annotation_ranks(i2t, caption_image),
        metrics.image_retrieval_ranks(t2i.T, caption_image),
        metrics.image_annotation_average_precision(i2t, caption_image),
    )
    result["i2t_list_recall"] = 100.0 * float(np.mean(image_lists_hit(i2t_list, caption_image, np.arange(n_images))))
    result["t2i_list_recall"] = 100.0 * float(np.mean(caption_lists_hit(t2i_list, caption_image)))
    return result


def tail_scores(second, n_tail):
    """float [n_queries, n_tail]: the scores of each query's tail where the
    listed candidates keep their second-stage scores `second` [n_queries,
    k] (a two-stage SavedModel's `score`, `python -m search`): the j-th
    (0-based) unlisted candidate in the first stage's ranking gets the
    query's lowest listed score - 1 - j, below every listed score and in
    the first stage's order (distinct while float32 holds them: |score| +
    n_tail < 2**24)."""
    return np.min(second, axis=1, keepdims=True) - 1.0 - np.arange(n_tail)[None, :]


def two_stage_ranking(order, second):
    """Each query's candidates in their two-stage ranking, with the scores
    a two-stage SavedModel's `score` gives them.

    Args:
      order, second: as `two_stage_scores`'.

    Returns:
      (int [n_queries, n_candidates]: the candidates, best first; float64
      [n_queries, n_candidates]: their scores, the listed ones' second-stage
      scores, then `tail_scores`).
    """
    order, second = np.asarray(order), np.asarray(second, np.float64)
    ranking = np.argsort(-two_stage_scores(order, second), axis=1)
    scores = np.empty(order.shape, np.float64)
    np.put_along_axis(scores, order, np.concatenate([second, tail_scores(second, order.shape[1] - second.shape[1])],
                                                    axis=1), axis=1)
    return ranking, np.take_along_axis(scores, ranking, axis=1)

"""Image-sentence retrieval metrics: pure NumPy functions of similarity scores.

Conventions (those of VSE++ `evaluation.py` and every paper of the zoo):
- `sims[i, j]` is the similarity of image `i` and caption `j`; higher is better.
- `caption_image[j]` is the image that caption `j` describes.
- Ranks are 1-based positions in the order of VSE++'s reference code,
  `numpy.argsort(scores)[::-1]`, so the numbers equal that code's on the same
  scores, ties included. Exact ties do occur: Flickr8k's test split holds
  identical caption texts, whose encodings and scores are identical.

Image annotation (image -> text, "i2t"): an image's rank is the best rank of
any of its captions among all captions. Image retrieval (text -> image, "t2i"):
a caption's rank is the rank of its image among all images. An image may have
any number of captions (5 in Flickr and COCO, about 40 per MSVD video).

Sentence similarity (`sentence_similarity_ranks`, "t2t") asks a caption to
retrieve another caption of its image: it is defined only for the captions
that have one (`captions_with_partners`), so not at all for a split of one
caption per item (a TrecVid video-to-text set); the other metrics are
defined for any number of captions per image, one included.

Besides R@K and median/mean rank, two measures of Dong et al.'s
Word2VisualVec (TMM 2018): image annotation mean average precision
(`i2t_map`, the model-selection measure of its public code) and mean
inverted rank (`i2t_mir`, the TrecVid video-to-text matching measure).
"""

import numpy as np

RECALL_LEVELS = (1, 5, 10)
METRIC_NAMES = tuple(
    f"{direction}_{name}"
    for direction in ("i2t", "t2i")
    for name in ("r1", "r5", "r10", "medr", "meanr")
) + ("rsum", "i2t_map", "i2t_mir")
# The metrics where higher is better: what model selection may maximise.
SELECTION_METRICS = tuple(name for name in METRIC_NAMES if not name.endswith(("medr", "meanr")))


def ranking_positions(sims):
    """`positions[r, c]`: 0-based position of column c when row r is sorted
    by `numpy.argsort(row)[::-1]` (VSE++'s descending order): the zoo's
    order of equal scores, which every rank below follows."""
    order = np.argsort(sims, axis=1)[:, ::-1]
    positions = np.empty_like(order)
    np.put_along_axis(positions, order, np.arange(sims.shape[1])[None, :], axis=1)
    return positions


def best_true_positions(sims, is_true):
    """`min(ranking_positions(sims)[r, c] for the true columns c of row r)`:
    the 0-based position of each row's best-ranked true column. Counted,
    not sorted, where it is the number of columns scored above the row's
    best true score: where no other column has that score and the row has
    no NaN (which the sort puts first); the other rows are sorted. Every row
    needs a true column."""
    best = np.where(is_true, sims, -np.inf).max(axis=1)
    positions = (sims > best[:, None]).sum(axis=1)
    sorted_rows = np.flatnonzero(((sims == best[:, None]).sum(axis=1) > 1) | np.isnan(sims).any(axis=1))
    if len(sorted_rows):
        positions[sorted_rows] = np.where(is_true[sorted_rows], ranking_positions(sims[sorted_rows]),
                                          sims.shape[1]).min(axis=1)
    return positions


def image_annotation_ranks(sims, caption_image, image_index=None):
    """Ranks of the best-ranked true caption of each image (i2t).

    Args:
      sims: float [n_rows, n_captions], rows are images, over all captions.
      caption_image: int [n_captions], image of each caption.
      image_index: int [n_rows], which image each row is; defaults to
        `arange(n_rows)`. Lets callers rank a block of images at a time.

    Returns:
      int64 [n_rows], 1-based ranks.
    """
    sims = np.asarray(sims)
    caption_image = np.asarray(caption_image)
    if image_index is None:
        image_index = np.arange(sims.shape[0])
    is_true = caption_image[None, :] == np.asarray(image_index)[:, None]
    if not is_true.any(axis=1).all():
        raise ValueError("an image has no caption in `caption_image`")
    return 1 + best_true_positions(sims, is_true).astype(np.int64)


def image_annotation_average_precision(sims, caption_image, image_index=None):
    """Average precision of each image's ranking of all captions (i2t).

    For an image with n true captions at 1-based positions p_1 < ... < p_n
    of the ranking (VSE++'s order, as the ranks), AP = (1/n) sum_k k / p_k.

    Args:
      sims, caption_image, image_index: as `image_annotation_ranks`.

    Returns:
      float64 [n_rows], in (0, 1].
    """
    sims = np.asarray(sims)
    caption_image = np.asarray(caption_image)
    if image_index is None:
        image_index = np.arange(sims.shape[0])
    is_true = caption_image[None, :] == np.asarray(image_index)[:, None]
    n_true = is_true.sum(axis=1)
    if not n_true.all():
        raise ValueError("an image has no caption in `caption_image`")
    # True-caption indicators in ranked order; precision at each true hit.
    positions = ranking_positions(sims)
    ranked_true = np.zeros_like(is_true)
    np.put_along_axis(ranked_true, positions, is_true, axis=1)
    hits = np.cumsum(ranked_true, axis=1)
    precision = hits / np.arange(1, sims.shape[1] + 1)[None, :]
    return (precision * ranked_true).sum(axis=1) / n_true


def average_precision_of_positions(positions, is_true):
    """Average precision of rankings given by where their true items are,
    as `image_annotation_average_precision` takes it from scores: a row's
    n true items at 0-based positions [n_rows, m] (`is_true` [n_rows, m]
    marks a row's real ones, for rows with fewer than m), AP = (1/n)
    sum_k k / p_k over their sorted 1-based positions p_k. float64 [n_rows]."""
    ranks = np.sort(np.where(is_true, np.asarray(positions) + 1.0, np.inf), axis=1)
    return (np.arange(1, ranks.shape[1] + 1) / ranks).sum(axis=1) / np.asarray(is_true).sum(axis=1)


def image_retrieval_ranks(sims, caption_image):
    """Rank of the true image of each caption (t2i).

    Args:
      sims: float [n_images, n_columns], over all images; the columns may be
        any block of captions.
      caption_image: int [n_columns], image of each column's caption.

    Returns:
      int64 [n_columns], 1-based ranks.
    """
    sims = np.asarray(sims).T
    is_true = np.asarray(caption_image)[:, None] == np.arange(sims.shape[1])[None, :]
    return 1 + best_true_positions(sims, is_true).astype(np.int64)


def rank_summary(ranks):
    """R@1, R@5, R@10 (in %), median rank and mean rank of 1-based ranks;
    the median as VSE++ reports it, floor(median(0-based ranks)) + 1."""
    ranks = np.asarray(ranks)
    summary = {f"r{k}": 100.0 * float(np.mean(ranks <= k)) for k in RECALL_LEVELS}
    summary["medr"] = float(np.floor(np.median(ranks - 1)) + 1)
    summary["meanr"] = float(np.mean(ranks))
    return summary


def metrics_from_ranks(i2t_ranks, t2i_ranks, i2t_average_precision):
    """The zoo's metric dictionary (`METRIC_NAMES`) from both directions'
    ranks and the images' average precisions.

    `i2t_mir` is the mean over images of 1 / the rank of their best-ranked
    caption: the TrecVid measure when an item has one caption per set (the
    public Word2VisualVec code's `i2t_inv_rank` sums 1/rank over all of an
    image's captions, which is the same in that case).
    """
    result = {}
    for direction, ranks in (("i2t", i2t_ranks), ("t2i", t2i_ranks)):
        for name, value in rank_summary(ranks).items():
            result[f"{direction}_{name}"] = value
    result["rsum"] = sum(
        result[f"{d}_r{k}"] for d in ("i2t", "t2i") for k in RECALL_LEVELS
    )
    result["i2t_map"] = float(np.mean(i2t_average_precision))
    result["i2t_mir"] = float(np.mean(1.0 / np.asarray(i2t_ranks)))
    return result


def retrieval_metrics(sims, caption_image):
    """All metrics of a full similarity matrix [n_images, n_captions]."""
    return metrics_from_ranks(
        image_annotation_ranks(sims, caption_image),
        image_retrieval_ranks(sims, caption_image),
        image_annotation_average_precision(sims, caption_image),
    )


def recall_sum(sims, caption_image):
    """rsum (R@1 + R@5 + R@10 of both directions, in %) of a full
    similarity matrix [n_images, n_captions], by counting instead of
    sorting: a query's rank is 1 + the number of candidates scored strictly
    above its best true one, so a tie counts in the query's favour (where
    `retrieval_metrics` follows VSE++'s sort order). For searches that score
    many matrices (an ensemble's weights): a few passes over the matrix
    instead of two sorts of it."""
    sims = np.asarray(sims)
    caption_image = np.asarray(caption_image)
    is_true = caption_image[None, :] == np.arange(sims.shape[0])[:, None]
    best_true = np.where(is_true, sims, -np.inf).max(axis=1)
    i2t = 1 + (sims > best_true[:, None]).sum(axis=1)
    true_score = sims[caption_image, np.arange(sims.shape[1])]
    t2i = 1 + (sims > true_score[None, :]).sum(axis=0)
    return sum(100.0 * float(np.mean(ranks <= k)) for ranks in (i2t, t2i) for k in RECALL_LEVELS)


def captions_with_partners(caption_image):
    """bool [n_captions]: whether each caption has another caption of its
    image, i.e. is a query of the sentence-similarity task (a caption that
    is the only one of its image has nothing to retrieve; it remains a
    candidate for the other queries)."""
    caption_image = np.asarray(caption_image)
    _, inverse, counts = np.unique(caption_image, return_inverse=True, return_counts=True)
    return counts[inverse.reshape(caption_image.shape)] > 1


def sentence_similarity_ranks(text_sims, caption_image, text_index=None):
    """Klein et al. 2015's third task, sentence similarity: a caption
    retrieves the other captions of its image among all other captions.

    Defined only for queries with another caption of their image
    (`captions_with_partners`): pass those as `text_index` when some images
    have a single caption.

    Args:
      text_sims: float [n_rows, n_captions], rows are query captions.
      caption_image: int [n_captions].
      text_index: int [n_rows], which caption each row is (default
        `arange(n_rows)`), so a block of queries can be ranked at a time.

    Returns:
      int64 [n_rows], the 1-based rank of the best-ranked other caption of
      the query's image, the query itself left out of the ranking.

    Raises:
      ValueError: a query is the only caption of its image.
    """
    text_sims = np.array(text_sims, dtype=np.float64)
    caption_image = np.asarray(caption_image)
    if text_index is None:
        text_index = np.arange(text_sims.shape[0])
    rows = np.arange(len(text_index))
    text_sims[rows, text_index] = -np.inf  # the query is not a candidate
    is_true = caption_image[None, :] == caption_image[text_index][:, None]
    is_true[rows, text_index] = False
    alone = ~is_true.any(axis=1)
    if alone.any():
        raise ValueError(f"caption {int(np.asarray(text_index)[np.argmax(alone)])} is the only one of its image: "
                         "it has no other caption to retrieve (see captions_with_partners)")
    return 1 + best_true_positions(text_sims, is_true).astype(np.int64)


def average_metrics(results):
    """Mean of several metric dictionaries (COCO's 5-fold 1K protocol): of
    each metric over the results that have it (a metric undefined in a
    fold, such as `t2t_meanr` where every image has one caption, is left
    out of that fold). Entries that are not numbers (notes) are left out."""
    names = dict.fromkeys(name for result in results for name, value in result.items()
                          if isinstance(value, (int, float, np.number)) and not isinstance(value, bool))
    return {name: float(np.mean([r[name] for r in results if name in r])) for name in names}

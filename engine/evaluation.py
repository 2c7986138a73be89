"""The evaluation protocol of the zoo: encode every image and every caption
of a split once, score every pair once, block by block, rank in both
directions, and turn the ranks into metrics (`common.metrics`).

`evaluate(scorer, split)` is the one route: validation during training,
the final test of a run and `evaluate.py` all call it, with a scorer of a
checkpoint or of a SavedModel (`engine.scoring`).

Protocols:
  full     the whole split (Flickr8k/30k's 1K test; COCO's 5K test).
  5fold1k  COCO's 1K protocol: the split cut into folds of 1000 images,
           metrics averaged over the folds.

An item (image or video) may have any number of captions, one included
(TrecVid's video-to-text sets). A metric undefined for a split is left out
of its results with a note saying why, under the key "notes" ({metric:
text}): the sentence-similarity mean rank `t2t_meanr` needs captions with
another caption of their item, so it is left out when every item has one
caption, and taken over the captions that have one (with a note giving
how many) when only some items have one.

A two-stage model (`models.rerank`: its scorer's `two_stage` is a
`TwoStage`) is ranked by `rank_two_stage`: its first stage scores every
pair, as above, and its second stage only the k pairs each query's list
holds, in each direction (`common.reranking` says how lists, ties and the
tail are ranked). Its results add `rerank_k` and the first stage's
recall@k of each direction (`i2t_list_recall`, `t2i_list_recall`, in %:
the ceiling of the two-stage R@K for K <= k).
"""

import dataclasses
import re
from typing import Callable

import numpy as np

from common import metrics, progress, reranking
from common.errors import InputError, error_reason

PROTOCOLS = ("full", "5fold1k")
FOLD_IMAGES = 1000
IMAGE_BLOCK = 128  # small enough for a progress bar of a pairwise model's long scoring
CAPTION_BLOCK = 2048
PAIR_BLOCK = 4096  # listed pairs gathered and scored by a second stage at a time


@dataclasses.dataclass(frozen=True)
class TwoStage:
    """How a two-stage model ranks (`RetrievalModel.rerank_k`), on the
    model's encodings, split into each stage's own.

    Attributes:
      stage_encodings: `(image_encodings, text_encodings) -> ((first
        stage's image encodings, text encodings), (second stage's ...))`,
        each stage's part of the model's encodings, in the form the
        functions below take (e.g. tensors, made once for a split).
      propose: `(image_encodings, text_encodings) -> [n_i, n_t]`, the first
        stage's scores of every pair of its encodings.
      score_pairs: `(image_encodings, text_encodings, image_rows [P],
        text_rows [P]) -> [P]`, the second stage's scores of the pairs
        (image_rows[p], text_rows[p]) of its encodings.
      similarity: `(image_encodings, text_encodings) -> [n_i, n_t]`, the
        second stage's scores of every pair of its encodings, for lists of
        every candidate.
      k: the length of each query's list, in both directions.
    """

    stage_encodings: Callable
    propose: Callable
    score_pairs: Callable
    similarity: Callable
    k: int


def rank_all(similarity, image_encodings, text_encodings, caption_image):
    """Both directions' ranks and the images' average precisions.

    The similarity matrix is computed once, one block of images at a time
    (a pairwise model's `similarity` runs a network on every pair: scoring
    it again for the other direction would double the cost); image->text
    ranks are taken from each block, text->image ranks from the assembled
    matrix, one block of captions at a time. Memory: the n_images x
    n_captions matrix (20 MB for a 1K test, 500 MB for COCO's 5K x 25K) plus
    one block.

    Args:
      similarity: `(image_encodings, text_encodings) -> [n_i, n_t]` array.
      image_encodings, text_encodings: encodings of a whole split (or fold).
      caption_image: int [n_captions].
    """
    return rank_matrix(score_matrix(similarity, image_encodings, text_encodings), caption_image)


def rank_matrix(sims, caption_image):
    """`rank_all`'s ranks and average precisions of a computed matrix
    [n_images, n_captions], ranked one block of images (or captions) at a
    time."""
    i2t, i2t_ap = [], []
    for a in range(0, len(sims), IMAGE_BLOCK):
        block, rows = sims[a : a + IMAGE_BLOCK], np.arange(a, min(a + IMAGE_BLOCK, len(sims)))
        i2t.append(metrics.image_annotation_ranks(block, caption_image, rows))
        i2t_ap.append(metrics.image_annotation_average_precision(block, caption_image, rows))
    t2i = [
        metrics.image_retrieval_ranks(sims[:, a : a + CAPTION_BLOCK], caption_image[a : a + CAPTION_BLOCK])
        for a in range(0, sims.shape[1], CAPTION_BLOCK)
    ]
    return np.concatenate(i2t), np.concatenate(t2i), np.concatenate(i2t_ap)


def evaluate_scores(sims, caption_image):
    """The metric dictionary of a computed score matrix [n_images,
    n_captions] of a whole split (a fitted model's dev scores,
    `models.base.Fit`), ranked as `evaluate` ranks a model's."""
    return metrics.metrics_from_ranks(*rank_matrix(sims, np.asarray(caption_image)))


def score_matrix(similarity, image_encodings, text_encodings):
    """The [n_images, n_captions] matrix of `similarity`, computed one block
    of `IMAGE_BLOCK` images at a time."""
    n_images, n_captions = len(image_encodings), len(text_encodings)
    sims = None
    for a in progress.bar(range(0, n_images, IMAGE_BLOCK), desc=f"scoring {IMAGE_BLOCK}-image blocks", unit="block"):
        block = np.asarray(similarity(image_encodings[a : a + IMAGE_BLOCK], text_encodings))
        if sims is None:
            sims = np.empty((n_images, n_captions), block.dtype)
        sims[a : a + len(block)] = block
    return sims


def rank_two_stage(two_stage, image_encodings, text_encodings, caption_image):
    """The metric dictionary of a two-stage model (`TwoStage`), with
    `rerank_k` and each direction's list recall (the module docstring).

    Cost: the first stage's matrix, as `rank_all` scores a model's, then
    the second stage on the k listed pairs of every query of each
    direction, `PAIR_BLOCK` pairs at a time: (n_images + n_captions) * k
    pairs. When a direction's lists hold every candidate (k >= n_captions
    or n_images), the second stage scores the whole matrix instead, as its
    own evaluation does, and both directions read their lists from it: with
    k >= both, the metrics are the second stage's own. Each query's list
    and the two-stage positions of its right answers are found without
    sorting its row (`common.reranking.first_stage_lists`,
    `two_stage_positions`).
    """
    n_images, n_captions = len(image_encodings), len(text_encodings)
    k_i2t, k_t2i = min(two_stage.k, n_captions), min(two_stage.k, n_images)
    (first_images, first_texts), (second_images, second_texts) = two_stage.stage_encodings(image_encodings,
                                                                                           text_encodings)
    first = score_matrix(two_stage.propose, first_images, first_texts)
    second = None
    if k_i2t == n_captions or k_t2i == n_images:
        second = score_matrix(two_stage.similarity, second_images, second_texts)

    def listed_scores(image_rows, text_rows):
        """The second stage's scores of pairs (image_rows[q, c], text_rows[q, c])."""
        if second is not None:
            return second[image_rows, text_rows]
        images, texts = image_rows.ravel(), text_rows.ravel()
        scores = [np.asarray(two_stage.score_pairs(second_images, second_texts, images[a : a + PAIR_BLOCK],
                                                   texts[a : a + PAIR_BLOCK]))
                  for a in range(0, len(images), PAIR_BLOCK)]
        return np.concatenate(scores).reshape(image_rows.shape)

    captions, is_caption = image_captions(caption_image, n_images)
    i2t, i2t_ap, i2t_hits = [], [], []
    for a in progress.bar(range(0, n_images, IMAGE_BLOCK), desc=f"re-ranking {IMAGE_BLOCK}-image blocks",
                          unit="block"):
        block, rows = first[a : a + IMAGE_BLOCK], np.arange(a, min(a + IMAGE_BLOCK, n_images))
        listed = reranking.first_stage_lists(block, k_i2t)
        scores = listed_scores(np.broadcast_to(rows[:, None], listed.shape), listed)
        positions = reranking.two_stage_positions(block, listed, scores, captions[rows])
        i2t.append(1 + np.where(is_caption[rows], positions, n_captions).min(axis=1))
        i2t_ap.append(metrics.average_precision_of_positions(positions, is_caption[rows]))
        i2t_hits.append(reranking.image_lists_hit(listed, caption_image, rows))
    t2i, t2i_hits = [], []
    for a in progress.bar(range(0, n_captions, CAPTION_BLOCK), desc=f"re-ranking {CAPTION_BLOCK}-caption blocks",
                          unit="block"):
        block = np.ascontiguousarray(first[:, a : a + CAPTION_BLOCK].T)
        columns = np.arange(a, a + len(block))
        listed = reranking.first_stage_lists(block, k_t2i)
        scores = listed_scores(listed, np.broadcast_to(columns[:, None], listed.shape))
        t2i.append(1 + reranking.two_stage_positions(block, listed, scores, caption_image[columns, None])[:, 0])
        t2i_hits.append(reranking.caption_lists_hit(listed, caption_image[columns]))
    result = metrics.metrics_from_ranks(np.concatenate(i2t), np.concatenate(t2i), np.concatenate(i2t_ap))
    result["rerank_k"] = two_stage.k
    result["i2t_list_recall"] = 100.0 * float(np.mean(np.concatenate(i2t_hits)))
    result["t2i_list_recall"] = 100.0 * float(np.mean(np.concatenate(t2i_hits)))
    return result


def image_captions(caption_image, n_images):
    """Each image's captions: int [n_images, m] (m: the most any image
    has; a shorter row is padded with its first caption) and bool
    [n_images, m] marking the real ones. An image without a caption is a
    ValueError, as in `common.metrics`."""
    counts = np.bincount(caption_image, minlength=n_images)
    if not counts.all():
        raise ValueError("an image has no caption in `caption_image`")
    slots = np.arange(counts.max())[None, :]
    is_caption = slots < counts[:, None]
    starts = (np.cumsum(counts) - counts)[:, None]
    return np.argsort(caption_image, kind="stable")[starts + np.where(is_caption, slots, 0)], is_caption


def fold_metrics(similarity, image_encodings, text_encodings, caption_image, two_stage=None):
    """The metrics of one split or fold: ranked by `rank_all`, or by
    `rank_two_stage` for a two-stage model."""
    if two_stage is not None:
        return rank_two_stage(two_stage, image_encodings, text_encodings, caption_image)
    return metrics.metrics_from_ranks(*rank_all(similarity, image_encodings, text_encodings, caption_image))


def sentence_similarity_mean_rank(similarity, text_encodings, caption_image):
    """Mean rank of the sentence-similarity task (Klein et al. 2015): each
    caption that has another caption of its item (`metrics.captions_with_partners`)
    against all other captions under the model's own similarity, blocks of
    query captions at a time.

    Returns:
      (mean rank, number of query captions); the mean rank is None when no
      caption has another caption of its item (the task is undefined).
    """
    queries = np.flatnonzero(metrics.captions_with_partners(caption_image))
    if not len(queries):
        return None, 0
    ranks = [
        metrics.sentence_similarity_ranks(similarity(text_encodings[block], text_encodings), caption_image, block)
        for block in (queries[a : a + CAPTION_BLOCK] for a in range(0, len(queries), CAPTION_BLOCK))
    ]
    return float(np.mean(np.concatenate(ranks))), len(queries)


def add_sentence_similarity(result, similarity, text_encodings, caption_image):
    """Adds `t2t_meanr` to a metric dictionary, or, where it is undefined or
    taken over part of the captions, a note saying so (see the module
    docstring)."""
    mean_rank, n_queries = sentence_similarity_mean_rank(similarity, text_encodings, caption_image)
    n_captions = len(caption_image)
    if mean_rank is None:
        note = (f"t2t_meanr left out: each of the {n_captions} captions is the only one of its item, and "
                "sentence similarity ranks another caption of the same item")
    else:
        result["t2t_meanr"] = mean_rank
        if n_queries == n_captions:
            return result
        note = (f"t2t_meanr over the {n_queries} of {n_captions} captions that have another caption of their "
                f"item; {n_captions - n_queries} {'has' if n_captions - n_queries == 1 else 'have'} none")
    result.setdefault("notes", {})["t2t_meanr"] = note
    return result


def evaluate_encodings(similarity, image_encodings, text_encodings, caption_image, protocol="full",
                       sentence_similarity=True, two_stage=None):
    """The metric dictionary of encoded images and captions under a protocol.

    With `sentence_similarity` (for a model whose images and captions share
    one space, `RetrievalModel.joint_space`: every model but the pairwise
    m-CNN), also `t2t_meanr`, the mean rank of the sentence-similarity task
    under the model's own similarity: over the captions with another
    caption of their item; where some or all have none, "notes" says so
    (`add_sentence_similarity`). Any number of captions per item works,
    one included. A `TwoStage` model is ranked by `rank_two_stage`.
    """
    caption_image = np.asarray(caption_image)
    if protocol == "full":
        result = fold_metrics(similarity, image_encodings, text_encodings, caption_image, two_stage)
        if sentence_similarity:
            add_sentence_similarity(result, similarity, text_encodings, caption_image)
        return result
    if protocol != "5fold1k":
        raise InputError(f"--protocol {protocol!r}: choose one of {', '.join(PROTOCOLS)}")
    n_images = len(image_encodings)
    if n_images < 2 * FOLD_IMAGES or n_images % FOLD_IMAGES:
        raise InputError(
            f"--protocol 5fold1k needs a multiple of {FOLD_IMAGES} images (at least two folds); the split has {n_images}"
        )
    results, notes = [], {}
    for fold, start in enumerate(range(0, n_images, FOLD_IMAGES), start=1):
        in_fold = (caption_image >= start) & (caption_image < start + FOLD_IMAGES)
        fold_texts, fold_captions = text_encodings[in_fold], caption_image[in_fold] - start
        results.append(fold_metrics(similarity, image_encodings[start : start + FOLD_IMAGES], fold_texts,
                                    fold_captions, two_stage))
        if sentence_similarity:
            add_sentence_similarity(results[-1], similarity, fold_texts, fold_captions)
            for name, note in results[-1].pop("notes", {}).items():
                notes.setdefault(name, []).append(f"fold {fold}: {note}")
    result = metrics.average_metrics(results)
    if notes:
        result["notes"] = {name: "; ".join(texts) for name, texts in notes.items()}
    return result


def format_table(result):
    """A two-row text table of the metrics, as the papers print them, then
    the summary measures and a line per note (a metric left out or taken
    over part of the split)."""
    header = f"{'':6}{'R@1':>8}{'R@5':>8}{'R@10':>8}{'medr':>8}{'meanr':>8}"
    rows = [header]
    for direction, label in (("i2t", "i2t"), ("t2i", "t2i")):
        values = "".join(
            f"{result[f'{direction}_{name}']:8.1f}" for name in ("r1", "r5", "r10", "medr", "meanr")
        )
        rows.append(f"{label:6}{values}")
    rows.append(f"rsum {result['rsum']:.1f}   i2t mAP {result['i2t_map']:.3f}   i2t MIR {result['i2t_mir']:.3f}"
                + (f"   sentence similarity mean rank {result['t2t_meanr']:.1f}" if "t2t_meanr" in result else ""))
    if "rerank_k" in result:
        k = f"{result['rerank_k']:g}"
        rows.append(f"two stages, lists of k = {k}: the first stage's recall@{k} (the re-ranker's ceiling) "
                    f"i2t {result['i2t_list_recall']:.1f}, t2i {result['t2i_list_recall']:.1f}")
    rows.extend(f"note: {note}" for note in result.get("notes", {}).values())
    return "\n".join(rows)


def encode_split(scorer, split, batch_size=256):
    """(image encodings, text encodings) of a loaded `RetrievalSplit`."""
    # Imported here: evaluate.py imports this module before its quiet start.
    import tensorflow as tf

    try:
        return scorer.encode_images(split.images, batch_size), scorer.encode_texts(split.captions, batch_size)
    except tf.errors.InvalidArgumentError as error:
        raise InputError(f"{split.captions_file}: {refusal_reason(error)}") from None


def evaluate(scorer, split, protocol="full", batch_size=256, encodings=None, sentence_similarity=None):
    """The metrics of a loaded `RetrievalSplit` under `scorer` (a scorer of
    `engine.scoring`), from its `encodings` when given.

    `sentence_similarity` (default: whether the scorer's model has a joint
    space) adds the sentence-similarity mean rank; validation leaves it out
    (it needs only the selection metric). A scorer whose `two_stage` is a
    `TwoStage` is ranked in two stages.
    """
    image_encodings, text_encodings = encodings or encode_split(scorer, split, batch_size)
    if sentence_similarity is None:
        sentence_similarity = scorer.joint_space
    return evaluate_encodings(
        scorer.similarity, image_encodings, text_encodings, split.caption_image, protocol, sentence_similarity,
        scorer.two_stage,
    )


def refusal_reason(error):
    """Why the model refused a caption: the text of its failed assertion
    (e.g. "empty caption: ..."), else the error's reason (`error_reason`)."""
    assertion = re.search(r"assertion failed: \[([^\]]*)\]", getattr(error, "message", str(error)))
    return assertion.group(1).strip() if assertion else error_reason(error)

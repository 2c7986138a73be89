"""The evaluation of a two-stage model (`engine.evaluation.rank_two_stage`)
on hand-made stages whose scores are matrices looked up by index."""

import numpy as np
import pytest

from common import metrics, reranking
from engine import evaluation


class MatrixStages:
    """Encodings are indices; the stages' scores are rows of two matrices.
    Counts the pairs the second stage scores."""

    def __init__(self, first, second, k):
        self.first, self.second, self.pairs = first, second, 0
        self.two_stage = evaluation.TwoStage(stage_encodings=lambda images, texts: ((images, texts), (images, texts)),
                                             propose=self.propose, score_pairs=self.score_pairs,
                                             similarity=self.similarity, k=k)

    def propose(self, images, texts):
        return self.first[np.ix_(images, texts)]

    def similarity(self, images, texts):
        return self.second[np.ix_(images, texts)]

    def score_pairs(self, images, texts, image_rows, text_rows):
        assert len(image_rows) == len(text_rows) <= evaluation.PAIR_BLOCK
        self.pairs += len(image_rows)
        return self.second[images[image_rows], texts[text_rows]]


def matrices(n_images, per_image, seed):
    rng = np.random.default_rng(seed)
    n_captions = n_images * per_image
    return (rng.normal(size=(n_images, n_captions)).astype(np.float32),
            rng.normal(size=(n_images, n_captions)).astype(np.float32), np.repeat(np.arange(n_images), per_image))


@pytest.mark.parametrize("k", [1, 4, 19])
def test_scoring_only_the_listed_pairs_gives_the_numpy_two_stage_metrics(k, monkeypatch):
    # Blocks smaller than the split, so lists and pairs cross block edges.
    monkeypatch.setattr(evaluation, "IMAGE_BLOCK", 7)
    monkeypatch.setattr(evaluation, "CAPTION_BLOCK", 11)
    monkeypatch.setattr(evaluation, "PAIR_BLOCK", 13)
    first, second, caption_image = matrices(20, 3, k)
    stages = MatrixStages(first, second, k)
    result = evaluation.rank_two_stage(stages.two_stage, np.arange(20), np.arange(60), caption_image)
    expected = reranking.two_stage_metrics(first, second, caption_image, k)
    # Ranks are counted, not sorted: equal; the average precisions sum their terms in another order.
    assert result == pytest.approx({**expected, "rerank_k": k}, rel=1e-12, abs=0)
    assert {name: result[name] for name in metrics.METRIC_NAMES if name != "i2t_map"} == {
        name: expected[name] for name in metrics.METRIC_NAMES if name != "i2t_map"}
    # k pairs a query, in each direction: 20 images and 60 captions.
    assert stages.pairs == (20 + 60) * k


@pytest.mark.parametrize("k", [1, 3, 10])
def test_ties_and_uneven_captions_give_the_numpy_two_stage_metrics(k, monkeypatch):
    # Scores of three values (ties at every list's cut and within lists) and items of 1 to 4 captions.
    monkeypatch.setattr(evaluation, "IMAGE_BLOCK", 4)
    monkeypatch.setattr(evaluation, "CAPTION_BLOCK", 9)
    rng = np.random.default_rng(k)
    caption_image = np.repeat(np.arange(10), rng.integers(1, 5, size=10))
    first, second = (rng.integers(0, 3, size=(10, len(caption_image))).astype(np.float32) for _ in range(2))
    result = evaluation.rank_two_stage(MatrixStages(first, second, k).two_stage, np.arange(10),
                                       np.arange(len(caption_image)), caption_image)
    assert result == pytest.approx({**reranking.two_stage_metrics(first, second, caption_image, k), "rerank_k": k},
                                   rel=1e-12, abs=0)


def test_lists_of_every_candidate_score_the_whole_matrix_once_and_give_the_second_stage_metrics():
    first, second, caption_image = matrices(6, 5, 0)
    second[:, 4] = second[:, 9]  # equal captions
    stages = MatrixStages(first, second, 30)
    result = evaluation.rank_two_stage(stages.two_stage, np.arange(6), np.arange(30), caption_image)
    assert stages.pairs == 0
    assert {name: result[name] for name in metrics.METRIC_NAMES} == metrics.retrieval_metrics(second, caption_image)


def test_the_5fold1k_protocol_ranks_each_fold_in_two_stages(monkeypatch):
    monkeypatch.setattr(evaluation, "FOLD_IMAGES", 10)
    first, second, caption_image = matrices(20, 2, 3)
    stages = MatrixStages(first, second, 3)
    result = evaluation.evaluate_encodings(None, np.arange(20), np.arange(40), caption_image, "5fold1k",
                                           sentence_similarity=False, two_stage=stages.two_stage)
    folds = [reranking.two_stage_metrics(first[a : a + 10, 2 * a : 2 * a + 20], second[a : a + 10, 2 * a : 2 * a + 20],
                                         caption_image[2 * a : 2 * a + 20] - a, 3) for a in (0, 10)]
    assert result == pytest.approx({**metrics.average_metrics(folds), "rerank_k": 3})


def test_the_table_says_the_first_stage_recall_at_k():
    first, second, caption_image = matrices(5, 2, 4)
    result = evaluation.rank_two_stage(MatrixStages(first, second, 2).two_stage, np.arange(5), np.arange(10),
                                       caption_image)
    table = evaluation.format_table(result)
    assert f"recall@2 (the re-ranker's ceiling) i2t {result['i2t_list_recall']:.1f}, t2i" in table

import numpy as np
import pytest

from common import metrics
from common.errors import InputError
from engine import evaluation


def dot(a, b):
    return a @ b.T


def encodings(n_images, seed=0):
    """8-d encodings in multiples of 1/16 below 16 in magnitude: every
    product is a multiple of 1/256 and every partial sum of 8 of them is
    below 2^11, so exact in float32. Any block of `dot` (BLAS picks its
    kernels by shape and CPU) gives the same scores as the whole matrix."""
    rng = np.random.default_rng(seed)
    images = np.round(16 * rng.normal(size=(n_images, 8))) / 16
    texts = np.repeat(images, 5, axis=0) + np.round(16 * rng.normal(scale=2.0, size=(5 * n_images, 8))) / 16
    assert np.abs(texts).max() < 16
    return images.astype(np.float32), texts.astype(np.float32), np.repeat(np.arange(n_images), 5)


def test_full_protocol_in_blocks_equals_the_whole_matrix(monkeypatch):
    images, texts, caption_image = encodings(300)
    monkeypatch.setattr(evaluation, "IMAGE_BLOCK", 64)
    monkeypatch.setattr(evaluation, "CAPTION_BLOCK", 333)
    result = evaluation.evaluate_encodings(dot, images, texts, caption_image)
    sentence_ranks = metrics.sentence_similarity_ranks(dot(texts, texts), caption_image)
    assert result.pop("t2t_meanr") == pytest.approx(sentence_ranks.mean())
    assert result == metrics.retrieval_metrics(dot(images, texts), caption_image)


def test_a_computed_matrix_in_blocks_equals_the_whole_matrix(monkeypatch):
    images, texts, caption_image = encodings(300, seed=1)
    monkeypatch.setattr(evaluation, "IMAGE_BLOCK", 64)
    monkeypatch.setattr(evaluation, "CAPTION_BLOCK", 333)
    sims = dot(images, texts)
    assert evaluation.evaluate_scores(sims, caption_image) == metrics.retrieval_metrics(sims, caption_image)


@pytest.mark.slow  # over 10 s on 2 cores
def test_5fold1k_averages_folds_of_1000_images():
    images, texts, caption_image = encodings(2000)
    result = evaluation.evaluate_encodings(dot, images, texts, caption_image, protocol="5fold1k")
    folds = [metrics.retrieval_metrics(dot(images[a:a + 1000], texts[5 * a:5 * a + 5000]), caption_image[:5000])
             for a in (0, 1000)]
    for name in metrics.METRIC_NAMES:
        assert result[name] == pytest.approx((folds[0][name] + folds[1][name]) / 2)
    whole = evaluation.evaluate_encodings(dot, images, texts, caption_image)
    assert result["rsum"] > whole["rsum"]  # 1K candidates are easier than 2K


def test_5fold1k_needs_whole_folds():
    images, texts, caption_image = encodings(1500)
    with pytest.raises(InputError, match="multiple of 1000 images"):
        evaluation.evaluate_encodings(dot, images, texts, caption_image, protocol="5fold1k")


def test_table_lists_both_directions_and_rsum():
    images, texts, caption_image = encodings(20)
    table = evaluation.format_table(evaluation.evaluate_encodings(dot, images, texts, caption_image))
    assert "i2t" in table and "t2i" in table and "rsum" in table


# --- evaluate(scorer, split): the one route of validation, test and evaluate.py


class FakeScorer:
    """A scorer (the interface of `engine.scoring`'s) on hand-made encodings:
    images encode as their features, captions as the vector `CAPTIONS` gives."""

    two_stage = None

    def __init__(self, joint_space=True):
        self.joint_space = joint_space
        self.calls = []

    def encode_images(self, features, batch_size=256):
        self.calls.append(("images", batch_size))
        return np.asarray(features, np.float32)

    def encode_texts(self, captions, batch_size=256):
        self.calls.append(("texts", batch_size))
        return np.array([CAPTIONS[c] for c in captions], np.float32)

    def similarity(self, image_encodings, text_encodings):
        return dot(image_encodings, text_encodings)


# Image 0 = [1, 0], image 1 = [0, 1]; captions 0-1 describe image 0, 2-3 image 1.
CAPTIONS = {"c0": [1.0, 0.0], "c1": [0.8, 0.2], "c2": [0.0, 1.0], "c3": [0.6, 0.4]}


def hand_split():
    from data.readers import RetrievalSplit

    return RetrievalSplit(images=np.eye(2, dtype=np.float32), captions=list(CAPTIONS),
                          caption_image=np.array([0, 0, 1, 1]), image_ids=["", ""], source="hand",
                          captions_file="hand/test_caps.txt")


# Scores: image 0 -> captions [1, .8, 0, .6], image 1 -> [0, .2, 1, .4].
# i2t: each image's own captions rank 1st and 2nd (rank 1, AP 1).
# t2i: captions 0-2 rank their image 1st; caption 3 prefers image 0 (.6 > .4): rank 2.
# Sentence similarity: c0 -> c1 1st, c1 -> c0 1st, c2 -> c3 1st; c3 scores
# c0 .6, c1 .56, c2 .4: c2 3rd; mean rank (1 + 1 + 1 + 3) / 4.
HAND_METRICS = {
    "i2t_r1": 100.0, "i2t_r5": 100.0, "i2t_r10": 100.0, "i2t_medr": 1.0, "i2t_meanr": 1.0,
    "t2i_r1": 75.0, "t2i_r5": 100.0, "t2i_r10": 100.0, "t2i_medr": 1.0, "t2i_meanr": 1.25,
    "rsum": 575.0, "i2t_map": 1.0, "i2t_mir": 1.0,
}


def test_evaluate_encodes_the_split_once_and_scores_it():
    scorer = FakeScorer()
    result = evaluation.evaluate(scorer, hand_split(), batch_size=3)
    assert result == pytest.approx({**HAND_METRICS, "t2t_meanr": 1.5})
    assert scorer.calls == [("images", 3), ("texts", 3)]


def test_sentence_similarity_follows_the_joint_space_unless_asked():
    split = hand_split()
    assert evaluation.evaluate(FakeScorer(joint_space=False), split) == pytest.approx(HAND_METRICS)
    # Validation leaves it out; it can be asked of any scorer.
    assert evaluation.evaluate(FakeScorer(), split, sentence_similarity=False) == pytest.approx(HAND_METRICS)
    forced = evaluation.evaluate(FakeScorer(joint_space=False), split, sentence_similarity=True)
    assert forced["t2t_meanr"] == pytest.approx(1.5)


def test_evaluate_scores_given_encodings_without_encoding_again():
    scorer = FakeScorer()
    # Caption 3 encoded as image 1 itself: every caption ranks its image first.
    images = np.eye(2, dtype=np.float32)
    texts = np.array([[1, 0], [0.8, 0.2], [0, 1], [0, 1]], np.float32)
    result = evaluation.evaluate(scorer, hand_split(), encodings=(images, texts), sentence_similarity=False)
    assert scorer.calls == []
    assert (result["t2i_r1"], result["t2i_meanr"], result["rsum"]) == (100.0, 1.0, 600.0)


def test_evaluate_passes_the_protocol_on():
    with pytest.raises(InputError, match="multiple of 1000 images"):
        evaluation.evaluate(FakeScorer(), hand_split(), protocol="5fold1k")


def test_a_caption_the_model_refuses_is_an_input_error_naming_the_captions_file():
    import tensorflow as tf

    class Refusing(FakeScorer):
        def encode_texts(self, captions, batch_size=256):
            raise tf.errors.InvalidArgumentError(None, None, "assertion failed: [empty caption: line 3] [Op:Assert]")

    with pytest.raises(InputError) as error:
        evaluation.evaluate(Refusing(), hand_split())
    assert str(error.value) == "hand/test_caps.txt: empty caption: line 3"


# --- any number of captions per item, one included (TrecVid video-to-text) ---


def one_caption_split():
    """Images 0 and 1 with one caption each (the captions c0 and c2)."""
    from data.readers import RetrievalSplit

    return RetrievalSplit(images=np.eye(2, dtype=np.float32), captions=["c0", "c2"], caption_image=np.array([0, 1]),
                          image_ids=["", ""], source="hand", captions_file="hand/test_caps.txt")


def test_one_caption_per_item_leaves_sentence_similarity_out_with_a_note():
    """Each caption ranks its own image first and vice versa; t2t_meanr is
    undefined (no other caption of the same item) and a note says so."""
    result = evaluation.evaluate(FakeScorer(), one_caption_split())
    notes = result.pop("notes")
    assert notes == {"t2t_meanr": "t2t_meanr left out: each of the 2 captions is the only one of its item, and "
                                  "sentence similarity ranks another caption of the same item"}
    assert result == pytest.approx({
        "i2t_r1": 100.0, "i2t_r5": 100.0, "i2t_r10": 100.0, "i2t_medr": 1.0, "i2t_meanr": 1.0,
        "t2i_r1": 100.0, "t2i_r5": 100.0, "t2i_r10": 100.0, "t2i_medr": 1.0, "t2i_meanr": 1.0,
        "rsum": 600.0, "i2t_map": 1.0, "i2t_mir": 1.0,
    })
    table = evaluation.format_table({**result, "notes": notes})
    assert "sentence similarity" not in table.splitlines()[3]
    assert table.splitlines()[-1] == f"note: {notes['t2t_meanr']}"


def test_sentence_similarity_over_the_captions_that_have_a_partner():
    """Image 0 has c0 and c1, image 1 only c2: the queries are c0 and c1
    (each ranks the other first: mean rank 1; c2 is a candidate only)."""
    from data.readers import RetrievalSplit

    split = RetrievalSplit(images=np.eye(2, dtype=np.float32), captions=["c0", "c1", "c2"],
                           caption_image=np.array([0, 0, 1]), image_ids=["", ""], source="hand")
    result = evaluation.evaluate(FakeScorer(), split)
    assert result["t2t_meanr"] == 1.0
    assert result["notes"] == {"t2t_meanr": "t2t_meanr over the 2 of 3 captions that have another caption of "
                                            "their item; 1 has none"}
    # A split where every caption has a partner gets no note.
    assert "notes" not in evaluation.evaluate(FakeScorer(), hand_split())


def test_5fold1k_of_one_caption_per_image_notes_each_fold():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(2000, 8)).astype(np.float32)
    texts = images + rng.normal(scale=0.5, size=images.shape).astype(np.float32)
    result = evaluation.evaluate_encodings(dot, images, texts, np.arange(2000), protocol="5fold1k")
    assert "t2t_meanr" not in result and result["rsum"] > 0
    assert result["notes"]["t2t_meanr"].startswith("fold 1: t2t_meanr left out: each of the 1000 captions")
    assert "; fold 2: t2t_meanr left out" in result["notes"]["t2t_meanr"]

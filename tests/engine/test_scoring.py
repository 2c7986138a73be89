"""`engine.scoring.compose_query` on a hand-built scorer whose encodings are
known: the expected queries are worked out by hand, not by the scorer."""

import numpy as np
import pytest

from common.errors import InputError
from engine import scoring

# The hand-made text encodings (the letters too: composing them would show).
WORDS = {"cat": [1.0, 0.0], "dog": [0.0, 1.0], "a cat": [3.0, 3.0],
         "c": [100.0, 0.0], "a": [0.0, 100.0], "t": [100.0, 100.0]}


class HandScorer:
    """Images encode as twice their features; each text as the vector
    `WORDS` gives it. Records the texts it was asked to encode."""

    def __init__(self, joint_space=True):
        self.joint_space = joint_space
        self.texts = []

    def encode_images(self, features, batch_size=256):
        return 2.0 * np.asarray(features, np.float32)

    def encode_texts(self, captions, batch_size=256):
        self.texts.append(list(captions))
        return np.array([WORDS[c] for c in captions], np.float32)


IMAGES = np.array([[1.0, 2.0], [0.5, 0.0]], np.float32)


def test_composes_image_minus_subtracted_plus_added_texts():
    scorer = HandScorer()
    composed = scoring.compose_query(scorer, IMAGES, add=["cat", "a cat"], subtract=["dog"])
    # 2 * image + (1, 0) + (3, 3) - (0, 1)
    np.testing.assert_allclose(composed, [[6.0, 6.0], [5.0, 2.0]])
    np.testing.assert_allclose(scoring.compose_query(scorer, IMAGES), [[2.0, 4.0], [1.0, 0.0]])


def test_one_string_is_one_text_not_its_letters():
    scorer = HandScorer()
    composed = scoring.compose_query(scorer, IMAGES, add="cat", subtract="dog")
    np.testing.assert_allclose(composed, [[3.0, 3.0], [2.0, -1.0]])
    assert scorer.texts == [["cat"], ["dog"]]
    composed = scoring.compose_query(scorer, IMAGES, add=("cat",), subtract=iter(["dog"]))
    np.testing.assert_allclose(composed, [[3.0, 3.0], [2.0, -1.0]])


@pytest.mark.parametrize("add", [[1], ["cat", None], [b"cat"], b"cat", 3, {"cat": 1}])
def test_refuses_texts_that_are_not_strings(add):
    with pytest.raises(TypeError, match="compose_query: add must"):
        scoring.compose_query(HandScorer(), IMAGES, add=add)
    with pytest.raises(TypeError, match="compose_query: subtract must"):
        scoring.compose_query(HandScorer(), IMAGES, subtract=add)


def test_refuses_a_model_without_a_joint_space():
    scorer = HandScorer(joint_space=False)
    with pytest.raises(InputError, match="joint_space is False.*meaningless"):
        scoring.compose_query(scorer, IMAGES, add=["cat"])
    assert scorer.texts == []


def test_refuses_image_features_that_are_not_a_matrix():
    with pytest.raises(ValueError, match=r"2-D \[N, F\].*\(2,\)"):
        scoring.compose_query(HandScorer(), IMAGES[0], add=["cat"])

"""`engine.scoring.compose_query` on a hand-built scorer whose encodings are
known, and on both real scorers of a Word2VisualVec model whose linear
weights are set by hand: the expected queries are worked out by hand, not
by the scorer."""

import dataclasses

import keras
import numpy as np
import pytest

from common.errors import InputError
from data.image_features import ImageFeatures
from data.vocabulary import Vocabulary
from engine import export, scoring
from models import registry

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


# A bag-of-words Word2VisualVec whose MLP is linear on its inputs: the
# hidden layer's kernel is the identity, the output layer's `KNOWN_KERNEL`
# and `KNOWN_BIAS` are non-negative (neither ReLU cuts anything), so a
# text's predicted visual vector is its word counts @ KNOWN_KERNEL +
# KNOWN_BIAS; an image encodes as its features. Rows: cat, dog, a, grass
# (word ids 2-5; "on" and "the" are unknown and not counted).
KNOWN_VOCABULARY = Vocabulary(["<pad>", "<unk>", "cat", "dog", "a", "grass"], [0, 0, 5, 5, 5, 5])
KNOWN_KERNEL = np.array([[1, 0, 0], [0, 2, 0], [0, 0, 0.5], [1, 1, 1]], np.float32)
KNOWN_BIAS = np.array([0.25, 0, 0], np.float32)
# The texts' predicted visual vectors, by hand from the counts.
KNOWN_TEXTS = {
    "cat": [1.25, 0, 0],
    "dog": [0.25, 2, 0],
    "a cat": [1.25, 0, 0.5],
    "Cat cat.": [2.25, 0, 0],
    "grass": [1.25, 1, 1],
    "a dog on the grass": [1.25, 3, 1.5],
}
KNOWN_IMAGES = np.array([[1.0, 2.0, 3.0], [0.5, 0.0, -1.0]], np.float32)


def known_w2vv():
    spec = registry.get("w2vv-bow")
    config = dataclasses.replace(spec.experiment("paper").model, word_vectors=None, hidden_units=(4,))
    model = spec.build_model(config, KNOWN_VOCABULARY, ImageFeatures("fc", 3))
    model.encode_text(model.vectorizer(np.array(["cat"])))  # builds the MLP
    hidden, output = [layer for layer in model.mlp.layers if isinstance(layer, keras.layers.Dense)]
    hidden.kernel.assign(np.eye(4, dtype=np.float32))
    hidden.bias.assign(np.zeros(4, np.float32))
    output.kernel.assign(KNOWN_KERNEL)
    output.bias.assign(KNOWN_BIAS)
    return model


@pytest.fixture(scope="module", params=["checkpoint", "saved_model"])
def known_scorer(request, tmp_path_factory):
    model = known_w2vv()
    if request.param == "checkpoint":
        return scoring.CheckpointScorer(model)
    path = tmp_path_factory.mktemp("known") / "saved_model"
    export.export_saved_model(model, path)
    return scoring.SavedModelScorer(path)


def test_captions_encode_through_one_trace_whatever_their_batch():
    scorer = scoring.CheckpointScorer(known_w2vv())
    # Batches of 2 and 1 captions (by length): a function traced for its first call's shape would trace twice.
    scorer.encode_texts(["a dog on the grass", "cat", "grass"], batch_size=2)
    assert scorer._encode_text.experimental_get_tracing_count() == 1


def test_the_known_models_texts_encode_as_worked_out_by_hand(known_scorer):
    np.testing.assert_allclose(known_scorer.encode_texts(list(KNOWN_TEXTS)), list(KNOWN_TEXTS.values()), atol=1e-6)


@pytest.mark.parametrize("add, subtract, change", [
    ([], [], [0, 0, 0]),
    (["cat"], [], [1.25, 0, 0]),
    ([], ["dog"], [-0.25, -2, 0]),
    (["grass"], ["dog"], [1, -1, 1]),
    # Several texts of several lengths each way: their sums, not means.
    (["a cat", "grass", "a dog on the grass"], ["dog", "Cat cat."], [1.25, 2, 3]),
    # A text on both sides cancels.
    (["cat", "dog"], ["cat"], [0.25, 2, 0]),
])
def test_composes_features_plus_added_minus_subtracted_predicted_visual_vectors(known_scorer, add, subtract, change):
    """Word2VisualVec's visual space (Dong et al. 2018, Fig. 5): the
    composed query is the image's features + the added texts' predicted
    visual vectors - the subtracted texts', not normalised."""
    expected = KNOWN_IMAGES + np.array(change, np.float32)
    composed = scoring.compose_query(known_scorer, KNOWN_IMAGES, add=add, subtract=subtract)
    assert composed.dtype == np.float32
    np.testing.assert_allclose(composed, expected, atol=1e-6)

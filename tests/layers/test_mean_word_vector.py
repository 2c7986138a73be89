import re

import numpy as np
import tensorflow as tf

from data import word_vectors
from data.readers import load_precomp
from data.vocabulary import Vocabulary
from layers.mean_word_vector import MeanWordVector
from layers.text_vectorizer import TextVectorizer
from tests.helpers import EMBEDDED_DATA, EMBEDDED_GLOVE, run_layer_test


def test_layer_contract():
    layer_kwargs = {"vocabulary_size": 6, "dim": 3}
    ids = tf.constant([[2, 3, 5, 0], [4, 0, 0, 0]], tf.int32)
    output = run_layer_test(MeanWordVector, layer_kwargs, ids, expected_output_shape=(2, 3))
    np.testing.assert_array_equal(output, np.zeros((2, 3)))  # an empty table


def test_mean_over_found_words_on_real_captions_and_glove():
    vectors = word_vectors.load_word_vectors(EMBEDDED_GLOVE)
    train = load_precomp(EMBEDDED_DATA, "train").captions
    # Words from the vector file join the vocabulary, as Word2VisualVec's.
    vocabulary = Vocabulary.build(train, min_count=5, tokenizer="alnum", extra_words=vectors.index_to_key)
    matrix, found = word_vectors.lookup_vectors(vectors, vocabulary.tokens, 50)
    layer = MeanWordVector(len(vocabulary), 50)
    layer.set_vectors(matrix, found)
    captions = load_precomp(EMBEDDED_DATA, "test").captions[:200] + ["zzzq xxqw", "a dog qqqz"]
    ids = TextVectorizer(vocabulary.tokens, tokenizer="alnum")(tf.constant(captions))
    output = layer(ids).numpy()
    skipped = 0
    for caption, row in zip(captions, output):
        words = [w for w in re.sub(r"[^A-Za-z0-9]", " ", caption).lower().split() if w in vectors.key_to_index]
        skipped += len(caption.split()) - len(words)
        expected = np.mean([vectors[w] for w in words], axis=0) if words else np.zeros(50)
        np.testing.assert_allclose(row, expected, rtol=1e-5, atol=1e-6, err_msg=caption)
    assert skipped > 0  # OOV words were met and skipped
    np.testing.assert_array_equal(output[-2], np.zeros(50))  # no word has a vector
    np.testing.assert_allclose(output[-1], (vectors["a"] + vectors["dog"]) / 2, rtol=1e-6)

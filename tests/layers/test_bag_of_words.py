import collections
import re

import numpy as np
import tensorflow as tf

from data.readers import load_precomp
from data.vocabulary import Vocabulary
from layers.bag_of_words import BagOfWords
from layers.text_vectorizer import TextVectorizer
from tests.helpers import EMBEDDED_DATA, run_layer_test


def clean_str(text):
    """Word2VisualVec's tokenisation, in plain Python (the reference)."""
    return re.sub(r"[^A-Za-z0-9]", " ", text).strip().lower().split()


def test_layer_contract():
    ids = tf.constant([[2, 3, 3, 1, 0], [9, 4, 0, 0, 0]], tf.int32)
    output = run_layer_test(BagOfWords, {"num_words": 4}, ids, expected_output_shape=(2, 4),
                            mixed_output_dtype="float32")
    # Ids 2..5 are the words; 0 (padding), 1 (unknown) and 9 (outside the
    # BoW vocabulary) are not counted.
    np.testing.assert_array_equal(output, [[1, 2, 0, 0], [0, 0, 1, 0]])


def test_counts_equal_collections_counter_on_real_captions():
    train = load_precomp(EMBEDDED_DATA, "train").captions
    vocabulary = Vocabulary.build(train, min_count=5, tokenizer="alnum")
    captions = load_precomp(EMBEDDED_DATA, "test").captions[:200]
    ids = TextVectorizer(vocabulary.tokens, tokenizer="alnum")(tf.constant(captions))
    counts = BagOfWords(len(vocabulary) - 2)(ids).numpy()
    position = {word: k for k, word in enumerate(vocabulary.tokens[2:])}
    for caption, row in zip(captions, counts):
        expected = np.zeros(len(position))
        for word, count in collections.Counter(clean_str(caption)).items():
            if word in position:
                expected[position[word]] = count
        np.testing.assert_array_equal(row, expected, err_msg=caption)

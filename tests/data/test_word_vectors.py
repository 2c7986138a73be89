import numpy as np
import pytest
from gensim.models import KeyedVectors

from data import word_vectors
from data.errors import InputError
from data.readers import load_precomp
from data.vocabulary import Vocabulary
from tests.helpers import EMBEDDED_DATA, SHARED_DATA

GLOVE = SHARED_DATA / "glove.6B.50d.flickr8k.txt"


def test_real_glove_covers_the_flickr8k_training_vocabulary():
    vectors = word_vectors.load_word_vectors(GLOVE)
    vocabulary = Vocabulary.build(load_precomp(EMBEDDED_DATA, "train").captions, min_count=4)
    matrix, coverage = word_vectors.embedding_matrix(vectors, vocabulary.tokens, 50, seed=0)
    assert matrix.shape == (len(vocabulary), 50) and matrix.dtype == np.float32
    assert coverage > 0.95
    np.testing.assert_array_equal(matrix[0], 0)
    dog = vocabulary.tokens.index("dog")
    np.testing.assert_allclose(matrix[dog], vectors["dog"])


def small_vectors():
    vectors = KeyedVectors(vector_size=3)
    vectors.add_vectors(["dog", "Cat"], np.array([[1, 2, 3], [4, 5, 6]], np.float32))
    return vectors


def test_binary_and_headerless_glove_formats(tmp_path):
    vectors = small_vectors()
    vectors.save_word2vec_format(str(tmp_path / "v.bin"), binary=True)
    (tmp_path / "glove.txt").write_text("dog 1 2 3\nCat 4 5 6\n")
    for name in ("v.bin", "glove.txt"):
        loaded = word_vectors.load_word_vectors(tmp_path / name)
        np.testing.assert_allclose(loaded["Cat"], [4, 5, 6])


def test_unknown_words_are_random():
    matrix, coverage = word_vectors.embedding_matrix(small_vectors(), ["<pad>", "<unk>", "dog", "cat", "zebra"], 3, seed=1)
    np.testing.assert_allclose(matrix[2], [1, 2, 3])
    assert coverage == pytest.approx(1 / 3)  # "cat" is not "Cat"
    assert np.all(np.abs(matrix[4]) <= 0.1)


def test_bad_files_and_dimension_mismatch(tmp_path):
    with pytest.raises(InputError, match="not found"):
        word_vectors.load_word_vectors(tmp_path / "missing.txt")
    (tmp_path / "bad.txt").write_text("2 3\ndog 1 2\n")
    with pytest.raises(InputError, match="bad.txt: not a word2vec/GloVe file"):
        word_vectors.load_word_vectors(tmp_path / "bad.txt")
    vectors = word_vectors.load_word_vectors(GLOVE)
    with pytest.raises(InputError, match=r"glove.6B.50d.flickr8k.txt have dimension 50 .* model.word_dim=50"):
        word_vectors.embedding_matrix(vectors, ["<pad>", "<unk>", "dog"], 300, seed=0)


def test_word2vec_on_captions_is_deterministic():
    captions = [["a", "dog", "runs"], ["a", "cat", "sleeps"], ["the", "dog", "sleeps"]] * 50
    first = word_vectors.train_word2vec(captions, dim=8, seed=3)
    second = word_vectors.train_word2vec(captions, dim=8, seed=3)
    assert first.vector_size == 8
    np.testing.assert_array_equal(first["dog"], second["dog"])

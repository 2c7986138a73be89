import gzip
import os
import subprocess
import sys

import numpy as np
import pytest
from gensim.models import KeyedVectors

from common.errors import InputError
from data import word_vectors
from data.readers import load_precomp
from data.vocabulary import Vocabulary
from tests.helpers import EMBEDDED_DATA, EMBEDDED_GLOVE, REPO

GLOVE = EMBEDDED_GLOVE
SPECIALS = ["<pad>", "<unk>"]


def small_keyed_vectors():
    """gensim's vectors, to write files with a well-kept writer."""
    vectors = KeyedVectors(vector_size=3)
    vectors.add_vectors(["dog", "Cat"], np.array([[1, 2, 3], [4, 5, 6]], np.float32))
    return vectors


def small_vectors():
    return word_vectors.WordVectors.in_memory(["dog", "Cat"], [[1, 2, 3], [4, 5, 6]], "small")


def test_real_glove_covers_the_flickr8k_training_vocabulary():
    vectors = word_vectors.load_word_vectors(GLOVE)
    assert vectors.vector_size == 50 and len(vectors) == 7965
    vocabulary = Vocabulary.build(load_precomp(EMBEDDED_DATA, "train").captions, min_count=4)
    matrix, coverage = word_vectors.embedding_matrix(vectors, vocabulary.tokens, 50, seed=0)
    assert matrix.shape == (len(vocabulary), 50) and matrix.dtype == np.float32
    assert coverage > 0.99
    np.testing.assert_array_equal(matrix[0], 0)
    dog = vocabulary.tokens.index("dog")
    np.testing.assert_array_equal(matrix[dog], vectors["dog"])


@pytest.mark.parametrize("name, write", [
    ("vectors.bin", lambda v, path: v.save_word2vec_format(str(path), binary=True)),
    ("vectors.w2v", lambda v, path: v.save_word2vec_format(str(path), binary=True)),  # binary, not named .bin
    ("vectors.txt", lambda v, path: v.save_word2vec_format(str(path), binary=False)),
    ("vectors.bin.gz", lambda v, path: v.save_word2vec_format(str(path), binary=True)),
    ("glove.txt", lambda v, path: path.write_text("dog 1 2 3\nCat 4 5 6\n")),
    ("glove.txt.gz", lambda v, path: path.write_bytes(gzip.compress(b"dog 1 2 3\nCat 4 5 6\n"))),
])
def test_word2vec_binary_and_text_and_headerless_glove(tmp_path, name, write):
    write(small_keyed_vectors(), tmp_path / name)
    loaded = word_vectors.load_word_vectors(tmp_path / name)
    assert loaded.index_to_key == ["dog", "Cat"] and loaded.source == str(tmp_path / name)
    np.testing.assert_array_equal(loaded["Cat"], [4, 5, 6])


def many_keyed_vectors(rows=500, dim=7):
    """gensim's vectors of `rows` words, some of them non-ASCII."""
    rng = np.random.default_rng(5)
    vectors = KeyedVectors(vector_size=dim)
    words = [f"w{i}" if i % 7 else f"caf\u00e9{i}" for i in range(rows)]
    vectors.add_vectors(words, rng.normal(size=(rows, dim)).astype(np.float32))
    return vectors


@pytest.mark.parametrize("name, binary", [
    ("vectors.bin", True), ("vectors.bin.gz", True), ("vectors.txt", False), ("vectors.txt.gz", False),
])
def test_vectors_are_read_from_the_file_as_gensim_reads_them(tmp_path, monkeypatch, name, binary):
    """Rows asked for in any order, repeated, in two calls, equal gensim's
    own reading of the file it wrote; the scan reads 100 bytes at a time,
    so records straddle its reads."""
    monkeypatch.setattr(word_vectors, "SCAN_CHUNK", 100)
    path = tmp_path / name
    many_keyed_vectors().save_word2vec_format(str(path), binary=binary)
    expected = KeyedVectors.load_word2vec_format(str(path), binary=binary)
    loaded = word_vectors.load_word_vectors(path)
    assert loaded.index_to_key == expected.index_to_key and loaded.vector_size == 7
    rows = np.random.default_rng(0).integers(0, 500, size=300)
    np.testing.assert_array_equal(loaded.take(rows), expected.vectors[rows])
    np.testing.assert_array_equal(loaded.take([499, 0, 3]), expected.vectors[[499, 0, 3]])
    np.testing.assert_array_equal(loaded["caf\u00e97"], expected["caf\u00e97"])


@pytest.mark.parametrize("name, binary, no_header", [
    ("vectors.txt", False, False), ("glove.txt", False, True), ("vectors.bin", True, False),
])
def test_a_word_holding_a_unicode_space_is_read_as_gensim_reads_it(tmp_path, name, binary, no_header):
    """Words split on ASCII whitespace only: U+00A0 (no-break space) and
    U+3000 (ideographic space) are part of a word, first line included."""
    vectors = KeyedVectors(vector_size=3)
    vectors.add_vectors(["new\u00a0york", "dog", "\u6771\u4eac\u3000tower"],
                        np.array([[1.5, -2, 3], [4, 5, 6.25], [7, -8, 9]], np.float32))
    path = tmp_path / name
    vectors.save_word2vec_format(str(path), binary=binary)
    if no_header:
        path.write_bytes(path.read_bytes().split(b"\n", 1)[1])
    expected = KeyedVectors.load_word2vec_format(str(path), binary=binary, no_header=no_header)
    loaded = word_vectors.load_word_vectors(path)
    assert loaded.index_to_key == expected.index_to_key == ["new\u00a0york", "dog", "\u6771\u4eac\u3000tower"]
    np.testing.assert_array_equal(loaded.take([0, 1, 2]), expected.vectors)


def test_binary_records_may_end_with_a_newline(tmp_path):
    """The word2vec C tool writes a newline after each vector."""
    vectors = np.array([[1.5, -2], [3, 4.25]], "<f4")
    path = tmp_path / "c_tool.bin"
    path.write_bytes(b"2 2\n" + b"".join(w + b" " + v.tobytes() + b"\n" for w, v in zip((b"dog", b"cat"), vectors)))
    loaded = word_vectors.load_word_vectors(path)
    assert loaded.index_to_key == ["dog", "cat"]
    np.testing.assert_array_equal(loaded.take([1, 0]), vectors[[1, 0]])


@pytest.mark.parametrize("records, message", [
    ((b"dog " + np.array([1, 2], "<f4").tobytes(), b"cat " + np.array([np.nan, 2], "<f4").tobytes()),
     "the vector of 'cat' holds NaN or inf"),
    ((b"dog " + np.array([1, 2], "<f4").tobytes(), b"cat " + np.array([1], "<f4").tobytes()),
     r"not a word2vec or GloVe vector file \(the file ends within vector 2 of the 2"),
    ((b"dog " + np.array([1, 2], "<f4").tobytes(), b"\xff\xfe " + np.array([1, 2], "<f4").tobytes()),
     "not a word2vec or GloVe vector file"),
])
def test_malformed_binary_files_are_errors_when_opened(tmp_path, records, message):
    path = tmp_path / "vectors.bin"
    path.write_bytes(b"2 2\n" + b"".join(records))
    with pytest.raises(InputError, match=message) as error:
        word_vectors.load_word_vectors(path)
    assert str(error.value).startswith(str(path)) and "\n" not in str(error.value)


def test_embedding_matrix_rows():
    tokens = [*SPECIALS, "dog", "Dog", "cat", "zebra"]
    matrix, coverage = word_vectors.embedding_matrix(small_vectors(), tokens, 3, seed=1)
    np.testing.assert_array_equal(matrix[0], 0)  # <pad>
    np.testing.assert_array_equal(matrix[2], [1, 2, 3])
    np.testing.assert_array_equal(matrix[3], [1, 2, 3])  # "Dog" found lowercased
    assert coverage == pytest.approx(2 / 4)  # "cat" is not "Cat"; specials not counted
    random_rows = matrix[[1, 4, 5]]
    assert np.all(np.abs(random_rows) <= 0.1) and len(np.unique(random_rows)) == 9
    again, _ = word_vectors.embedding_matrix(small_vectors(), tokens, 3, seed=1)
    np.testing.assert_array_equal(again, matrix)
    other, _ = word_vectors.embedding_matrix(small_vectors(), tokens, 3, seed=2)
    assert not np.array_equal(other[4], matrix[4])


def test_dimension_mismatch_says_what_to_pass():
    vectors = word_vectors.load_word_vectors(GLOVE)
    with pytest.raises(InputError) as error:
        word_vectors.embedding_matrix(vectors, [*SPECIALS, "dog"], 300, seed=0)
    assert str(error.value) == (
        f"word vectors in {GLOVE} have dimension 50 but the model's word_dim is 300 (pass --set model.word_dim=50)"
    )


@pytest.mark.parametrize("content, message", [
    (None, "file not found"),
    (b"", "empty word vector file"),
    (b"2 3\ndog 1 2 3\ncat 1 2\n", "not a word2vec or GloVe vector file"),
    (b"3 3\ndog 1 2 3\ncat 1 2 3\n", "not a word2vec or GloVe vector file"),  # fewer words than the header says
    (b"dog 1 2 3\ncat 1 two 3\n", "not a word2vec or GloVe vector file"),
    (b"dog 1 2 3\ncat 1 2\n", "not a word2vec or GloVe vector file"),
    (b"dog 1 2 3\n\xff\xfe 1 2 3\n", "not a word2vec or GloVe vector file"),
    (b"dog 1 2 3\ncat 1 nan 3\n", "the vector of 'cat' holds NaN or inf"),
    # A header announcing more vectors than the file holds: gensim would
    # allocate them all before reading one.
    (b"1000000000 300\ndog " + b"0.5 " * 300 + b"\n", "header announces 1,000,000,000 vectors of 300 values"),
    (b"20 2\ndog 0.5 1\n", "header announces 20 vectors of 2 values"),
    ("fifo", "not a regular file"),
])
def test_malformed_files_are_one_line_errors_naming_the_file(tmp_path, content, message):
    path = tmp_path / "vectors.txt"
    if content == "fifo":
        os.mkfifo(path)
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError, match=message) as error:
        word_vectors.load_word_vectors(path)
    assert str(error.value).startswith(str(path)) and "\n" not in str(error.value)


def test_word2vec_on_captions_is_the_same_in_every_process(tmp_path):
    captions = [["a", "dog", "runs"], ["a", "cat", "sleeps"], ["the", "dog", "sleeps"]] * 50
    vectors = word_vectors.train_word2vec(captions, dim=8, seed=3)
    assert vectors.vector_size == 8 and set(vectors.index_to_key) == {"a", "dog", "runs", "cat", "sleeps", "the"}
    # Another process (with another str hash seed) trains the same vectors.
    script = (
        "import sys, numpy as np; from data.word_vectors import train_word2vec; "
        f"v = train_word2vec({captions!r}, dim=8, seed=3); np.save(sys.argv[1], v['dog'])"
    )
    out = tmp_path / "dog.npy"
    subprocess.run([sys.executable, "-c", script, str(out)], cwd=REPO, check=True,
                   env={"PYTHONHASHSEED": "1", "PYTHONPATH": str(REPO)})
    np.testing.assert_array_equal(np.load(out), vectors["dog"])


# --- for_model: the vectors a model config's `word_vectors` names ----------

CAPTIONS = ["A dog runs.", "Two cats sleep", "a dog sleeps"]


def test_for_model_without_word_vectors_is_none():
    assert word_vectors.for_model(None, CAPTIONS, "treebank", dim=8, seed=0) is None


def test_for_model_loads_a_vector_file(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_text("dog 1 2 3\ncat 4 5 6\n")
    vectors = word_vectors.for_model(str(path), CAPTIONS, "treebank", dim=3, seed=0)
    assert vectors.index_to_key == ["dog", "cat"] and vectors.source == str(path)
    np.testing.assert_array_equal(vectors["cat"], [4, 5, 6])
    with pytest.raises(InputError, match=f"^{tmp_path / 'missing.txt'}: file not found"):
        word_vectors.for_model(str(tmp_path / "missing.txt"), CAPTIONS, "treebank", dim=3, seed=0)


@pytest.mark.parametrize("tokenizer, tokens", [
    # Treebank keeps the full stop as a token; alnum drops punctuation. Both lowercase.
    ("treebank", [["a", "dog", "runs", "."], ["two", "cats", "sleep"], ["a", "dog", "sleeps"]]),
    ("alnum", [["a", "dog", "runs"], ["two", "cats", "sleep"], ["a", "dog", "sleeps"]]),
])
def test_for_model_word2vec_trains_on_the_training_captions_tokenised_by_the_models_tokenizer(tokenizer, tokens):
    vectors = word_vectors.for_model("word2vec", CAPTIONS, tokenizer, dim=6, seed=4)
    assert vectors.vector_size == 6
    assert set(vectors.index_to_key) == {token for caption in tokens for token in caption}
    expected = word_vectors.train_word2vec(tokens, dim=6, seed=4)
    for word in ("dog", "sleep"):
        np.testing.assert_array_equal(vectors[word], expected[word])

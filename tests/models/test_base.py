"""Tests of `models.base`, the model interface: what a model inherits
(the batch call, aligned-pair similarities one pair at a time, one
training phase, a layer-loss factor of 1, one ranking stage), the word
embedding initialised from word vectors, a fitted model refusing gradient
training, and the interface's abstract methods."""

import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from common.errors import InputError
from data.word_vectors import WordVectors
from models.base import Fit, FittedModel, RetrievalModel, Stage


class Dot(RetrievalModel):
    """Images scaled by 2, texts their token ids as floats, the dot product;
    a word embedding when `vocabulary` is given."""

    def __init__(self, vocabulary=None, word_dim=3):
        super().__init__()
        if vocabulary is not None:
            self.vectorizer = types.SimpleNamespace(vocabulary=vocabulary)
            self.word_embedding = keras.layers.Embedding(len(vocabulary), word_dim)
            self.word_embedding.build((None,))

    def encode_text(self, token_ids, training=False):
        return tf.cast(token_ids, tf.float32)

    def encode_image(self, image_features, training=False):
        return 2 * image_features

    def similarity(self, image_encodings, text_encodings):
        return tf.matmul(image_encodings, text_encodings, transpose_b=True)

    def pair_loss(self, image_encodings, text_encodings, image_index):
        return tf.reduce_sum(self.similarity(image_encodings, text_encodings))


def test_the_batch_call_is_the_similarity_of_both_encodings():
    images = np.array([[1.0, 0.0], [0.5, -1.0]], np.float32)
    tokens = np.array([[3, 1], [0, 2], [4, 4]], np.int32)
    scores = Dot()({"image_features": images, "token_ids": tokens})
    np.testing.assert_allclose(scores, (2 * images) @ tokens.T.astype(np.float32))


def test_the_default_pair_similarity_scores_each_aligned_pair_alone():
    rng = np.random.default_rng(0)
    images, texts = rng.normal(size=(5, 4)).astype(np.float32), rng.normal(size=(5, 4)).astype(np.float32)
    pairs = Dot().pair_similarity(images, texts)
    assert pairs.dtype == tf.float32 and pairs.shape == (5,)
    np.testing.assert_allclose(pairs, np.einsum("pd,pd->p", images, texts), rtol=1e-5, atol=1e-6)


def test_what_a_model_inherits():
    model = Dot()
    assert model.rerank_k is None and model.joint_space is True and model.num_phases == 1
    assert model.layer_loss_scale(128) == 1.0
    assert model.forward_flops(np.zeros((2, 3), np.int32), np.zeros((2, 4), np.float32)) is None
    assert model.run_encoding_columns("runs/member") is None
    assert model.start_phase(0) is None and model.adapt(np.zeros((3, 4))) is None
    for method, args in (("stages", ()), ("stage_encodings", (np.zeros((1, 2)), np.zeros((1, 2))))):
        with pytest.raises(NotImplementedError, match=r"^Dot ranks in one stage \(rerank_k is None\)$"):
            getattr(model, method)(*args)


def test_word_vectors_without_a_word_embedding_are_refused_in_one_line():
    with pytest.raises(InputError, match=r"^model.word_vectors: Dot has no word embedding to initialise; "
                                         r"set model.word_vectors=null$"):
        Dot().set_word_vectors(WordVectors.in_memory(["dog"], np.ones((1, 3)), "test"), seed=0)


def test_word_vectors_initialise_the_rows_of_the_words_they_have():
    vocabulary = ["<pad>", "<unk>", "dog", "Cat", "zebra"]
    vectors = WordVectors.in_memory(["cat", "dog", "runs"], np.arange(9, dtype=np.float32).reshape(3, 3), "test")
    model = Dot(vocabulary)
    line = model.set_word_vectors(vectors, seed=1)
    table = model.word_embedding.embeddings.numpy()
    np.testing.assert_array_equal(table[0], 0.0)  # <pad>
    np.testing.assert_array_equal(table[2], [3, 4, 5])  # dog
    np.testing.assert_array_equal(table[3], [0, 1, 2])  # Cat, found lowercased
    assert np.all(np.abs(table[[1, 4]]) <= 0.1) and np.any(table[[1, 4]] != 0)  # <unk>, zebra: small random rows
    assert line == "word vectors cover 66.7% of the vocabulary"  # 2 of the 3 words


class Closed(FittedModel):
    def encode_text(self, token_ids, training=False):
        return tf.cast(token_ids, tf.float32)

    def encode_image(self, image_features, training=False):
        return image_features

    def similarity(self, image_encodings, text_encodings):
        return tf.matmul(image_encodings, text_encodings, transpose_b=True)

    def fit_split(self, train_split, dev_split, writer, seed):
        return Fit(chosen={"eta": 0.1})


def test_a_fitted_model_is_not_trained_by_gradients():
    with pytest.raises(TypeError, match=r"^Closed is fitted \(fit_split\), not trained by gradients$"):
        Closed().pair_loss(tf.zeros((2, 2)), tf.zeros((2, 2)), tf.range(2))
    assert Closed().fit_split(None, None, None, 0) == Fit(chosen={"eta": 0.1}, dev_scores=None)


def test_a_model_must_implement_the_interface():
    class NoSimilarity(RetrievalModel):
        def encode_text(self, token_ids, training=False):
            return token_ids

        def encode_image(self, image_features, training=False):
            return image_features

        def pair_loss(self, image_encodings, text_encodings, image_index):
            return 0.0

    class NoFit(FittedModel):
        encode_text, encode_image, similarity = Closed.encode_text, Closed.encode_image, Closed.similarity

    for incomplete, missing in ((NoSimilarity, "similarity"), (NoFit, "fit_split")):
        with pytest.raises(TypeError, match=missing):
            incomplete()


def test_fits_and_stages_are_frozen_records():
    fit = Fit(chosen={"k": 3})
    with pytest.raises(AttributeError):
        fit.chosen = {}
    stage = Stage(model=Dot(), columns=(0, 4))
    with pytest.raises(AttributeError):
        stage.columns = (1, 2)

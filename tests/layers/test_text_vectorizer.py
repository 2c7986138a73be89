import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.text_vectorizer import TextVectorizer

VOCABULARY = ["<pad>", "<unk>", "a", "dog", "runs", "."]


def test_ids_padding_unknown_words_and_truncation():
    layer = TextVectorizer(VOCABULARY)
    ids = layer(tf.constant(["A dog runs.", "a zebra"]))
    np.testing.assert_array_equal(ids, [[2, 3, 4, 5], [2, 1, 0, 0]])
    assert ids.dtype == tf.int32
    np.testing.assert_array_equal(TextVectorizer(VOCABULARY, max_length=2)(tf.constant(["A dog runs."])), [[2, 3]])


def test_empty_and_over_long_captions_are_rejected():
    layer = TextVectorizer(VOCABULARY, max_input_tokens=3)
    with pytest.raises(tf.errors.InvalidArgumentError, match="empty caption"):
        layer(tf.constant(["a dog", "   "]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="more than 3 tokens"):
        layer(tf.constant(["a dog runs ."]))


def test_config_and_serialization_round_trips():
    layer = TextVectorizer(VOCABULARY, max_length=3, max_input_tokens=9, name="vec")
    texts = tf.constant(["A dog runs.", "dog"])
    for clone in (TextVectorizer.from_config(layer.get_config()),
                  keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))):
        assert clone.get_config() == layer.get_config()
        np.testing.assert_array_equal(clone(texts), layer(texts))
    assert layer.compute_output_shape((None,)) == (None, 3)


def test_works_in_tf_function_and_tf_data():
    layer = TextVectorizer(VOCABULARY)
    texts = tf.constant(["A dog runs.", "a dog"])
    np.testing.assert_array_equal(tf.function(layer)(texts), layer(texts))
    batches = list(tf.data.Dataset.from_tensor_slices(texts).batch(2).map(layer))
    np.testing.assert_array_equal(batches[0], layer(texts))


def test_saved_model_round_trip_keeps_ids_and_errors(tmp_path):
    module = tf.Module()
    module.layer = TextVectorizer(VOCABULARY)
    module.vectorize = tf.function(module.layer.call, input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "sm"))
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    texts = tf.constant(["A dog runs.", "a zebra"])
    np.testing.assert_array_equal(loaded.vectorize(texts), module.layer(texts))
    with pytest.raises(tf.errors.InvalidArgumentError, match="empty caption"):
        loaded.vectorize(tf.constant([""]))

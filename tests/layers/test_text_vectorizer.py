import keras
import numpy as np
import pytest
import tensorflow as tf

from layers.text_vectorizer import TextVectorizer

VOCABULARY = ["<pad>", "<unk>", "a", "dog", "runs", "."]
TEXTS = tf.constant(["A dog runs.", "a zebra"])


def test_ids_of_known_words_padding_and_unknown_words():
    ids = TextVectorizer(VOCABULARY)(TEXTS)
    assert ids.dtype == tf.int32
    np.testing.assert_array_equal(ids, [[2, 3, 4, 5], [2, 1, 0, 0]])


def test_special_tokens_in_text_are_not_ids_0_and_1():
    # "<pad>" is tokenised as "<", "pad", ">", so id 0 only ever pads.
    np.testing.assert_array_equal(TextVectorizer(VOCABULARY)(tf.constant(["<pad> a"])), [[1, 1, 1, 2]])


def test_max_length_keeps_the_first_words_and_l_is_the_batch_longest():
    layer = TextVectorizer(VOCABULARY, max_length=2)
    np.testing.assert_array_equal(layer(TEXTS), [[2, 3], [2, 1]])
    np.testing.assert_array_equal(layer(tf.constant(["dog", "a"])), [[3], [2]])
    with pytest.raises(ValueError, match="max_length"):
        TextVectorizer(VOCABULARY, max_length=0)


def test_vocabulary_must_start_with_specials():
    with pytest.raises(ValueError, match="<pad>"):
        TextVectorizer(["a", "<pad>", "<unk>"])


def test_empty_and_over_long_captions_are_rejected():
    # The limit applies before the cut to max_length.
    layer = TextVectorizer(VOCABULARY, max_length=2, max_input_tokens=3)
    with pytest.raises(tf.errors.InvalidArgumentError, match="empty caption"):
        layer(tf.constant(["a dog", "   "]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="caption has more than 3 tokens"):
        layer(tf.constant(["a dog runs ."]))
    np.testing.assert_array_equal(layer(tf.constant(["a dog runs"])), [[2, 3]])


def test_config_and_serialization_round_trips():
    layer = TextVectorizer(VOCABULARY, max_length=3, max_input_tokens=9, name="vec")
    clones = (
        TextVectorizer.from_config(layer.get_config()),
        keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer)),
    )
    for clone in clones:
        assert type(clone) is TextVectorizer
        assert clone.get_config() == layer.get_config()
        np.testing.assert_array_equal(clone(TEXTS), layer(TEXTS))


def test_symbolic_call_and_functional_model():
    layer = TextVectorizer(VOCABULARY, max_length=3)
    assert layer.compute_output_shape((None,)) == (None, None)
    texts = keras.Input(shape=(), dtype="string")
    ids = layer(texts)
    assert tuple(ids.shape) == (None, None) and ids.dtype == "int32"
    np.testing.assert_array_equal(keras.Model(texts, ids)(TEXTS), layer(TEXTS))


def test_works_in_tf_function_and_tf_data():
    layer = TextVectorizer(VOCABULARY)
    np.testing.assert_array_equal(tf.function(layer)(TEXTS), layer(TEXTS))
    batches = list(tf.data.Dataset.from_tensor_slices(TEXTS).batch(2).map(layer))
    np.testing.assert_array_equal(batches[0], layer(TEXTS))


def test_saved_model_round_trip_keeps_ids_and_errors(tmp_path):
    module = tf.Module()
    module.layer = TextVectorizer(VOCABULARY, max_length=3)
    module.vectorize = tf.function(module.layer, input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "sm"))
    del module
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    np.testing.assert_array_equal(loaded.vectorize(TEXTS), [[2, 3, 4], [2, 1, 0]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="empty caption"):
        loaded.vectorize(tf.constant(["a dog", ""]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="more than 512 tokens"):
        loaded.vectorize(tf.constant(["dog " * 513]))

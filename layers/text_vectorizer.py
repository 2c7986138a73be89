"""Raw caption strings -> padded token ids, entirely in TensorFlow ops."""

import keras
import tensorflow as tf

from data.tokenizer import tokenize


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class TextVectorizer(keras.layers.Layer):
    """Tokenises captions in-graph and maps tokens to vocabulary ids.

    Tokenisation is `data.tokenizer.tokenize` (NLTK Treebank rules after
    lowercasing, as TF string ops), so a SavedModel holding this layer takes
    raw strings and tokenises exactly as training did.

    Args:
      vocabulary: token list; index 0 must be `<pad>` and 1 `<unk>`.
      max_length: keep only the first `max_length` tokens of a caption
        (a paper's protocol, e.g. 16 in Francis et al.); None keeps all.
      max_input_tokens: captions with more tokens than this are rejected, so
        that a stray document cannot run an unbounded recurrence.

    Call args:
      texts: tf.string [B].

    Returns:
      int32 [B, L] token ids, 0-padded, L = the longest (cut) caption of the
      batch; unknown words are 1. `ids != 0` is the padding mask.

    Raises:
      tf.errors.InvalidArgumentError ("empty caption" / "caption has more
      than N tokens") when called on such a caption, in eager mode, in a
      tf.function and in a reloaded SavedModel alike.
    """

    def __init__(self, vocabulary, max_length=None, max_input_tokens=512, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self.vocabulary = list(vocabulary)
        self.max_length = max_length
        self.max_input_tokens = max_input_tokens
        if self.vocabulary[:2] != ["<pad>", "<unk>"]:
            raise ValueError("vocabulary must start with '<pad>', '<unk>'")
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(self.vocabulary[2:], tf.string),
                tf.range(2, len(self.vocabulary), dtype=tf.int64),
            ),
            default_value=1,
        )

    def call(self, texts):
        tokens = tokenize(texts)
        lengths = tokens.row_lengths()
        checks = [
            tf.debugging.assert_positive(lengths, message="empty caption: a caption has no tokens"),
            tf.debugging.assert_less_equal(
                lengths,
                tf.constant(self.max_input_tokens, tf.int64),
                message=f"caption has more than {self.max_input_tokens} tokens",
            ),
        ]
        with tf.control_dependencies(checks):
            ids = tf.ragged.map_flat_values(self.table.lookup, tokens)
        if self.max_length is not None:
            ids = ids[:, : self.max_length]
        return tf.cast(ids.to_tensor(default_value=0), tf.int32)

    def compute_output_shape(self, texts_shape):
        return (texts_shape[0], self.max_length)

    def get_config(self):
        return {
            **super().get_config(),
            "vocabulary": self.vocabulary,
            "max_length": self.max_length,
            "max_input_tokens": self.max_input_tokens,
        }

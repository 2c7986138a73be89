"""Raw caption strings -> padded token ids, entirely in TensorFlow ops."""

import keras
import tensorflow as tf

from data.tokenizer import TOKENIZERS

# The default bound on a caption's tokens (before any cut to `max_length`).
MAX_INPUT_TOKENS = 512


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class TextVectorizer(keras.layers.Layer):
    """Tokenises captions in-graph and maps tokens to vocabulary ids.

    Tokenisation is one of `data.tokenizer.TOKENIZERS`, in TF string ops:
    "treebank" (lowercasing, then NLTK's Treebank word tokenizer rules) or
    "alnum" (Word2VisualVec's letters-and-digits words). The vocabulary is a
    lookup table tracked by the layer, so a SavedModel holding it takes raw
    strings and tokenises exactly as training did.

    Args:
      vocabulary: the full token list, index = id; index 0 must be `<pad>`
        and 1 `<unk>` (see `data.vocabulary.Vocabulary`).
      max_length: keep only the first `max_length` tokens of a caption
        (a paper's protocol, e.g. 16 words in Francis et al.); None keeps
        all.
      max_input_tokens: captions with more tokens than this (before the cut
        to `max_length`) are rejected, so that a stray document sent to a
        served model cannot run an unbounded recurrence.
      tokenizer: "treebank" or "alnum" (`data.tokenizer.TOKENIZERS`).

    Call args:
      texts: tf.string [B], raw captions.

    Returns:
      int32 [B, L] token ids padded with 0, L = the longest caption of the
      batch after the cut to `max_length`; unknown words are 1. The
      tokenizer splits "<pad>" into "<", "pad", ">", so id 0 is only ever
      padding and `ids != 0` is the mask for downstream layers.

    Raises:
      tf.errors.InvalidArgumentError: "empty caption" when a caption has no
        tokens, "caption has more than N tokens" when one is over
        `max_input_tokens`; raised by graph assertions, so eagerly, in a
        tf.function and in a reloaded SavedModel alike.
    """

    def __init__(self, vocabulary, max_length=None, max_input_tokens=MAX_INPUT_TOKENS, tokenizer="treebank", **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self.vocabulary = list(vocabulary)
        self.max_length = max_length
        self.max_input_tokens = max_input_tokens
        self.tokenizer = tokenizer
        if tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {sorted(TOKENIZERS)}, got {tokenizer!r}")
        if self.vocabulary[:2] != ["<pad>", "<unk>"]:
            raise ValueError("vocabulary must start with '<pad>', '<unk>'")
        if max_length is not None and max_length < 1:
            raise ValueError(f"max_length must be positive or None, got {max_length}")
        # A static hash table is a tracked resource: tf.saved_model.save
        # writes its keys and values into the SavedModel.
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(self.vocabulary[2:], tf.string),
                tf.range(2, len(self.vocabulary), dtype=tf.int64),
            ),
            default_value=1,
        )

    def call(self, texts):
        tokens = TOKENIZERS[self.tokenizer](texts)
        lengths = tokens.row_lengths()
        checks = [
            tf.debugging.assert_positive(lengths, message="empty caption: a caption has no tokens"),
            tf.debugging.assert_less_equal(
                lengths,
                tf.constant(self.max_input_tokens, tf.int64),
                message=f"caption has more than {self.max_input_tokens} tokens",
            ),
        ]
        if self.max_length is not None:
            tokens = tokens[:, : self.max_length]
        with tf.control_dependencies(checks):
            ids = tf.ragged.map_flat_values(self.table.lookup, tokens)
        return tf.cast(ids.to_tensor(default_value=0), tf.int32)

    def compute_output_shape(self, texts_shape):
        # L depends on the batch, even with max_length set.
        return (texts_shape[0], None)

    def compute_output_spec(self, texts):
        return keras.KerasTensor(self.compute_output_shape(texts.shape), dtype="int32")

    def get_config(self):
        return {
            **super().get_config(),
            "vocabulary": self.vocabulary,
            "max_length": self.max_length,
            "max_input_tokens": self.max_input_tokens,
            "tokenizer": self.tokenizer,
        }

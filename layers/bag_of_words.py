"""Bag-of-words counts of token ids (Dong et al. 2018, eq. 1)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class BagOfWords(keras.layers.Layer):
    """Word counts over a fixed vocabulary, Word2VisualVec's BoW scale.

    Dong et al. 2018, eq. 1: s_bow(q) = (c(w_1, q), ..., c(w_m, q)), the raw
    number of occurrences of each of the m vocabulary words in sentence q
    (no normalisation, as in the paper and its public code).

    The vocabulary words are token ids 2 .. num_words + 1 (a
    `data.vocabulary.Vocabulary` keeps its training words first); ids 0
    (padding), 1 (unknown) and ids above (words outside the BoW vocabulary)
    are not counted.

    Args:
      num_words: m, the vocabulary size.

    Call args:
      token_ids: int [B, L].

    Returns:
      float32 [B, num_words]; column k counts token id k + 2.
    """

    def __init__(self, num_words, **kwargs):
        super().__init__(**kwargs)
        if num_words < 1:
            raise ValueError(f"num_words must be positive, got {num_words}")
        self.num_words = num_words

    def call(self, token_ids):
        token_ids = ops.cast(token_ids, "int32")
        in_vocabulary = (token_ids >= 2) & (token_ids < self.num_words + 2)
        # Column 0 collects everything not counted and is dropped.
        positions = ops.where(in_vocabulary, token_ids - 1, 0)
        counts = ops.bincount(positions, minlength=self.num_words + 1)
        # bincount's output width is dynamic; it is num_words + 1 here.
        return ops.cast(ops.reshape(counts, (-1, self.num_words + 1))[:, 1:], "float32")

    def compute_output_shape(self, token_ids_shape):
        return (token_ids_shape[0], self.num_words)

    def get_config(self):
        return {**super().get_config(), "num_words": self.num_words}

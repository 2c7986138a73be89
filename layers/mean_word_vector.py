"""The mean of a sentence's pretrained word vectors (Dong et al. 2018, eq. 2)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class MeanWordVector(keras.layers.Layer):
    """Word2VisualVec's word2vec scale: the mean of a frozen table of word
    vectors over the words of a sentence that have a vector.

    Dong et al. 2018, eq. 2 writes s_word2vec(q) = (1/|q|) sum_{w in q} v(w);
    their public code averages over the words found in the word2vec
    vocabulary only, skipping the others, which is what this layer does.
    A sentence with no such word gets the zero vector (the public code drops
    such captions from training and ranks them last at test time).

    The table is set once from a vector file (`set_vectors`) and never
    trained; it is saved with the model, so words outside the training
    vocabulary that have a vector (the paper's "novel words") still count.

    Args:
      vocabulary_size: rows of the table, one per token id.
      dim: the word vector size.

    Call args:
      token_ids: int [B, L], 0 = padding.

    Returns:
      float32 [B, dim].
    """

    def __init__(self, vocabulary_size, dim, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.dim = dim
        self.vectors = self.add_weight(
            shape=(vocabulary_size, dim), initializer="zeros", trainable=False, name="vectors"
        )
        # 1 where a token has a vector; 0 for padding, unknown words and
        # words the vector file lacks.
        self.has_vector = self.add_weight(
            shape=(vocabulary_size,), initializer="zeros", trainable=False, name="has_vector"
        )

    def set_vectors(self, vectors, found):
        """Fills the table: float [vocabulary_size, dim] vectors and bool
        [vocabulary_size] `found` (which rows hold a real vector)."""
        self.vectors.assign(ops.convert_to_tensor(vectors, "float32"))
        self.has_vector.assign(ops.cast(ops.convert_to_tensor(found), "float32"))

    def call(self, token_ids):
        token_ids = ops.cast(token_ids, "int32")
        weights = ops.take(self.has_vector, token_ids, axis=0)[..., None]
        total = ops.sum(ops.take(self.vectors, token_ids, axis=0) * weights, axis=1)
        return total / ops.maximum(ops.sum(weights, axis=1), 1.0)

    def compute_output_shape(self, token_ids_shape):
        return (token_ids_shape[0], self.dim)

    def get_config(self):
        return {**super().get_config(), "vocabulary_size": self.vocabulary_size, "dim": self.dim}

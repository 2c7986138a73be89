"""All-pairs dot product of two sets of vectors."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class DotProductSimilarity(keras.layers.Layer):
    """Dot product of every image vector with every text vector: one of
    the similarities Dong et al. 2018 (Sec. III-C) compared with the cosine
    for retrieval in the visual feature space.

    Call args:
      image_embeddings: float [n_images, D].
      text_embeddings: float [n_texts, D].

    Returns:
      float [n_images, n_texts].
    """

    def call(self, image_embeddings, text_embeddings):
        return ops.matmul(image_embeddings, ops.transpose(text_embeddings))

    def pairs(self, image_embeddings, text_embeddings):
        """The dot product of aligned pairs: [P, D] x [P, D] -> [P]."""
        return ops.sum(ops.cast(image_embeddings, self.compute_dtype) * ops.cast(text_embeddings, self.compute_dtype),
                       axis=-1)

    def compute_output_shape(self, image_embeddings_shape, text_embeddings_shape):
        return (image_embeddings_shape[0], text_embeddings_shape[0])

"""All-pairs negative mean squared error of two sets of vectors."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class NegativeMSESimilarity(keras.layers.Layer):
    """Minus the mean squared error between every image vector and every
    text vector, -(1/D) ||x - y||^2: Word2VisualVec's training loss (Dong et
    al. 2018, eq. 8) used as a retrieval similarity, one of the options
    its Sec. III-C compared with the cosine.

    Computed as -(||x||^2 + ||y||^2 - 2 x.y) / D without a [n, m, D]
    intermediate, so a 5K x 25K evaluation block stays small.

    Call args:
      image_embeddings: float [n_images, D].
      text_embeddings: float [n_texts, D].

    Returns:
      float [n_images, n_texts], <= 0.
    """

    def call(self, image_embeddings, text_embeddings):
        image_norms = ops.sum(ops.square(image_embeddings), axis=-1)[:, None]
        text_norms = ops.sum(ops.square(text_embeddings), axis=-1)[None, :]
        cross = ops.matmul(image_embeddings, ops.transpose(text_embeddings))
        dim = ops.cast(ops.shape(image_embeddings)[-1], image_embeddings.dtype)
        # Rounding can leave a tiny positive value for equal vectors.
        return ops.minimum(-(image_norms + text_norms - 2.0 * cross) / dim, 0.0)

    def pairs(self, image_embeddings, text_embeddings):
        """Minus the mean squared error of aligned pairs: [P, D] x [P, D] -> [P]."""
        difference = ops.cast(image_embeddings, self.compute_dtype) - ops.cast(text_embeddings, self.compute_dtype)
        return -ops.mean(ops.square(difference), axis=-1)

    def compute_output_shape(self, image_embeddings_shape, text_embeddings_shape):
        return (image_embeddings_shape[0], text_embeddings_shape[0])

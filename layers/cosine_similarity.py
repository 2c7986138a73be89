"""All-pairs cosine similarity of two sets of embeddings."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class CosineSimilarity(keras.layers.Layer):
    """Cosine similarity of every image embedding with every text embedding.

    The VSE pipelines (Kiros et al.; VSE++; Vilalta et al. 2018, Sec. 3.2;
    Francis et al. 2018, eqs. 11-12) compare L2-normalised embeddings by their
    dot product, which is their cosine. This layer normalises both inputs
    itself, so it is correct whether or not they are already unit vectors.

    Call args:
      image_embeddings: float [n_images, D].
      text_embeddings: float [n_texts, D].

    Returns:
      float [n_images, n_texts], in [-1, 1].
    """

    def call(self, image_embeddings, text_embeddings):
        images = _unit(image_embeddings)
        texts = _unit(text_embeddings)
        return ops.matmul(images, ops.transpose(texts))

    def pairs(self, image_embeddings, text_embeddings):
        """The cosine of aligned pairs: [P, D] x [P, D] -> [P] (pair p: row p
        of each)."""
        images, texts = (_unit(ops.cast(x, self.compute_dtype)) for x in (image_embeddings, text_embeddings))
        return ops.sum(images * texts, axis=-1)

    def compute_output_shape(self, image_embeddings_shape, text_embeddings_shape):
        return (image_embeddings_shape[0], text_embeddings_shape[0])


def _unit(x):
    # The epsilon keeps an all-zero embedding (e.g. an untrained ReLU output)
    # at similarity 0 instead of NaN.
    return x / ops.sqrt(ops.sum(ops.square(x), axis=-1, keepdims=True) + 1e-12)

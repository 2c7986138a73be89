"""All-pairs order-violation similarity, computed in bounded memory."""

import math

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class OrderViolationSimilarity(keras.layers.Layer):
    """Order-violation similarity of every image with every caption
    (Vendrov et al. 2016; Vilalta et al. 2018, eq. 3):

        S_OE(c, i) = -|| max(0, c - i) ||^2

    0 when the caption embedding lies below the image embedding in every
    coordinate (the caption is an abstraction of the image), negative
    otherwise. Unlike the cosine it is no matrix product: all pairs of n
    images and m captions need n x m x D differences. They are computed in
    blocks of b images x b captions with b^2 D <= `max_elements` (one block
    at a time), so memory is bounded by the block and the n x m output, for
    a training batch and a 5K x 25K evaluation alike. Each block is one
    XLA-compiled function: the difference, the clipping, the square and the
    sum over D fuse into one loop, so the b x b x D differences are never
    written to memory (without XLA each of those steps made a pass over
    them through memory; on 2 CPU cores the fused block halves the time,
    `tools.bench_order_similarity`).

    Args:
      max_elements: the most difference elements held at once (2^24 = 64 MB
        of float32 by default).

    Call args:
      image_embeddings: float [n_images, D].
      text_embeddings: float [n_texts, D].

    Returns:
      float [n_images, n_texts], <= 0.
    """

    def __init__(self, max_elements=2**24, **kwargs):
        super().__init__(**kwargs)
        self.max_elements = max_elements

    def call(self, image_embeddings, text_embeddings):
        dim = image_embeddings.shape[-1]
        block = max(1, math.isqrt(self.max_elements // dim))
        images, n_images = split_blocks(image_embeddings, block)  # [I, b, D]
        texts, n_texts = split_blocks(text_embeddings, block)  # [T, b, D]

        def image_block_scores(image_block):
            return tf.map_fn(lambda text_block: block_scores(image_block, text_block), texts,
                             parallel_iterations=1)  # [T, b, b]

        scores = tf.map_fn(image_block_scores, images, parallel_iterations=1)  # [I, T, b, b]
        scores = tf.reshape(tf.transpose(scores, (0, 2, 1, 3)), (tf.shape(images)[0] * block, -1))
        return scores[:n_images, :n_texts]

    def compute_output_shape(self, image_embeddings_shape, text_embeddings_shape):
        return (image_embeddings_shape[0], text_embeddings_shape[0])

    def get_config(self):
        return {**super().get_config(), "max_elements": self.max_elements}


@tf.function(jit_compile=True)
def block_scores(image_block, text_block):
    """-|| max(0, c - i) ||^2 of every image and caption of two blocks:
    [b, D] x [b, D] -> [b, b], fused by XLA."""
    violation = tf.nn.relu(text_block[None, :, :] - image_block[:, None, :])  # [b, b, D], never materialised
    return -tf.reduce_sum(tf.square(violation), axis=-1)


def split_blocks(x, block):
    """[n, D] -> ([ceil(n / block), block, D] zero-padded, n)."""
    n = tf.shape(x)[0]
    padded = tf.pad(x, [[0, (-n) % block], [0, 0]])
    return tf.reshape(padded, (-1, block, x.shape[-1])), n

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
    blocks of b images x b' captions (b, b' <= sqrt(`max_elements`), and no
    more than their side's rows), one block at a time, so memory is bounded
    by the block and the n x m output, for a training batch and a 5K x 25K
    evaluation alike. Each block is one XLA-compiled loop over the D
    coordinates that adds the coordinate's b x b' clipped squared
    differences to the block's scores: the differences are never written
    to memory, and each step runs along contiguous rows of b' captions
    (summing over D innermost, one pair at a time, was 6x slower at
    b = 1024, and unfused TensorFlow ops slower still;
    `tools.bench_order_similarity`). The gradient is written out, a
    loop of the same kind: d S / d c = -2 max(0, c - i) and
    d S / d i = 2 max(0, c - i), each weighted by the scores' gradient and
    summed over the other side.

    Args:
      max_elements: the most scores of a block (2^20, b = 1024: 4 MB of
        float32, by default).

    Call args:
      image_embeddings: float [n_images, D].
      text_embeddings: float [n_texts, D].

    Returns:
      float [n_images, n_texts], <= 0.
    """

    def __init__(self, max_elements=2**20, **kwargs):
        super().__init__(**kwargs)
        self.max_elements = max_elements

    def call(self, image_embeddings, text_embeddings):
        # Blocks of b images x b' captions, each side no larger than its
        # input (a training batch is one block).
        side = max(1, math.isqrt(self.max_elements))
        image_block, text_block = (_block_size(x, side) for x in (image_embeddings, text_embeddings))
        images, n_images = split_blocks(image_embeddings, image_block)  # [I, b, D]
        texts, n_texts = split_blocks(text_embeddings, text_block)  # [T, b', D]

        def image_block_scores(image_block):
            return tf.map_fn(lambda text_block: block_scores(image_block, text_block), texts,
                             parallel_iterations=1)  # [T, b, b']

        scores = tf.map_fn(image_block_scores, images, parallel_iterations=1)  # [I, T, b, b']
        scores = tf.reshape(tf.transpose(scores, (0, 2, 1, 3)), (tf.shape(images)[0] * image_block, -1))
        return scores[:n_images, :n_texts]

    def pairs(self, image_embeddings, text_embeddings):
        """-|| max(0, c - i) ||^2 of aligned pairs: [P, D] x [P, D] -> [P]
        (P x D differences: no blocks needed)."""
        images, texts = (tf.cast(x, self.compute_dtype) for x in (image_embeddings, text_embeddings))
        return -tf.reduce_sum(tf.square(tf.nn.relu(texts - images)), axis=-1)

    def compute_output_shape(self, image_embeddings_shape, text_embeddings_shape):
        return (image_embeddings_shape[0], text_embeddings_shape[0])

    def get_config(self):
        return {**super().get_config(), "max_elements": self.max_elements}


@tf.custom_gradient
def block_scores(image_block, text_block):
    """-|| max(0, c - i) ||^2 of every image and caption of two blocks:
    [b, D] x [b, D] -> [b, b], with its gradient."""

    def gradient(d_scores):
        return violation_gradients(image_block, text_block, d_scores)

    # Out of the tape's sight: its gradient would keep every step's values.
    return -violation_sums(tf.stop_gradient(image_block), tf.stop_gradient(text_block)), gradient


@tf.function(jit_compile=True)
def violation_sums(image_block, text_block):
    """|| max(0, c - i) ||^2, [b_i, b_t]: a loop over the D coordinates."""
    images, texts = tf.transpose(image_block), tf.transpose(text_block)  # [D, b]

    def add_coordinate(d, total):
        violation = tf.nn.relu(texts[d][None, :] - images[d][:, None])  # [b_i, b_t]
        return d + 1, total + violation * violation

    total = tf.zeros((tf.shape(image_block)[0], tf.shape(text_block)[0]), image_block.dtype)
    return tf.while_loop(lambda d, _: d < tf.shape(images)[0], add_coordinate, (0, total))[1]


@tf.function(jit_compile=True)
def violation_gradients(image_block, text_block, d_scores):
    """The gradients of sum(d_scores * S) for the images and the captions
    (S = -|| max(0, c - i) ||^2): [b_i, D], [b_t, D], a loop over the D
    coordinates as `violation_sums`."""
    images, texts = tf.transpose(image_block), tf.transpose(text_block)  # [D, b]
    dim = image_block.shape[-1]  # XLA needs the arrays' size

    def coordinate(d, d_images, d_texts):
        weighted = d_scores * tf.nn.relu(texts[d][None, :] - images[d][:, None])  # [b_i, b_t]
        return d + 1, d_images.write(d, 2 * tf.reduce_sum(weighted, axis=1)), d_texts.write(
            d, -2 * tf.reduce_sum(weighted, axis=0))

    arrays = [tf.TensorArray(image_block.dtype, size=dim) for _ in range(2)]
    _, d_images, d_texts = tf.while_loop(lambda d, *_: d < dim, coordinate, (0, *arrays))
    return tf.transpose(d_images.stack()), tf.transpose(d_texts.stack())


def _block_size(x, side):
    """min(side, rows of x), at least 1: a Python int when the rows are known."""
    rows = x.shape[0]
    return max(1, min(side, rows)) if rows is not None else tf.clip_by_value(tf.shape(x)[0], 1, side)


def split_blocks(x, block):
    """[n, D] -> ([ceil(n / block), block, D] zero-padded, n)."""
    n = tf.shape(x)[0]
    padded = tf.pad(x, [[0, (-n) % block], [0, 0]])
    return tf.reshape(padded, (-1, block, x.shape[-1])), n

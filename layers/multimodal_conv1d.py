"""m-CNN's multimodal convolution, factorised into a text and an image part."""

import keras
from keras import ops

from layers.gated_conv1d import pool_pairs, window_any


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class MultimodalConv1D(keras.layers.Layer):
    """The multimodal convolution + max-pooling of Ma et al. 2015 (eqs. 5,
    8, with the gate of eq. 6 and the pooling of eq. 7): every window of
    `window` word (or phrase) vectors is concatenated with the image vector
    and convolved,

        a^i = w [u^i || ... || u^{i+k-1} || nu_im] + b
            = (sum_j W^(j) u^{i+j} + b) + V nu_im  =  T^i(sentence) + I(image)
        nu^i = g_i * ReLU(T^i + I)                                   (5/8, 6)
        out^i = max(nu^{2i}, nu^{2i+1})                                  (7)

    The pre-activation is linear in the concatenation, so it splits exactly
    into a text part T (computed once per sentence) and an image part I
    (once per image). Max-pooling commutes with adding a position-independent
    I under the monotone ReLU, and a gated 0 never wins against a real unit,
    so out^i = g^_i * ReLU(T^_i + I) with T^ the max of T over the real
    windows of each pooled pair and g^ their "any" gate: a pair of (image,
    sentence) costs one broadcast add, ReLU and gate (`combine`).

    The image enters every window that starts on a real word (eq. 5 puts one
    copy per window; the paper zero-pads "the image and word representation"
    where the sentence is padded); those are exactly the windows the gate
    keeps, so the gate depends on the sentence mask alone.

    Args:
      filters: feature maps (200 at layer 1, 300 at layers 2-3).
      window: k_rp (3).
      pool: max-pooling size and stride (2).

    `text_part`, `image_part` and `combine` need the weights: call the
    layer once or `build` it first. They compute in the layer's compute
    dtype (bfloat16 under mixed precision) by casting the weights
    themselves: Keras' autocast only reaches `call`.

    Call args (the literal layer on aligned pairs):
      inputs: float [B, P, C] word or phrase vectors.
      mask: [B, P], 1 at real positions.
      image: float [B, d] image vectors nu_im.

    Returns:
      (float [B, P', filters], float [B, P'] mask), P' = (P - window + 1) // pool.
    """

    def __init__(self, filters, window=3, pool=2, **kwargs):
        super().__init__(**kwargs)
        self.filters = filters
        self.window = window
        self.pool = pool

    def build(self, inputs_shape, mask_shape=None, image_shape=None):
        self.text_kernel = self.add_weight(
            name="text_kernel", shape=(self.window, inputs_shape[-1], self.filters), initializer="glorot_uniform"
        )
        self.image_kernel = self.add_weight(
            name="image_kernel", shape=(image_shape[-1], self.filters), initializer="glorot_uniform"
        )
        self.bias = self.add_weight(name="bias", shape=(self.filters,), initializer="zeros")

    def text_part(self, inputs, mask):
        """float [B, P, C], mask [B, P] -> (T^ float [B, P', F], g^ float [B, P'])."""
        gate = window_any(ops.cast(mask, self.compute_dtype), self.window)
        kernel, bias = (ops.cast(w, self.compute_dtype) for w in (self.text_kernel, self.bias))
        pre = ops.conv(inputs, kernel, padding="valid") + bias
        pooled = pool_pairs(ops.where(gate[..., None] > 0, pre, float("-inf")), self.pool)
        pooled_gate = pool_pairs(gate, self.pool)
        return ops.where(pooled_gate[..., None] > 0, pooled, 0.0), pooled_gate

    def image_part(self, image):
        """float [N, d] -> I float [N, F]."""
        return ops.matmul(image, ops.cast(self.image_kernel, self.compute_dtype))

    @staticmethod
    def combine(text, gate, image):
        """g^ * ReLU(T^ + I), broadcasting: text [..., P', F], gate [..., P'],
        image [..., F] (e.g. [n, 1, F] against [1, m, P', F] for all pairs)."""
        return ops.relu(text + image[..., None, :]) * gate[..., None]

    def call(self, inputs, mask, image):
        text, gate = self.text_part(inputs, mask)
        return self.combine(text, gate, self.image_part(image)), gate

    def compute_output_shape(self, inputs_shape, mask_shape=None, image_shape=None):
        length = None if inputs_shape[1] is None else (inputs_shape[1] - self.window + 1) // self.pool
        return (inputs_shape[0], length, self.filters), (inputs_shape[0], length)

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "window": self.window, "pool": self.pool}

"""One convolution + max-pooling stage of m-CNN, with the zero gate."""

import keras
from keras import ops


def window_any(mask, window):
    """[B, P] 0/1 -> [B, P - window + 1]: 1 where any of the `window`
    positions starting there is 1 (a valid-mode window has a real input)."""
    length = mask.shape[1]
    width = length - window + 1
    return ops.max(ops.stack([mask[:, j : j + width] for j in range(window)], axis=-1), axis=-1)


def pool_pairs(x, pool):
    """Non-overlapping max-pooling over `pool` positions (eq. 7):
    [B, P, ...] -> [B, P // pool, ...]; a trailing odd position is dropped."""
    length = (x.shape[1] // pool) * pool
    x = x[:, :length]
    return ops.max(ops.reshape(x, (-1, length // pool, pool, *x.shape[2:])), axis=2)


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class GatedConv1D(keras.layers.Layer):
    """A gated convolution followed by max-pooling (Ma et al. 2015, eqs. 3,
    4, 6, 7), the unimodal stage of m-CNN's sentence and matching CNNs.

        nu^i_f = g(window_i) * ReLU(w_f [nu^i || ... || nu^{i+k-1}] + b_f)   (3, 4, 6)
        out^i  = max(nu^{2i}, nu^{2i+1})                                      (7)

    The window is `window` positions with stride 1 and no border padding
    ("valid": 30 -> 28 -> 14 -> 12 -> 6 -> 4 -> 2 positions, the only
    reading under which the paper's sizes pool evenly). The gate g of eq. 6 is
    0 for a window whose inputs are all padding: it is computed from the
    sequence mask, not by comparing floats with 0 (which would also gate a
    real window whose ReLU inputs happen to be all 0), and propagated: a
    pooled position is real if either of its inputs is.

    Args:
      filters: feature maps (Table 1: 200, 300, 300).
      window: k_rp, the window size (3).
      pool: max-pooling size and stride (2).

    Call args:
      inputs: float [B, P, C].
      mask: [B, P], 1 (or True) at real positions.

    Returns:
      (float [B, P', filters], float [B, P'] mask), P' = (P - window + 1) // pool.
      Gated positions are exactly 0.
    """

    def __init__(self, filters, window=3, pool=2, **kwargs):
        super().__init__(**kwargs)
        self.filters = filters
        self.window = window
        self.pool = pool

    def build(self, inputs_shape, mask_shape=None):
        self.kernel = self.add_weight(
            name="kernel", shape=(self.window, inputs_shape[-1], self.filters), initializer="glorot_uniform"
        )
        self.bias = self.add_weight(name="bias", shape=(self.filters,), initializer="zeros")

    def call(self, inputs, mask):
        gate = window_any(ops.cast(mask, self.compute_dtype), self.window)
        outputs = ops.relu(ops.conv(inputs, self.kernel, padding="valid") + self.bias) * gate[..., None]
        # A gated 0 never wins a max against a real unit (ReLU >= 0).
        return pool_pairs(outputs, self.pool), pool_pairs(gate, self.pool)

    def compute_output_shape(self, inputs_shape, mask_shape=None):
        length = None if inputs_shape[1] is None else (inputs_shape[1] - self.window + 1) // self.pool
        return (inputs_shape[0], length, self.filters), (inputs_shape[0], length)

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "window": self.window, "pool": self.pool}

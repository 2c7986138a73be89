"""One GRU per capsule, all run as a single batched recurrence."""

import keras
import tensorflow as tf
from keras import ops


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class CapsuleGRU(keras.layers.Layer):
    """`num_capsules` independent GRUs, one per capsule (Francis et al. 2018).

    Each capsule's GRU follows eqs. 1-4 of the paper (Cho et al.'s GRU, the
    reset gate applied before the recurrent product):

        z_s  = sigmoid(W_xz x_s + W_hz h_{s-1} + b_z)                  (1)
        r_s  = sigmoid(W_xr x_s + W_hr h_{s-1} + b_r)                  (2)
        h~_s = act(W_xh x_s + W_hh (r_s o h_{s-1}) + b_h)              (3)
        h_s  = (1 - z_s) o h_{s-1} + z_s o h~_s                        (4)

    with `act = tanh` for the embedding GRUs `GRU_emb_i` (eq. 5) and
    `act = sigmoid` for the mask GRUs `GRU_mask_i` (eq. 6): the masked
    sigmoid-GRU, whose states are masks in (0, 1) (from h_0 = 0, every
    state is a convex combination of the previous one and a sigmoid).

    The weights of all capsules are stacked ([N, ...]) and the N GRUs step
    through time together: one scan and one batched matmul per step, not N
    separate recurrent layers.

    Args:
      units: state size of each GRU.
      num_capsules: N, the number of GRUs.
      candidate_activation: `act` of eq. 3, "tanh" or "sigmoid".

    Call args:
      inputs: float [B, L, F], one sequence read by every capsule, or
        [B, N, L, F], one sequence per capsule (the masked inputs
        `m_i o x` of eqs. 5-6).
      mask: optional bool [B, L], True at real words (Keras masking is
        supported). A GRU keeps its state over masked steps, so its output
        is the state after the last real word.

    Returns:
      float [B, N, units]: each GRU's last valid state.
    """

    def __init__(self, units, num_capsules=1, candidate_activation="tanh", **kwargs):
        super().__init__(**kwargs)
        if candidate_activation not in ("tanh", "sigmoid"):
            raise ValueError(f"candidate_activation must be 'tanh' or 'sigmoid', got {candidate_activation!r}")
        self.units = units
        self.num_capsules = num_capsules
        self.candidate_activation = candidate_activation
        self.supports_masking = True

    def build(self, inputs_shape, mask_shape=None):
        features = inputs_shape[-1]
        # Each capsule's GRU is initialised as a Keras GRU is: Glorot-uniform
        # input weights, orthogonal recurrent weights, zero biases.
        self.kernel = self.add_weight(
            shape=(self.num_capsules, features, 3 * self.units),
            initializer=_per_capsule(keras.initializers.GlorotUniform),
            name="kernel",
        )
        self.recurrent_kernel = self.add_weight(
            shape=(self.num_capsules, self.units, 3 * self.units),
            initializer=_per_capsule(keras.initializers.Orthogonal),
            name="recurrent_kernel",
        )
        self.bias = self.add_weight(shape=(self.num_capsules, 1, 3 * self.units), initializer="zeros", name="bias")

    def call(self, inputs, mask=None):
        # Input projections of every step at once, time-major and
        # capsule-major: [L, N, B, 3U].
        if len(inputs.shape) == 3:
            projected = ops.einsum("blf,nfk->lnbk", inputs, self.kernel)
        else:
            projected = ops.einsum("bnlf,nfk->lnbk", inputs, self.kernel)
        projected = projected + self.bias
        batch, steps = ops.shape(inputs)[0], ops.shape(projected)[0]
        valid = ops.ones((steps, batch), "bool") if mask is None else ops.transpose(ops.cast(mask, "bool"))
        act = ops.sigmoid if self.candidate_activation == "sigmoid" else ops.tanh
        recurrent_gates = self.recurrent_kernel[:, :, : 2 * self.units]
        recurrent_candidate = self.recurrent_kernel[:, :, 2 * self.units :]

        def step(state, step_inputs):
            x, is_word = step_inputs  # [N, B, 3U], [B]
            x_z, x_r, x_h = ops.split(x, 3, axis=-1)
            h_z, h_r = ops.split(ops.matmul(state, recurrent_gates), 2, axis=-1)
            z = ops.sigmoid(x_z + h_z)  # eq. 1
            r = ops.sigmoid(x_r + h_r)  # eq. 2
            candidate = act(x_h + ops.matmul(r * state, recurrent_candidate))  # eq. 3
            new_state = (1 - z) * state + z * candidate  # eq. 4
            return ops.where(is_word[None, :, None], new_state, state)

        initial = ops.zeros((self.num_capsules, batch, self.units), projected.dtype)
        # tf.scan, not keras.ops.scan: the latter fails on a sequence length
        # unknown at trace time (Keras 3.15).
        states = tf.scan(step, (projected, valid), initializer=initial)
        return ops.transpose(states[-1], (1, 0, 2))

    def compute_mask(self, inputs, mask=None):
        # The output is one state per capsule, not a sequence.
        return None

    def compute_output_shape(self, inputs_shape, mask_shape=None):
        return (inputs_shape[0], self.num_capsules, self.units)

    def forward_flops(self, tokens):
        """FLOPs of the forward matrix products over `tokens` tokens: every
        capsule's input and recurrent projections, 2 x 3H x (F + H) each."""
        return 2 * tokens * self.num_capsules * 3 * self.units * (self.kernel.shape[1] + self.units)

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "num_capsules": self.num_capsules,
            "candidate_activation": self.candidate_activation,
        }


def _per_capsule(initializer_class):
    """Initialises [N, rows, cols] as N independent [rows, cols] matrices.

    A Keras initializer would treat N as a receptive field, and one unseeded
    instance returns the same values on every call: each capsule gets a new
    instance (seeded from the global seed, so `keras.utils.set_random_seed`
    still makes runs repeatable)."""

    def initialize(shape, dtype=None):
        return ops.stack([initializer_class()(shape[1:], dtype=dtype) for _ in range(shape[0])])

    return initialize

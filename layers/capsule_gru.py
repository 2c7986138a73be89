"""One GRU per capsule, all run as a single batched recurrence over the
real words only."""

import keras
import tensorflow as tf
from keras import ops

from layers.packed_gru import in_xla_context, pack_by_length

# The candidate activations of eq. 3, each with its derivative as a
# function of its output.
ACTIVATIONS = {
    "tanh": (tf.tanh, lambda output: 1 - output * output),
    "sigmoid": (tf.sigmoid, lambda output: output * (1 - output)),
}


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
    through time together: one loop and one batched matmul per step, not N
    separate recurrent layers.

    The recurrence spends no compute on padding, as `PackedGRU` (VSE++'s
    packed sequences): the batch is sorted by length (longest first, with
    `pack_by_length`), the input projections x W + b of the real words
    only are one batched matmul before the loop, and step t updates the
    n_t sequences still going, the first n_t sorted rows of every capsule.
    Its backward pass is written out (`tf.custom_gradient`): the reverse
    loop carries only the [N, n_t, U] state gradient, and the recurrent
    kernels' gradient is one [U, T] x [T, 3U] product per capsule over the
    T real words after it. Outputs and gradients equal the padded
    computation's (tests: 1e-5 on real captions). Under XLA, which compiles
    fixed shapes only, the layer steps through every padded position
    instead (a `tf.scan`, each state kept over padding).

    Args:
      units: state size of each GRU.
      num_capsules: N, the number of GRUs.
      candidate_activation: `act` of eq. 3, "tanh" or "sigmoid".

    Call args:
      inputs: float [B, L, F], one sequence read by every capsule, or
        [B, N, L, F], one sequence per capsule (the masked inputs
        `m_i o x` of eqs. 5-6).
      mask: optional bool [B, L], True at real words, which precede the
        padding (Keras masking is supported). A GRU's output is its state
        after the last real word (zeros for an empty sequence).
      training: whether each step keeps what the written-out backward pass
        needs (outside training, autodiff of the loop gives gradients, more
        slowly).

    Returns:
      float [B, N, units]: each GRU's last valid state.
    """

    def __init__(self, units, num_capsules=1, candidate_activation="tanh", **kwargs):
        super().__init__(**kwargs)
        if candidate_activation not in ACTIVATIONS:
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

    def call(self, inputs, mask=None, training=False):
        if in_xla_context():
            return self._padded_recurrence(inputs, mask)
        per_capsule = len(inputs.shape) == 4
        # The real words, time-major over the batch sorted by length:
        # [T, F], or [T, N, F] from [B, L, N, F].
        order, alive, _, tokens = pack_by_length(ops.transpose(inputs, (0, 2, 1, 3)) if per_capsule else inputs, mask)
        # Input projections of every real word at once, capsule-major: [N, T, 3U].
        tokens = ops.transpose(tokens, (1, 0, 2)) if per_capsule else tokens[None]
        projected = ops.matmul(tokens, self.kernel) + self.bias
        states = _packed_recurrence(
            projected,
            tf.convert_to_tensor(self.recurrent_kernel),
            alive,
            ops.shape(inputs)[0],
            self.candidate_activation,
            training=training,
        )
        return ops.take(states, ops.argsort(order), axis=0)

    def _padded_recurrence(self, inputs, mask):
        """Every step of the padded batch (XLA compiles fixed shapes only),
        each GRU keeping its state over padding."""
        # Input projections of every step at once, time-major and
        # capsule-major: [L, N, B, 3U].
        if len(inputs.shape) == 3:
            projected = ops.einsum("blf,nfk->lnbk", inputs, self.kernel)
        else:
            projected = ops.einsum("bnlf,nfk->lnbk", inputs, self.kernel)
        projected = projected + self.bias
        batch, steps = ops.shape(inputs)[0], ops.shape(projected)[0]
        valid = ops.ones((steps, batch), "bool") if mask is None else ops.transpose(ops.cast(mask, "bool"))
        act = ACTIVATIONS[self.candidate_activation][0]
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


def _packed_recurrence(projected, recurrent_kernel, alive, batch, activation, training):
    """The N capsules' GRUs (eqs. 1-4) over length-sorted sequences, with
    their gradient.

    Args:
      projected: float [N, T, 3U] (U = units), x W + b of the T real
        words, each capsule's time-major (step t's n_t rows, then step
        t + 1's), longest sequence first.
      recurrent_kernel: float [N, U, 3U], the capsules' [W_hz W_hr W_hh].
      alive: int [L], n_t, the number of sequences longer than t.
      batch: int, B.
      activation: the candidate activation, "tanh" or "sigmoid".
      training: whether to keep each step's values for the written-out
        backward pass.

    Returns:
      float [B, N, U]: each sequence's last states, in sorted order.
    """
    capsules, units = recurrent_kernel.shape[0], recurrent_kernel.shape[1]
    dtype = projected.dtype
    act, act_derivative = ACTIVATIONS[activation]
    steps = tf.shape(alive)[0]
    # n_t for t = -1 .. L: every row before the first step, none after the last.
    alive = tf.concat([[batch], alive, [0]], axis=0)
    offsets = tf.cumsum(alive[1:], exclusive=True)  # step t's first word in `projected`
    # The loop keeps step t's [N, n_t, K] values as N n_t rows of K. In the
    # concatenation of every step's rows, capsule i's word j (the k-th of
    # step t) is row N o_t + i n_t + k, o_t = offsets[t]:
    step_of_word = tf.repeat(tf.range(steps), alive[1:-1])
    first, width = tf.gather(offsets, step_of_word), tf.gather(alive[1:], step_of_word)
    words = tf.range(tf.shape(projected)[1])
    capsule_major_rows = capsules * first + tf.range(capsules)[:, None] * width + (words - first)  # [N, T]

    def array(size):
        return tf.TensorArray(dtype, size=size, infer_shape=False, element_shape=[None, None], clear_after_read=False)

    def write(steps_array, t, values):
        return steps_array.write(t, tf.reshape(values, [-1, values.shape[-1]]))

    def read(steps_array, t):
        return tf.reshape(steps_array.read(t), [capsules, -1, units])

    def capsule_major(steps_array):
        """Every step's values as [N, T, K]."""
        return tf.gather(steps_array.concat(), capsule_major_rows)

    def batch_major(values):
        return tf.transpose(values, [1, 0, 2])

    def run(projected, recurrent_kernel, save):
        """The last states, and (with `save`) each step's h, z, r and h~
        for the backward pass."""
        u_zr, u_h = recurrent_kernel[:, :, : 2 * units], recurrent_kernel[:, :, 2 * units :]

        def step(t, state, finals, saved):
            n = alive[t + 1]
            # The rows that ended at step t - 1, batch-major.
            finals = finals.write(steps - t, tf.reshape(batch_major(state[:, n:]), [-1, units]))
            state = state[:, :n]
            x_zr, x_h = tf.split(projected[:, offsets[t] : offsets[t] + n], [2 * units, units], axis=-1)
            z, r = tf.split(tf.sigmoid(x_zr + state @ u_zr), 2, axis=-1)  # eqs. 1-2
            candidate = act(x_h + (r * state) @ u_h)  # eq. 3
            saved = [write(a, t, v) for a, v in zip(saved, (state, z, r, candidate))]
            return t + 1, (1 - z) * state + z * candidate, finals, saved  # eq. 4

        saved = [array(steps) for _ in range(4 if save else 0)]
        _, state, finals, saved = tf.while_loop(
            lambda t, *_: t < steps,
            step,
            (0, tf.zeros([capsules, batch, units], dtype), array(steps + 1), saved),
            shape_invariants=(tf.TensorShape([]), tf.TensorShape([capsules, None, units]), None, [None] * len(saved)),
        )
        # Index 0 holds the rows still running after the last step, index
        # L - t those that ended at step t: rows in sorted order.
        finals = finals.write(0, tf.reshape(batch_major(state), [-1, units]))
        return tf.reshape(finals.concat(), [-1, capsules, units]), saved

    def forward(projected, recurrent_kernel):
        final, saved = run(projected, recurrent_kernel, save=True)
        u_zr, u_h = recurrent_kernel[:, :, : 2 * units], recurrent_kernel[:, :, 2 * units :]

        def backward(d_final):
            d_final = batch_major(tf.convert_to_tensor(d_final))  # IndexedSlices from the unsorting gather

            def step(t, d_state, d_projected):
                # Eqs. 4, 3, 2, 1 backwards, from the gradient of h_t to
                # those of the gates' pre-activations and of h_{t-1}.
                n = alive[t + 1]
                state, z, r, candidate = (read(a, t) for a in saved)
                d_candidate = d_state * z * act_derivative(candidate)
                d_z = d_state * (candidate - state) * z * (1 - z)
                d_reset_state = tf.matmul(d_candidate, u_h, transpose_b=True)
                d_r = d_reset_state * state * r * (1 - r)
                d_zr = tf.concat([d_z, d_r], axis=-1)
                d_previous = d_state * (1 - z) + d_reset_state * r + tf.matmul(d_zr, u_zr, transpose_b=True)
                d_projected = write(d_projected, t, tf.concat([d_zr, d_candidate], axis=-1))
                # The rows that ended at step t - 1 take the output's gradient.
                return t - 1, tf.concat([d_previous, d_final[:, n : alive[t]]], axis=1), d_projected

            _, _, d_projected = tf.while_loop(
                lambda t, *_: t >= 0,
                step,
                (steps - 1, d_final[:, : alive[steps]], array(steps)),
                shape_invariants=(tf.TensorShape([]), tf.TensorShape([capsules, None, units]), None),
            )
            # The recurrent kernels' gradients over all T real steps at
            # once: [U, T] x [T, 3U] per capsule and block of gates.
            d_projected = capsule_major(d_projected)
            states, resets = capsule_major(saved[0]), capsule_major(saved[2])
            d_u_zr = tf.matmul(states, d_projected[..., : 2 * units], transpose_a=True)
            d_u_h = tf.matmul(resets * states, d_projected[..., 2 * units :], transpose_a=True)
            return d_projected, tf.concat([d_u_zr, d_u_h], axis=-1)

        return final, backward

    if not training:
        # Nothing kept for the written-out backward pass (autodiff of the
        # loop still gives the gradient, more slowly).
        return run(projected, recurrent_kernel, save=False)[0]
    return tf.custom_gradient(forward)(projected, recurrent_kernel)

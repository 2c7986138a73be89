"""A GRU that computes real tokens only (VSE++'s packed sequences, in TF)."""

from typing import NamedTuple

import keras
import tensorflow as tf
from tensorflow.python.ops import control_flow_util
from tensorflow.python.util import _pywrap_util_port

from common import machine


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class PackedGRU(keras.layers.GRU):
    """`keras.layers.GRU` (its weights, checkpoint layout, both `reset_after`
    variants and both dropouts) whose recurrence spends no compute on
    padding.

    Keras' GRU on a CPU runs every sequence of a batch for the batch's
    longest one and only selects, per padded step, whether a state
    advances. PyTorch's `pack_padded_sequence` (VSE++) runs step t on the
    sequences still going. So does this layer: it sorts the batch by length
    (longest first), so that the n_t sequences alive at step t are the
    first n_t rows, and at step t updates only those rows with Keras' GRU
    cell (Cho et al.; `reset_after` puts the reset gate after the
    recurrent product, as cuDNN and PyTorch):

        z  = sigmoid(x_t W_z + b_z + (h o m_z) U_z + c_z)
        r  = sigmoid(x_t W_r + b_r + (h o m_r) U_r + c_r)
        h~ = tanh(x_t W_h + b_h + r o ((h o m_h) U_h + c_h))     reset_after
        h~ = tanh(x_t W_h + b_h + (r o h o m_h) U_h)             otherwise
        h  = z o h + (1 - z) o h~

    (m: Keras' recurrent dropout masks, one per sequence and gate, ones
    outside training; c = 0 without `reset_after`). Outputs and gradients
    equal the padded computation's (tests: 1e-5).

    The backward pass is written out (`tf.custom_gradient`) rather than
    left to autodiff of the loop, which would add every step's [H, 3H]
    product into U's gradient and zero-fill each slice's gradient: the
    reverse loop carries only the [n_t, H] state gradient, and U's
    gradient is one [H, N] x [N, 3H] product over the N = sum_t n_t real
    steps after it, as cuDNN does. The input projection x W + b of all
    steps is one matmul before the loop. The steps' products read U or U^T,
    whichever this CPU's kernels multiply faster (`weights_read_transposed`:
    on AVX2, U^T for h U, twice as fast as U).

    Under XLA (fixed shapes only) and on a GPU where Keras runs cuDNN
    (which also skips padding), the layer is Keras' GRU itself.

    Only what the zoo uses: the last state (no sequences, no states
    returned), forward, default activations, zero initial state.

    Call args:
      sequences: float [B, L, F].
      mask: optional bool [B, L], True at real tokens, which precede the
        padding.
      training: whether dropout applies, and whether each step keeps what
        the written-out backward pass needs (outside training, autodiff of
        the loop gives gradients, more slowly).

    Returns:
      float [B, units]: each sequence's state after its last real token
      (zeros for an empty one, as Keras').
    """

    def __init__(self, units, **kwargs):
        super().__init__(units, **kwargs)
        if self.return_sequences or self.return_state or self.go_backwards:
            raise ValueError("PackedGRU returns the last state of a forward GRU only")
        if self.cell.activation is not keras.activations.tanh or (
            self.cell.recurrent_activation is not keras.activations.sigmoid
        ):
            raise ValueError("PackedGRU has the tanh/sigmoid activations of its written-out gradient")

    def call(self, sequences, initial_state=None, mask=None, training=False):
        if initial_state is not None:
            raise ValueError("PackedGRU starts from zeros")
        if self._keras_recurrence():
            return super().call(sequences, mask=mask, training=training)
        cell = self.cell
        batch = tf.shape(sequences)[0]
        order, alive, rows, tokens = pack_by_length(sequences, mask)

        units = self.units
        kernel = tf.convert_to_tensor(cell.kernel)
        if cell.use_bias and cell.reset_after:
            input_bias, recurrent_bias = tf.unstack(tf.convert_to_tensor(cell.bias))
        else:
            input_bias = tf.convert_to_tensor(cell.bias) if cell.use_bias else 0
            recurrent_bias = tf.zeros([3 * units], sequences.dtype)
        # Keras draws one dropout mask per sequence (per gate with recurrent
        # dropout, its implementation 1), the same at every step.
        if training and 0 < cell.dropout < 1:
            masks = _masks(cell.get_dropout_mask(sequences[:, 0]))
            parts = [(tokens * tf.gather(m, rows)) @ k for m, k in zip(masks, _gates(kernel, len(masks)))]
            projected = tf.concat(parts, axis=-1) + input_bias
        else:
            projected = tokens @ kernel + input_bias
        recurrent_masks = []
        if training and 0 < cell.recurrent_dropout < 1:
            state = tf.zeros([batch, units], sequences.dtype)
            recurrent_masks = [tf.gather(m, order) for m in _masks(cell.get_recurrent_dropout_mask(state))]
        # Keras' cell caches its masks for one call: not for the next trace.
        cell.reset_dropout_mask()
        cell.reset_recurrent_dropout_mask()
        state = _packed_recurrence(
            projected,
            tf.convert_to_tensor(cell.recurrent_kernel),
            recurrent_bias,
            alive,
            batch,
            *recurrent_masks,
            reset_after=cell.reset_after,
            training=training,
            read_transposed=weights_read_transposed(),
        )
        return tf.gather(state, tf.argsort(order))

    def forward_flops(self, tokens):
        """FLOPs of the forward matrix products over `tokens` real tokens:
        the input and recurrent projections, 2 x 3H x (F + H) a token."""
        return 2 * tokens * 3 * self.units * (self.cell.kernel.shape[0] + self.units)

    def _keras_recurrence(self):
        """Whether Keras' own GRU computes this call: under XLA, which
        compiles fixed shapes only (the active batch here shrinks), and
        where Keras uses cuDNN, which skips padding itself (a GPU, no
        recurrent dropout, reset_after)."""
        if in_xla_context():
            return True
        cudnn = self.use_cudnn in (True, "auto") and self.cell.reset_after and not self.cell.recurrent_dropout
        return cudnn and bool(tf.config.list_logical_devices("GPU"))

    def compute_mask(self, inputs, mask=None):
        return None


def pack_by_length(sequences, mask):
    """The real tokens of a batch, time-major over its rows sorted by length.

    Args:
      sequences: [B, L, ...].
      mask: bool [B, L], True at real tokens, which precede the padding; or
        None (every token is real).

    Returns:
      order: int [B], the rows sorted by length, longest first (stable).
      alive: int [L], n_t, the number of sequences longer than t.
      rows: int [N], each real token's row, N = sum_t n_t.
      tokens: [N, ...], the real tokens: step t's are those of the first
        n_t sorted rows, after step t - 1's.
    """
    batch, steps = tf.shape(sequences)[0], tf.shape(sequences)[1]
    lengths = tf.fill([batch], steps) if mask is None else tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    order = tf.argsort(lengths, direction="DESCENDING", stable=True)
    alive = tf.reduce_sum(tf.cast(tf.gather(lengths, order)[None, :] > tf.range(steps)[:, None], tf.int32), 1)
    rows = tf.gather(order, tf.ragged.range(alive).flat_values)
    tokens = tf.gather_nd(sequences, tf.stack([rows, tf.repeat(tf.range(steps), alive)], axis=1))
    return order, alive, rows, tokens


def in_xla_context():
    """Whether the graph being built is compiled by XLA (jit_compile=True),
    which needs fixed shapes: TF's own test."""
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def _masks(mask):
    return list(mask) if isinstance(mask, (list, tuple)) else [mask]


def _gates(matrix, count):
    """The z, r, h column blocks of a [., 3H] matrix, or the whole matrix."""
    return tf.split(matrix, 3, axis=-1) if count == 3 else [matrix]


def weights_read_transposed():
    """Whether the recurrent products x U and x U^T run faster reading the
    weights transposed (x U from U^T with `transpose_b`, x U^T from U) than
    as they are (x U from U, x U^T from a copy of U^T).

    TensorFlow's CPU matmul is oneDNN's sgemm, whose kernels depend on the
    instruction set. Measured on an AMD EPYC (one core, GFLOP/s, x [n, 1024]
    times [1024, 3072], n = 128 / 48 / 12; the AVX2 kernels under
    ONEDNN_MAX_CPU_ISA=AVX2): AVX2 reads U^T at 82 / 60 / 29 but U at
    46 / 43 / 30; AVX-512 reads U at 87 / 74 / 27 and U^T at 77 / 51 / 27;
    without oneDNN (TF_ENABLE_ONEDNN_OPTS=0, Eigen) U at 93 / 75 / 31 and
    U^T at 24 / 10 / 3. So: transposed on oneDNN below AVX-512.
    """
    level = machine.instruction_set(machine.TENSORFLOW_ISA_CAPS).level
    # TensorFlow's own test of whether its oneDNN kernels are on (no public API).
    return _pywrap_util_port.IsMklEnabled() and level in machine.X86_ISA_LEVELS[1:]


class _Weights(NamedTuple):
    """A weight matrix M and M^T, for products that read whichever of the
    two their kernel multiplies fastest (`weights_read_transposed`)."""

    matrix: tf.Tensor
    transposed: tf.Tensor

    def flipped(self):
        """M^T (and M)."""
        return _Weights(self.transposed, self.matrix)

    def split(self):
        """M's z, r, h column blocks, and [M_z M_r]."""
        columns = self.matrix.shape[-1]
        blocks = zip(tf.split(self.matrix, 3, axis=-1), tf.split(self.transposed, 3, axis=0))
        pair = _Weights(self.matrix[:, : 2 * columns // 3], self.transposed[: 2 * columns // 3])
        return (*(_Weights(*block) for block in blocks), pair)


def _packed_recurrence(projected, recurrent_kernel, recurrent_bias, alive, batch, *masks, reset_after, training,
                       read_transposed=False):
    """The GRU recurrence over length-sorted sequences, with its gradient.

    Args:
      projected: float [N, 3H], x W + b of the N real tokens, time-major
        (step t's n_t rows, then step t + 1's), longest sequence first.
      recurrent_kernel: float [H, 3H], U.
      recurrent_bias: float [3H], c (zeros without `reset_after`).
      alive: int [L], n_t, the number of sequences longer than t.
      batch: int, B.
      *masks: none, or the recurrent dropout masks m_z, m_r, m_h [B, H].
      reset_after: which GRU variant.
      training: whether to keep each step's values for the written-out
        backward pass.
      read_transposed: whether the step's products with U (forward) and
        U^T (backward) read U^T and U from memory, rather than U and U^T
        (`weights_read_transposed`).

    Returns:
      float [B, H]: each sequence's last state.
    """
    units = recurrent_kernel.shape[0]
    dtype = projected.dtype
    steps = tf.shape(alive)[0]
    # n_t for t = -1 .. L: every row before the first step, none after the last.
    alive = tf.concat([[batch], alive, [0]], axis=0)
    offsets = tf.cumsum(alive[1:], exclusive=True)  # step t's first row in `projected`

    def array(size):
        return tf.TensorArray(dtype, size=size, infer_shape=False, element_shape=[None, None], clear_after_read=False)

    def gate_inputs(state, rows):
        """h o m_z, h o m_r, h o m_h (the same h without recurrent dropout)."""
        return [state * m[:rows] for m in masks] if masks else [state] * 3

    def times(a, weights):
        """a M, reading M^T or M (`read_transposed`)."""
        if read_transposed:
            return tf.matmul(a, weights.transposed, transpose_b=True)
        return a @ weights.matrix

    def times_transpose(a, weights):
        """a M^T."""
        return times(a, weights.flipped())

    def run(projected, kernel, recurrent_bias, save):
        """The last states, and (with `save`) each step's h, z, r, h~ and
        the candidate's recurrent term for the backward pass."""
        u_z, u_r, u_h, u_zr = kernel.split()
        b_zr, b_h = recurrent_bias[: 2 * units], recurrent_bias[2 * units :]

        def step(t, state, finals, saved):
            n = alive[t + 1]
            finals = finals.write(steps - t, state[n:])  # the rows that ended at step t - 1
            state = state[:n]
            h_z, h_r, h_h = gate_inputs(state, n)
            x_zr, x_h = tf.split(projected[offsets[t] : offsets[t] + n], [2 * units, units], axis=-1)
            if masks:
                a_zr = tf.concat([times(h_z, u_z), times(h_r, u_r)], axis=-1) + b_zr
            elif reset_after:
                a_zr, a_h = tf.split(times(state, kernel) + recurrent_bias, [2 * units, units], axis=-1)
            else:
                a_zr = times(state, u_zr)
            z, r = tf.split(tf.sigmoid(x_zr + a_zr), 2, axis=-1)
            if reset_after:
                if masks:
                    a_h = times(h_h, u_h) + b_h
                candidate_input, extra = r * a_h, a_h
            else:
                extra = r * h_h
                candidate_input = times(extra, u_h)
            candidate = tf.tanh(x_h + candidate_input)
            saved = [a.write(t, v) for a, v in zip(saved, (state, z, r, candidate, extra))]
            return t + 1, z * state + (1 - z) * candidate, finals, saved

        saved = [array(steps) for _ in range(5 if save else 0)]
        _, state, finals, saved = tf.while_loop(
            lambda t, *_: t < steps,
            step,
            (0, tf.zeros([batch, units], dtype), array(steps + 1), saved),
            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, units]), None, [None] * len(saved)),
        )
        # Index 0 holds the rows still running after the last step, index
        # L - t those that ended at step t: rows in sorted order.
        return tf.ensure_shape(finals.write(0, state).concat(), [None, units]), saved

    def forward(projected, recurrent_kernel, recurrent_bias):
        kernel = _Weights(recurrent_kernel, tf.transpose(recurrent_kernel))
        final, saved = run(projected, kernel, recurrent_bias, save=True)
        u_z, u_r, u_h, u_zr = kernel.split()

        def backward(d_final):
            d_final = tf.convert_to_tensor(d_final)  # IndexedSlices from the unsorting gather

            def step(t, d_state, d_projected, d_gates):
                n = alive[t + 1]
                state, z, r, candidate, extra = (a.read(t) for a in saved)
                _, _, h_h = gate_inputs(state, n)
                d_candidate = d_state * (1 - z) * (1 - candidate * candidate)
                d_z = d_state * (state - candidate) * z * (1 - z)
                d_previous = d_state * z
                if reset_after:
                    d_a_h, d_r = d_candidate * r, d_candidate * extra
                else:
                    d_a_h = d_candidate
                    d_reset_state = times_transpose(d_candidate, u_h)
                    d_r, d_h_h = d_reset_state * h_h, d_reset_state * r
                d_r = d_r * r * (1 - r)
                d_a = tf.concat([d_z, d_r, d_a_h], axis=-1)
                if masks:
                    products = [times_transpose(d_z, u_z), times_transpose(d_r, u_r)]
                    products.append(times_transpose(d_a_h, u_h) if reset_after else d_h_h)
                    d_previous += tf.add_n([p * m[:n] for p, m in zip(products, masks)])
                elif reset_after:
                    d_previous += times_transpose(d_a, kernel)
                else:
                    d_previous += times_transpose(tf.concat([d_z, d_r], axis=-1), u_zr) + d_h_h
                d_x = tf.concat([d_z, d_r, d_candidate], axis=-1)
                d_projected = d_projected.write(t, d_x)
                # The rows that ended at step t - 1 take the output's gradient.
                d_state = tf.concat([d_previous, d_final[n : alive[t]]], axis=0)
                return t - 1, d_state, d_projected, d_gates.write(t, d_a)

            _, _, d_projected, d_gates = tf.while_loop(
                lambda t, *_: t >= 0,
                step,
                (steps - 1, d_final[: alive[steps]], array(steps), array(steps)),
                shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, units]), None, None),
            )
            # U's gradient over all N real steps at once: [H, N] x [N, 3H]
            # per block of gates that read the same recurrent input.
            d_a = d_gates.concat()
            states = saved[0].concat()
            rows = tf.ragged.range(alive[1 : steps + 1]).flat_values  # each step's row indices
            inputs = [states * tf.gather(m, rows) for m in masks] if masks else [states] * 3
            if not reset_after:
                inputs[2] = saved[4].concat()
            blocks, start = [], 0
            for gate in range(3):
                if gate == 2 or inputs[gate] is not inputs[gate + 1]:
                    blocks.append(tf.matmul(inputs[gate], d_a[:, start * units : (gate + 1) * units], transpose_a=True))
                    start = gate + 1
            d_kernel = tf.concat(blocks, axis=-1) if len(blocks) > 1 else blocks[0]
            d_bias = tf.reduce_sum(d_a, axis=0) if reset_after else tf.zeros_like(recurrent_bias)
            return d_projected.concat(), d_kernel, d_bias

        return final, backward

    if not training:
        # Nothing kept for the written-out backward pass (autodiff of the
        # loop still gives the gradient, more slowly).
        return run(projected, _Weights(recurrent_kernel, tf.transpose(recurrent_kernel)), recurrent_bias, save=False)[0]
    return tf.custom_gradient(forward)(projected, recurrent_kernel, recurrent_bias)

"""The Recurrent Capsule Network (Francis et al. 2018, "Embedding Images and
Sentences in a Common Space with a Recurrent Capsule Network").

Text: word embedding W_w (300-d, from word2vec) -> the sentence goes
through N_c capsules T + 1 times; each capsule i holds an embedding GRU and
a mask GRU reading the same masked sentence `m_i^(t-1) o x` (eqs. 5-6),
and routing by agreement (eqs. 7-10) mixes the capsules' masks for the next
pass and their embeddings into the sentence embedding v^(t). Masks are all
ones at t = 0; the embedding of the last pass is kept. Image: an affine
map of the CNN feature. Both sides meet in a 1024-d space compared by
cosine, trained with the hardest-negative hinge loss (eqs. 11-13) plus
lambda times the mask regulariser (eqs. 14-15).

Registered rows of the paper's Table I:
- `rcn`: RCN-0.05, the paper's best model (4 capsules, 4 recursions,
  lambda = 0.05);
- `rcn-0`: RCN-0, the same without the regulariser;
- `rcn-gru`: "GRU", the special case of 1 capsule and 0 recursions, which
  is exactly one GRU (eqs. 1-4) trained under the RCN protocol.

Readings of the paper taken here (it is silent or ambiguous):
- Sizes: `m o x_l` needs V-dimensional masks (V = 300, the word size)
  while the paper says "each GRU has 1024-dimensional hidden states". The
  reading that type-checks: the mask GRUs have V-dimensional states, the
  embedding GRUs 1024-dimensional ones.
- "Four recursions ... we kept v^(5)": recursions are the passes after the
  first, so T recursions are T + 1 passes and the GRU row (0 recursions)
  is v^(1).
- The mask GRUs of the last pass would only produce masks nobody reads, so
  the last pass runs the embedding GRUs only (with 0 recursions there are
  no mask GRUs at all).
- The regulariser (eq. 14) is computed per sentence and averaged over the
  batch, by default on the routed masks m_i^(T) that are applied in the
  last pass (the masks that shape the kept embedding); eq. 14's m_i has no
  superscript and "we do not want a capsule to output only zero-masks"
  fits each capsule's own output m~_i^(T) as well
  (`model.regularized_masks=own`).
- lambda is stated against the paper's loss (the hardest negative's hinges,
  averaged over the batch). Under another loss it is scaled like the loss:
  times B - 1 with the sum of hinges (B - 1 negatives per pair instead of
  one), times B with a sum over the batch (`_HingeLoss.scale`), so that
  lambda = 0.05 weighs the same against the ranking loss in every preset.
- Routing (eqs. 9-10) uses signed dot products, as written. The paper's
  prose describes non-negative agreements ("masks composed of positive
  numbers", a disagreeing capsule's "participation remains marginal");
  `model.routing=nonnegative` clips agreements at 0, a labelled deviation
  (see `CapsuleRouting`). At the paper's sizes the literal routing stayed
  at chance on the embedded data (routed masks up to 10^6, dev rsum 17 and
  14 after two epochs, with or without clipping; docs/rcn.md), so the
  zoo's paper-length `rcn` row runs the non-negative one.
- GRUs are the paper's eqs. 1-4 (reset gate before the recurrent product),
  with Keras' GRU initialisation; the paper gives no initialisation.
- Training length and schedule are not given: 15 epochs at a constant
  learning rate, keeping the best model by dev rsum (see the registration,
  in `models/rcn_config.py` with the config classes and presets).
- Word vectors (a deviation): the paper initialises W_w from
  "precomputed word2vec embeddings" (Sec. IV.A; their corpus is not named,
  and the public 300-d ones, the 3.6 GB GoogleNews model, cannot ship
  here); by default word2vec is trained on the training captions, and
  `--set model.word_vectors=PATH` loads a vector file instead.
"""

import keras

from layers.capsule_gru import CapsuleGRU
from layers.capsule_mask_regularization import CapsuleMaskRegularization
from layers.capsule_routing import CapsuleRouting
from models.rcn_config import REGULARIZED_MASKS, ROUTINGS
from models.vse import VSEModel


@keras.saving.register_keras_serializable(package="retrieval_zoo")
class RecurrentCapsuleEncoder(keras.layers.Layer):
    """The RCN sentence encoder of Francis et al. 2018 (Sec. III.B, Fig. 3).

    For t = 1 .. T + 1, with m_i^(0) = 1:
        v_i^(t)  = GRU_emb_i(m_i^(t-1) o x)                            (5)
        m~_i^(t) = GRU_mask_i(m_i^(t-1) o x)                           (6)
        m_i^(t), v^(t) from the routing of eqs. 7-10
    and the output is v^(T+1).

    Args:
      units: state size of the embedding GRUs (1024); the mask GRUs' state
        size is the word vector size (see the module docstring).
      num_capsules: N_c.
      recursions: T, the passes after the first.
      regularization: lambda of eq. 15; 0 adds no loss.
      routing_epsilon: see `CapsuleRouting`.
      routing: "literal" or "nonnegative" (see `CapsuleRouting`).
      regularized_masks: "routed" (m^(T)) or "own" (m~^(T)), see
        `RCNConfig`.

    Call args:
      words: float [B, L, V] word vectors x.
      mask: optional bool [B, L], True at real words.

    Returns:
      float [B, units], the sentence embedding v^(T+1).

    In training, the routing of each pass t = 1 .. T publishes its
    diagnostics as "rcn/pass_t/..." (see `CapsuleRouting`).
    """

    def __init__(
        self,
        units,
        num_capsules=4,
        recursions=4,
        regularization=0.05,
        routing_epsilon=1e-4,
        routing="literal",
        regularized_masks="routed",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}, got {routing!r}")
        if regularized_masks not in REGULARIZED_MASKS:
            raise ValueError(f"regularized_masks must be one of {REGULARIZED_MASKS}, got {regularized_masks!r}")
        self.units = units
        self.num_capsules = num_capsules
        self.recursions = recursions
        self.regularization = regularization
        self.routing_epsilon = routing_epsilon
        self.routing_variant = routing
        self.regularized_masks = regularized_masks
        self.supports_masking = True
        self.embedding_grus = CapsuleGRU(units, num_capsules, "tanh", name="embedding_grus")
        self.routing = CapsuleRouting(routing_epsilon, nonnegative=routing == "nonnegative", name="routing")
        self.mask_regularization = (
            CapsuleMaskRegularization(regularization, name="mask_regularization") if regularization else None
        )

    def build(self, words_shape, mask_shape=None):
        # Masks multiply word vectors, so the mask GRUs' states have the
        # word vector size.
        if self.recursions:
            self.mask_grus = CapsuleGRU(words_shape[-1], self.num_capsules, "sigmoid", name="mask_grus")

    def call(self, words, mask=None, training=None):
        masks = None  # m^(0) = 1: the first pass reads x itself.
        for t in range(self.recursions + 1):
            inputs = words if masks is None else masks[:, :, None, :] * words[:, None, :, :]  # m_i o x
            embeddings = self.embedding_grus(inputs, mask=mask)  # eq. 5
            if t == self.recursions:
                return self.routing(embeddings)  # eq. 8: v^(T+1)
            # Two independent loops (all embedding GRUs, all mask GRUs), not
            # one for both: TensorFlow runs them in parallel, and a fused scan
            # measured 1.3x slower on a 2-core CPU.
            candidates = self.mask_grus(inputs, mask=mask)  # eq. 6
            regularize = self.mask_regularization is not None and t == self.recursions - 1
            if regularize and self.regularized_masks == "own":
                candidates = self.mask_regularization(candidates)  # eq. 14 on m~^(T)
            record_as = f"rcn/pass_{t + 1}" if training else None
            _, masks = self.routing(embeddings, candidates, record_as=record_as)  # eqs. 7, 9
            if regularize and self.regularized_masks == "routed":
                masks = self.mask_regularization(masks)  # eq. 14 on m^(T)

    def compute_mask(self, words, mask=None):
        return None

    def forward_flops(self, tokens):
        """The GRUs' matrix products over `tokens` tokens: T + 1 passes of
        the embedding GRUs, T of the mask GRUs."""
        flops = (self.recursions + 1) * self.embedding_grus.forward_flops(tokens)
        return flops + (self.recursions * self.mask_grus.forward_flops(tokens) if self.recursions else 0)

    def compute_output_shape(self, words_shape, mask_shape=None):
        return (words_shape[0], self.units)

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "num_capsules": self.num_capsules,
            "recursions": self.recursions,
            "regularization": self.regularization,
            "routing_epsilon": self.routing_epsilon,
            "routing": self.routing_variant,
            "regularized_masks": self.regularized_masks,
        }


class RCNModel(VSEModel):
    """The VSE pipeline of `models.vse` with the RCN as its sentence encoder."""

    def make_sentence_encoder(self, config):
        return RecurrentCapsuleEncoder(
            config.embed_dim,
            num_capsules=config.num_capsules,
            recursions=config.recursions,
            regularization=config.regularization,
            routing_epsilon=config.routing_epsilon,
            routing=config.routing,
            regularized_masks=config.regularized_masks,
        )

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
  learning rate, keeping the best model by dev rsum (see the registration).
- Word vectors (a deviation): the paper initialises W_w from
  "precomputed word2vec embeddings" (Sec. IV.A; their corpus is not named,
  and the public 300-d ones, the 3.6 GB GoogleNews model, cannot ship
  here); by default word2vec is trained on the training captions, and
  `--set model.word_vectors=PATH` loads a vector file instead.
"""

import dataclasses

import keras

from common.config import TrainConfig, setting
from layers.capsule_gru import CapsuleGRU
from layers.capsule_mask_regularization import CapsuleMaskRegularization
from layers.capsule_routing import CapsuleRouting
from models import registry
from models.vse import VSEConfig, VSEModel

ROUTINGS = ("literal", "nonnegative")
REGULARIZED_MASKS = ("routed", "own")


@dataclasses.dataclass
class RCNConfig(VSEConfig):
    """Hyperparameters of the RCN (Francis et al. 2018, Sec. IV.A); the
    defaults are RCN-0.05.

    Image features (a deliberate deviation): the embedded data is the
    1280-d head of EfficientNet-Lite0 (ImageNet weights, image and mirror
    averaged); the paper used the 2048-d penultimate layer of a ResNet-152
    pre-trained on ImageNet and fine-tuned on MSCOCO, averaged over 9 crops.

    Attributes (besides `VSEConfig`'s, whose defaults here are the paper's:
    300-d words, 1024-d embeddings, margin 0.2, hardest negative averaged
    over the batch, the 5000 most frequent training words, sentences cut at
    16 words, word2vec initialisation, here from word2vec trained on the
    training captions, not the paper's precomputed vectors):
      num_capsules: N_c (4).
      recursions: passes after the first (4, so v^(5) is kept).
      regularization: lambda of eq. 15 (0.05); needs N_c >= 2 and at least
        one recursion (masks to regularise).
      routing_epsilon: smallest magnitude of a routing denominator (see
        `CapsuleRouting`).
      routing: "literal" (eqs. 9-10 as written, signed agreements) or
        "nonnegative" (agreements clipped at 0, the reading of the paper's
        prose; a deviation, see `CapsuleRouting`).
      regularized_masks: what eq. 14 is computed on: "routed", the masks
        m_i^(T) of eq. 7 applied in the last pass, or "own", each capsule's
        own mask output m~_i^(T) of eq. 6 in the same pass (the paper's
        m_i, "we do not want a capsule to output only zero-masks", fits
        both).
    """

    hinge: str = "max"
    loss_reduction: str = "mean"
    vocab_min_count: int = 1
    vocab_max_size: int | None = 5000
    max_length: int | None = 16
    word_vectors: str | None = "word2vec"
    num_capsules: int = setting(4, minimum=1)
    recursions: int = setting(4, minimum=0)
    regularization: float = setting(0.05, minimum=0)
    routing_epsilon: float = setting(1e-4, above=0)
    routing: str = setting("literal", choices=ROUTINGS)
    regularized_masks: str = setting("routed", choices=REGULARIZED_MASKS)

    def __post_init__(self):
        super().__post_init__()
        if self.regularization and (self.num_capsules < 2 or self.recursions < 1):
            raise ValueError(
                "regularization (eq. 14) needs num_capsules >= 2 and recursions >= 1, got "
                f"{self.num_capsules} capsules and {self.recursions} recursions; set model.regularization=0"
            )


@dataclasses.dataclass
class RCN0Config(RCNConfig):
    """Table I "RCN-0": the RCN trained without the regulariser."""

    regularization: float = 0.0


@dataclasses.dataclass
class RCNGRUConfig(RCNConfig):
    """Table I "GRU": 1 capsule and 0 recursions, i.e. one 1024-d GRU."""

    num_capsules: int = 1
    recursions: int = 0
    regularization: float = 0.0


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


# Sec. IV.A: Adam at 2e-4, mini-batches of 16 pairs drawn from all training
# pairs; no gradient clipping is mentioned.
PAPER_TRAINING = TrainConfig(
    optimizer="adam",
    learning_rate=2e-4,
    batch_size=16,
    epochs=15,
    grad_clip_norm=None,
    sampling="all_captions",
)

# Sized for a 2-core CPU (about 12 minutes for `rcn`, 1 for `rcn-gru`):
# smaller GRUs and words (the RCN at the paper's sizes trains at 3 pairs/s
# there), batches of 128 (a step costs the same at 16 and 32: the
# recurrences' per-step overhead dominates), and the sum of hinges, which
# learns in few epochs where the hardest negative barely starts (`rcn-gru`
# here: dev rsum 42 after three epochs with the hardest negative, 108 after
# two with the sum; VSE++ Sec. 3.3 saw the same); lambda is scaled with it
# (`VSEModel.layer_loss_scale`). Gradients are clipped at a global norm of 2:
# the paper mentions no clipping, but it adopts the loss of VSE++ [20],
# whose protocol clips at 2, and the literal routing produces gradient
# spikes of 10^3-10^5 (against 20-60) that, unclipped, inflate Adam's second moment
# for the rest of a short run (see docs/rcn.md). Batches group captions of
# similar length (the paper draws random batches), which made the RCN 1.37x
# faster while its GRUs computed every padded step; now that they compute
# real words only (`CapsuleGRU`), grouping saves little, and it stays so
# that runs compare with the recorded ones. "compare" runs the same for 6
# epochs, the comparison of docs/rcn.md.
QUICK = {
    "model.hinge": "sum",
    "model.embed_dim": 256,
    "model.word_dim": 100,
    "train.batch_size": 128,
    "train.epochs": 3,
    "train.grad_clip_norm": 2.0,
    "train.bucket_by_length": True,
}
PRESETS = {"quick": QUICK, "compare": {**QUICK, "train.epochs": 6}}

for _name, _config_class in (("rcn", RCNConfig), ("rcn-0", RCN0Config), ("rcn-gru", RCNGRUConfig)):
    registry.register(
        registry.ModelSpec(
            name=_name,
            config_class=_config_class,
            build=RCNModel,
            train=PAPER_TRAINING,
            presets=PRESETS,
        )
    )

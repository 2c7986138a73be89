"""The RCN's settings (`models.rcn`): its config classes and the `rcn`,
`rcn-0` and `rcn-gru` registrations with their presets, without
TensorFlow, so a command's flags are checked before TensorFlow loads
(`models.registry`)."""

import dataclasses

from common.config import TrainConfig, setting
from models import registry
from models.vse_config import VSEConfig

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
            build=registry.deferred("models.rcn:RCNModel"),
            train=PAPER_TRAINING,
            presets=PRESETS,
        )
    )
